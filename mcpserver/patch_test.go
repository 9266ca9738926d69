package mcpserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParsePatch(t *testing.T) {
	text := `
<<'EOF'
*** Begin Patch
*** Add File: docs/new.md
+# Title
+
+body
*** Delete File: old.txt
*** Update File: src/app.py
*** Move to: src/main.py
@@ def greet():
-    print("hi")
+    print("hello")
@@
 x = 1
-y = 2
+y = 3
*** End of File

*** Update File: b.txt
 keep
-drop
*** End Patch
EOF
`
	files, err := parsePatch(strings.ReplaceAll(text, "\n", "\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []patchFile{
		{Kind: patchAdd, Path: "docs/new.md", Lines: []string{"# Title", "", "body"}},
		{Kind: patchDelete, Path: "old.txt"},
		{Kind: patchUpdate, Path: "src/app.py", MoveTo: "src/main.py", Chunks: []patchChunk{
			{Context: []string{"def greet():"}, Old: []string{`    print("hi")`}, New: []string{`    print("hello")`}},
			{Old: []string{"x = 1", "y = 2"}, New: []string{"x = 1", "y = 3"}, EOF: true},
		}},
		{Kind: patchUpdate, Path: "b.txt", Chunks: []patchChunk{{Old: []string{"keep", "drop"}, New: []string{"keep"}}}},
	}
	if !reflect.DeepEqual(files, want) {
		t.Fatalf("parsed\n%#v\nwant\n%#v", files, want)
	}
	again, err := parsePatch(formatPatch(files))
	if err != nil || !reflect.DeepEqual(again, files) {
		t.Fatalf("format/parse round trip: %v\n%#v", err, again)
	}
}

func TestParsePatchErrors(t *testing.T) {
	for name, text := range map[string]string{
		"empty":          "",
		"no begin":       "*** Update File: a\n@@\n-x\n*** End Patch",
		"no end":         "*** Begin Patch\n*** Add File: a\n+x\n",
		"nothing":        "*** Begin Patch\n*** End Patch",
		"bad header":     "*** Begin Patch\n*** Frobnicate File: a\n*** End Patch",
		"add without +":  "*** Begin Patch\n*** Add File: a\nx\n*** End Patch",
		"add no path":    "*** Begin Patch\n*** Add File: \n+x\n*** End Patch",
		"update no hunk": "*** Begin Patch\n*** Update File: a\n*** End Patch",
		"bad hunk line":  "*** Begin Patch\n*** Update File: a\n@@\n-x\n?y\n*** End Patch",
		"empty hunk":     "*** Begin Patch\n*** Update File: a\n@@ ctx\n*** End Patch",
		"eof outside":    "*** Begin Patch\n*** Update File: a\n*** End of File\n*** End Patch",
		"second no @@":   "*** Begin Patch\n*** Update File: a\n@@\n-x\n*** End of File\n-y\n*** End Patch",
		"move no path":   "*** Begin Patch\n*** Update File: a\n*** Move to: \n*** End Patch",
	} {
		if _, err := parsePatch(text); err == nil {
			t.Errorf("%s: parsed without error", name)
		} else if _, ok := err.(*patchError); !ok {
			t.Errorf("%s: error %T, want *patchError", name, err)
		}
	}
}

func TestApplyChunks(t *testing.T) {
	src := "a\nb\nc\nd\ne\nb\nf\n"
	for name, tc := range map[string]struct {
		chunks []patchChunk
		want   string
	}{
		"simple":         {[]patchChunk{{Old: []string{"c"}, New: []string{"C"}}}, "a\nb\nC\nd\ne\nb\nf\n"},
		"context anchor": {[]patchChunk{{Context: []string{"e"}, Old: []string{"b"}, New: []string{"B"}}}, "a\nb\nc\nd\ne\nB\nf\n"},
		"in order":       {[]patchChunk{{Old: []string{"b"}, New: []string{"1"}}, {Old: []string{"b"}, New: []string{"2"}}}, "a\n1\nc\nd\ne\n2\nf\n"},
		"eof":            {[]patchChunk{{Old: []string{"b", "f"}, New: []string{"z"}, EOF: true}}, "a\nb\nc\nd\ne\nz\n"},
		"pure add end":   {[]patchChunk{{New: []string{"g"}}}, "a\nb\nc\nd\ne\nb\nf\ng\n"},
		"add after ctx":  {[]patchChunk{{Context: []string{"a"}, New: []string{"a2"}}}, "a\na2\nb\nc\nd\ne\nb\nf\n"},
		"whitespace":     {[]patchChunk{{Old: []string{"  d  "}, New: []string{"D"}}}, "a\nb\nc\nD\ne\nb\nf\n"},
		"delete all":     {[]patchChunk{{Old: []string{"a", "b", "c", "d", "e", "b", "f"}}}, ""},
	} {
		got, err := applyChunks(src, tc.chunks)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", name, got, err, tc.want)
		}
	}
	for name, chunks := range map[string][]patchChunk{
		"missing":      {{Old: []string{"q"}, New: []string{"r"}}},
		"out of order": {{Old: []string{"e"}, New: []string{"E"}}, {Old: []string{"c"}, New: []string{"C"}}},
		"no context":   {{Context: []string{"nope"}, Old: []string{"a"}}},
		"eof wrong":    {{Old: []string{"a"}, New: []string{"A"}, EOF: true}},
	} {
		if _, err := applyChunks(src, chunks); err == nil {
			t.Errorf("%s: applied without error", name)
		}
	}
	if got, err := applyChunks("no newline", []patchChunk{{Old: []string{"no newline"}, New: []string{"fixed"}}}); err != nil || got != "fixed\n" {
		t.Errorf("no final newline: %q %v", got, err)
	}
}

// TestUnifiedDiffMatchesDiffU checks unifiedDiff against diff -u where the tool
// is installed (the expected hunks are the same; only the header dates differ).
func TestUnifiedDiffMatchesDiffU(t *testing.T) {
	tool, err := exec.LookPath("diff")
	if err != nil {
		t.Skip("diff not installed")
	}
	var a, b strings.Builder
	for i := 0; i < 40; i++ {
		line := "line " + strings.Repeat("x", i%7) + "\n"
		a.WriteString(line)
		switch {
		case i == 3:
			b.WriteString("changed\n")
		case i == 20:
		case i == 30:
			b.WriteString(line + "inserted\n")
		default:
			b.WriteString(line)
		}
	}
	for _, tc := range [][2]string{{a.String(), b.String()}, {"x\ny", "x\nz\n"}, {"", "new\n"}, {"old\n", ""}} {
		dirName := t.TempDir()
		pa, pb := filepath.Join(dirName, "a"), filepath.Join(dirName, "b")
		if err := os.WriteFile(pa, []byte(tc[0]), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pb, []byte(tc[1]), 0o644); err != nil {
			t.Fatal(err)
		}
		out, _ := exec.Command(tool, "-u", pa, pb).Output()
		lines := strings.SplitAfterN(string(out), "\n", 3)
		if len(lines) < 3 {
			t.Fatalf("diff -u printed %q", out)
		}
		want := "--- a/f\n+++ b/f\n" + lines[2]
		if got := unifiedDiff("f", tc[0], tc[1]); got != want {
			t.Errorf("unifiedDiff(%q, %q):\n%s\nwant (diff -u):\n%s", clip(tc[0], 30), clip(tc[1], 30), got, want)
		}
	}
}

func FuzzParsePatch(f *testing.F) {
	f.Add("*** Begin Patch\n*** Add File: a\n+x\n*** End Patch")
	f.Add("*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@ ctx\n x\n-y\n+z\n*** End of File\n*** Delete File: c\n*** End Patch\n")
	f.Add("*** Begin Patch\n*** Update File: a\n-x\n\n+y\n\n*** Add File: b\n*** End Patch")
	f.Add("<<EOF\n*** Begin Patch\n*** Delete File: a\n*** End Patch\nEOF")
	f.Fuzz(func(t *testing.T, text string) {
		files, err := parsePatch(text)
		if err != nil {
			if _, ok := err.(*patchError); !ok {
				t.Fatalf("error %T, want *patchError", err)
			}
			return
		}
		if len(files) == 0 {
			t.Fatal("a patch parsed to no files")
		}
		for _, pf := range files {
			if pf.Path == "" || strings.TrimSpace(pf.Path) != pf.Path {
				t.Fatalf("path %q is empty or untrimmed", pf.Path)
			}
			if pf.Kind == patchUpdate && len(pf.Chunks) == 0 && pf.MoveTo == "" {
				t.Fatal("an update without hunks or move")
			}
		}
		if strings.Contains(text, "\r") {
			return // a lone CR at a line end reads back as a CRLF line end
		}
		again, err := parsePatch(formatPatch(files))
		if err != nil {
			t.Fatalf("the canonical form does not parse: %v\n%s", err, formatPatch(files))
		}
		if !reflect.DeepEqual(again, files) {
			t.Fatalf("round trip changed the patch:\n%#v\n%#v", files, again)
		}
		// Applying any parsed update to any text must not panic.
		for _, pf := range files {
			_, _ = applyChunks(text, pf.Chunks)
		}
	})
}
