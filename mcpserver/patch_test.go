package mcpserver

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
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
		{Kind: patchAdd, Path: "docs/new.md", Content: "# Title\n\nbody\n"},
		{Kind: patchDelete, Path: "old.txt"},
		{Kind: patchUpdate, Path: "src/app.py", MoveTo: "src/main.py", Chunks: []patchChunk{
			{Context: []string{"def greet():"}, Lines: []hunkLine{{'-', "    print(\"hi\")\n"}, {'+', "    print(\"hello\")\n"}}},
			{Lines: []hunkLine{{' ', "x = 1\n"}, {'-', "y = 2\n"}, {'+', "y = 3\n"}}, EOF: true},
		}},
		{Kind: patchUpdate, Path: "b.txt", Chunks: []patchChunk{{Lines: []hunkLine{{' ', "keep\n"}, {'-', "drop\n"}, {' ', "\n"}}, Soft: 1}}},
	}
	if !reflect.DeepEqual(files, want) {
		t.Fatalf("parsed\n%#v\nwant\n%#v", files, want)
	}
	again, err := parsePatch(formatPatch(files))
	if err != nil || !reflect.DeepEqual(again, files) {
		t.Fatalf("format/parse round trip: %v\n%#v", err, again)
	}
	// A Markdown fence around the patch.
	files, err = parsePatch("```diff\n*** Begin Patch\n*** Delete File: old.txt\n*** End Patch\n```\n")
	if err != nil || len(files) != 1 || files[0].Path != "old.txt" {
		t.Fatalf("fenced patch: %v %#v", err, files)
	}
	// Without CRLF transport, a CR before the newline belongs to the line.
	files, err = parsePatch("*** Begin Patch\n*** Update File: a\n@@\n-x\r\n+y\r\n*** End Patch\n")
	if err != nil || files[0].Chunks[0].Lines[0].Text != "x\r\n" {
		t.Fatalf("CR kept: %v %#v", err, files)
	}
}

func TestParsePatchErrors(t *testing.T) {
	for name, text := range map[string]string{
		"empty":           "",
		"no begin":        "*** Update File: a\n@@\n-x\n*** End Patch",
		"no end":          "*** Begin Patch\n*** Add File: a\n+x\n",
		"nothing":         "*** Begin Patch\n*** End Patch",
		"bad header":      "*** Begin Patch\n*** Frobnicate File: a\n*** End Patch",
		"add without +":   "*** Begin Patch\n*** Add File: a\nx\n*** End Patch",
		"add blank mid":   "*** Begin Patch\n*** Add File: a\n+x\n\n+y\n*** End Patch",
		"add no path":     "*** Begin Patch\n*** Add File: \n+x\n*** End Patch",
		"update no hunk":  "*** Begin Patch\n*** Update File: a\n*** End Patch",
		"bad hunk line":   "*** Begin Patch\n*** Update File: a\n@@\n-x\n?y\n*** End Patch",
		"empty hunk":      "*** Begin Patch\n*** Update File: a\n@@ ctx\n*** End Patch",
		"blank hunk":      "*** Begin Patch\n*** Update File: a\n@@ ctx\n\n\n*** End Patch",
		"eof outside":     "*** Begin Patch\n*** Update File: a\n*** End of File\n*** End Patch",
		"second no @@":    "*** Begin Patch\n*** Update File: a\n@@\n-x\n*** End of File\n-y\n*** End Patch",
		"move no path":    "*** Begin Patch\n*** Update File: a\n*** Move to: \n*** End Patch",
		"marker first":    "*** Begin Patch\n*** Update File: a\n@@\n\\ No newline at end of file\n-x\n*** End Patch",
		"after marker":    "*** Begin Patch\n*** Update File: a\n@@\n-x\n\\ No newline at end of file\n-y\n*** End Patch",
		"u bad header":    "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1 @\n-a\n",
		"u short hunk":    "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n",
		"u long hunk":     "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n+c\n",
		"u bad line":      "--- a/x\n+++ b/x\n@@ -1 +1 @@\n*a\n+b\n",
		"u binary":        "diff --git a/x b/x\nindex 1..2 100644\nBinary files a/x and b/x differ\n",
		"u copy":          "diff --git a/x b/y\nsimilarity index 100%\ncopy from x\ncopy to y\n",
		"u symlink":       "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+t\n\\ No newline at end of file\n",
		"u add with old":  "diff --git a/x b/x\nnew file mode 100644\n--- /dev/null\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
		"u names differ":  "diff --git a/x b/x\n--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n",
		"u bad quote":     "diff --git \"a/x b/x\n--- \"a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
		"u double marker": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n\\ No newline at end of file\n+b\n",
	} {
		if _, err := parsePatch(text); err == nil {
			t.Errorf("%s: parsed without error", name)
		} else if _, ok := err.(*patchError); !ok {
			t.Errorf("%s: error %T, want *patchError", name, err)
		}
	}
}

func TestParseUnified(t *testing.T) {
	text := "commit 123\nAuthor: x\n\n    message\n\n" +
		"diff --git a/dir/file.go b/dir/file.go\nindex 1111111..2222222 100644\n--- a/dir/file.go\n+++ b/dir/file.go\n" +
		"@@ -1,3 +1,3 @@ func f() {\n a\n-b\r\n+B\r\n \n@@ -10 +10,2 @@\n-z\n\\ No newline at end of file\n+z\n+w\n\\ No newline at end of file\n" +
		"diff --git a/old name.txt b/new name.txt\nold mode 100644\nnew mode 100755\nsimilarity index 90%\nrename from old name.txt\nrename to new name.txt\n" +
		"diff --git \"a/q\\\"uote\\303\\251\\t.txt\" \"b/q\\\"uote\\303\\251\\t.txt\"\nnew file mode 100755\nindex 0000000..e69de29\n" +
		"diff --git a/gone b/gone\ndeleted file mode 100644\n--- a/gone\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n" +
		"--- plain.c.orig\t2024-01-01 00:00:00\n+++ plain.c\t2024-01-02 00:00:00\n@@ -1 +1 @@\n-x\n+y\n" +
		"diff --git a/same name b/same name\nold mode 100755\nnew mode 100644\n"
	files, err := parsePatch(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []patchFile{
		{Kind: patchUpdate, Path: "dir/file.go", Unified: true, Chunks: []patchChunk{
			{Lines: []hunkLine{{' ', "a\n"}, {'-', "b\r\n"}, {'+', "B\r\n"}, {' ', "\n"}}, Numbered: true, OldStart: 1, OldCount: 3, NewStart: 1, NewCount: 3},
			{Lines: []hunkLine{{'-', "z"}, {'+', "z\n"}, {'+', "w"}}, Numbered: true, OldStart: 10, OldCount: 1, NewStart: 10, NewCount: 2},
		}},
		{Kind: patchUpdate, Path: "old name.txt", MoveTo: "new name.txt", Unified: true, OldMode: 0o100644, NewMode: 0o100755},
		{Kind: patchAdd, Path: "q\"uote\u00e9\t.txt", Unified: true, NewMode: 0o100755},
		{Kind: patchDelete, Path: "gone", Unified: true, OldMode: 0o100644, Chunks: []patchChunk{
			{Lines: []hunkLine{{'-', "bye\n"}}, Numbered: true, OldStart: 1, OldCount: 1, NewStart: 0, NewCount: 0}}},
		{Kind: patchUpdate, Path: "plain.c", Unified: true, Chunks: []patchChunk{
			{Lines: []hunkLine{{'-', "x\n"}, {'+', "y\n"}}, Numbered: true, OldStart: 1, OldCount: 1, NewStart: 1, NewCount: 1}}},
		{Kind: patchUpdate, Path: "same name", Unified: true, OldMode: 0o100755, NewMode: 0o100644},
	}
	if !reflect.DeepEqual(files, want) {
		t.Fatalf("parsed\n%#v\nwant\n%#v", files, want)
	}
	again, _ := parsePatch(text)
	if !reflect.DeepEqual(again, files) {
		t.Fatal("parsing twice differs")
	}
	// A diff sent with CRLF line ends throughout loses one CR per line.
	files, err = parsePatch(strings.ReplaceAll("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "\n", "\r\n"))
	if err != nil || files[0].Path != "x" || files[0].Chunks[0].Lines[0].Text != "a\n" {
		t.Fatalf("CRLF diff: %v %#v", err, files)
	}
}

// apply parses patch (one Update File) and applies it to content.
func apply(t *testing.T, content, patch string) (string, error) {
	t.Helper()
	files, err := parsePatch(patch)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, patch)
	}
	return applyChunks(content, files[0].Chunks)
}

func bp(hunks string) string {
	return "*** Begin Patch\n*** Update File: f\n" + hunks + "*** End Patch\n"
}

func TestApplyChunks(t *testing.T) {
	src := "a\nb\nc\nd\ne\nb\nf\n"
	for name, tc := range map[string]struct{ patch, want string }{
		"simple":          {bp("@@\n-c\n+C\n"), "a\nb\nC\nd\ne\nb\nf\n"},
		"context anchor":  {bp("@@ e\n-b\n+B\n"), "a\nb\nc\nd\ne\nB\nf\n"},
		"in order":        {bp("@@\n a\n-b\n+1\n@@\n-b\n+2\n"), "a\n1\nc\nd\ne\n2\nf\n"},
		"eof":             {bp("@@\n-b\n-f\n+z\n*** End of File\n"), "a\nb\nc\nd\ne\nz\n"},
		"pure add end":    {bp("@@\n+g\n"), "a\nb\nc\nd\ne\nb\nf\ng\n"},
		"add after ctx":   {bp("@@ a\n+a2\n"), "a\na2\nb\nc\nd\ne\nb\nf\n"},
		"trailing spaces": {bp("@@\n-d  \t\n+D\n"), "a\nb\nc\nD\ne\nb\nf\n"},
		"delete all":      {bp("@@\n-a\n-b\n-c\n-d\n-e\n-b\n-f\n"), ""},
		"anchor scope":    {bp("@@ b\n c\n-d\n+D\n"), "a\nb\nc\nD\ne\nb\nf\n"},
		"anchor repeated": {bp("@@ e\n e\n-b\n+B\n"), "a\nb\nc\nd\ne\nB\nf\n"},
	} {
		got, err := apply(t, src, tc.patch)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", name, got, err, tc.want)
		}
	}
	for name, patch := range map[string]string{
		"missing":        bp("@@\n-q\n+r\n"),
		"out of order":   bp("@@\n-e\n+E\n@@\n-c\n+C\n"),
		"no context":     bp("@@ nope\n-a\n"),
		"eof wrong":      bp("@@\n-a\n+A\n*** End of File\n"),
		"leading spaces": bp("@@\n-  d\n+D\n"),
		"ambiguous":      bp("@@\n-b\n+B\n"),
		"out of scope":   bp("@@ b\n-f\n+F\n"),
	} {
		if _, err := apply(t, src, patch); err == nil {
			t.Errorf("%s: applied without error", name)
		}
	}
	// Two anchors, the second indented in the file, each scoping the next.
	py := "class A:\n    def f():\n        pass\nclass B:\n    def f():\n        pass\n"
	if got, err := apply(t, py, bp("@@ class B:\n@@ def f():\n-        pass\n+        return 1\n")); err != nil || got != "class A:\n    def f():\n        pass\nclass B:\n    def f():\n        return 1\n" {
		t.Errorf("anchors: %q %v", got, err)
	}
	_, err := apply(t, src, bp("@@\n-b\n+B\n"))
	if he, ok := err.(*hunkError); !ok || !reflect.DeepEqual(he.Candidates, []int{2, 6}) || !strings.Contains(err.Error(), "lines 2, 6") {
		t.Errorf("ambiguous hunk: %v", err)
	}
	_, err = apply(t, strings.Repeat("x\n", 50), bp("@@\n-x\n+y\n"))
	if he, ok := err.(*hunkError); !ok || len(he.Candidates) != maxCandidates || !strings.Contains(err.Error(), "1, 2, 3") || !strings.Contains(err.Error(), "maybe more") {
		t.Errorf("a hunk matching 50 places: %v", err)
	}
	if got, err := apply(t, "no newline", bp("@@\n-no newline\n+fixed\n")); err != nil || got != "fixed" {
		t.Errorf("no final newline kept: %q %v", got, err)
	}
}

// TestApplyRegressions covers each bug of issue 11's patch part.
func TestApplyRegressions(t *testing.T) {
	t.Run("CRLF file, LF patch", func(t *testing.T) {
		// Each hunk must land on its own lines (not one off) and every line keeps CRLF.
		src := "one\r\ntwo\r\n\r\nthree\r\nfour\r\n"
		got, err := apply(t, src, bp("@@\n two\n \n-three\n+THREE\n+3b\n four\n"))
		if want := "one\r\ntwo\r\n\r\nTHREE\r\n3b\r\nfour\r\n"; err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
		got, err = apply(t, src, bp("@@\n-one\n+ONE\n@@\n-four\n+FOUR\n"))
		if want := "ONE\r\ntwo\r\n\r\nthree\r\nFOUR\r\n"; err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
		// The same as a unified diff written with LF line ends.
		got, err = apply(t, src, "--- a/f\n+++ b/f\n@@ -2,4 +2,5 @@\n two\n \n-three\n+THREE\n+3b\n four\n")
		if want := "one\r\ntwo\r\n\r\nTHREE\r\n3b\r\nfour\r\n"; err != nil || got != want {
			t.Fatalf("unified: got %q, %v; want %q", got, err, want)
		}
	})
	t.Run("trailing blank context", func(t *testing.T) {
		// The blank line after "x = 1" tells the second place from the first.
		src := "x = 1\ny = 2\nx = 1\n\ny = 3\n"
		got, err := apply(t, src, bp("@@\n-x = 1\n+x = 9\n\n"))
		if want := "x = 1\ny = 2\nx = 9\n\ny = 3\n"; err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
		// Without a place that has the blank line, the blank is a separator.
		got, err = apply(t, "p\nq\n", bp("@@\n-p\n+P\n\n"))
		if want := "P\nq\n"; err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	})
	t.Run("blank line between hunks", func(t *testing.T) {
		got, err := apply(t, "a\nb\nc\nd\n", bp("@@\n-a\n+A\n\n@@\n-c\n+C\n\n"))
		if want := "A\nb\nC\nd\n"; err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	})
	t.Run("pure addition at EOF", func(t *testing.T) {
		for _, tc := range []struct{ src, patch, want string }{
			{"a\nb", bp("@@\n+c\n"), "a\nb\nc"},                                     // no final newline: kept, and b is not glued to c
			{"a\r\nb\r\n", bp("@@\n+c\n"), "a\r\nb\r\nc\r\n"},                       // CRLF kept
			{"a\nb\n", bp("@@\n+c\n*** End of File\n"), "a\nb\nc\n"},                // with the end marker
			{"a\nb\n", bp("@@\n b\n+c\n*** End of File\n"), "a\nb\nc\n"},            // with context
			{"", bp("@@\n+c\n"), "c\n"},                                             // empty file
			{"a\nb\n", bp("@@\n b\n+c\n\\ No newline at end of file\n"), "a\nb\nc"}, // marker
		} {
			got, err := apply(t, tc.src, tc.patch)
			if err != nil || got != tc.want {
				t.Errorf("%q + %q: got %q, %v; want %q", tc.src, tc.patch, got, err, tc.want)
			}
		}
	})
	t.Run("added file mode", func(t *testing.T) {
		s, _ := newTestServer(t, map[string]string{"keep.txt": "k\n"})
		ctx := context.Background()
		if _, err := s.applyPatch(ctx, patchIn{Patch: "*** Begin Patch\n*** Add File: a.sh\n+echo\n*** End Patch\n"}); err != nil {
			t.Fatal(err)
		}
		diff := "diff --git a/b.sh b/b.sh\nnew file mode 100755\n--- /dev/null\n+++ b/b.sh\n@@ -0,0 +1 @@\n+echo\n" +
			"diff --git a/keep.txt b/keep.txt\nold mode 100644\nnew mode 100755\n"
		if _, err := s.applyPatch(ctx, patchIn{Patch: diff}); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]fs.FileMode{"a.sh": 0o644, "b.sh": 0o755, "keep.txt": 0o755} {
			info, err := s.root.Stat(ctx, name)
			if err != nil || info.Mode().Perm() != want {
				t.Errorf("%s: mode %v, %v; want %v", name, info.Mode().Perm(), err, want)
			}
		}
		if got := readFile(t, s, "b.sh"); got != "echo\n" {
			t.Errorf("b.sh = %q", got)
		}
	})
}

func TestGitPerm(t *testing.T) {
	for _, tc := range []struct {
		perm fs.FileMode
		mode uint32
		want fs.FileMode
	}{{0o644, 0o100755, 0o755}, {0o755, 0o100644, 0o644}, {0o600, 0o100755, 0o700}, {0o640, 0, 0o640}, {0o700, 0o100644, 0o600}} {
		if got := gitPerm(tc.perm, tc.mode); got != tc.want {
			t.Errorf("gitPerm(%o, %o) = %o, want %o", tc.perm, tc.mode, got, tc.want)
		}
	}
}

// TestApplyUnifiedHints: a unified hunk goes where its header says when it
// matches there, shifted by the drift of the file's previous hunk; elsewhere it
// must be unique.
func TestApplyUnifiedHints(t *testing.T) {
	src := "x\ny\nz\nq\nx\ny\nz\nr\n"
	hunk := func(start int) string {
		return "--- a/f\n+++ b/f\n@@ -" + strconv.Itoa(start) + ",3 +" + strconv.Itoa(start) + ",3 @@\n x\n-y\n+Y\n z\n"
	}
	if got, err := apply(t, src, hunk(5)); err != nil || got != "x\ny\nz\nq\nx\nY\nz\nr\n" {
		t.Errorf("at the hint: %q %v", got, err)
	}
	if _, err := apply(t, src, hunk(3)); err == nil || !strings.Contains(err.Error(), "lines 1, 5") {
		t.Errorf("off the hint and ambiguous: %v", err)
	}
	// The file has two extra lines at the top: the first hunk is found by
	// search, the second at its header's line moved by the same two lines.
	shifted := "p\np\n" + src
	got, err := apply(t, shifted, "--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n y\n-z\n+Z\n q\n@@ -5,3 +5,3 @@\n x\n-y\n+Y\n z\n")
	if want := "p\np\nx\ny\nZ\nq\nx\nY\nz\nr\n"; err != nil || got != want {
		t.Errorf("drift: %q %v, want %q", got, err, want)
	}
	// A hunk starting at line 1 must match at the top, as git apply requires.
	if _, err := apply(t, shifted, "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n x\n-y\n+Y\n z\n"); err == nil {
		t.Error("a hunk from line 1 applied below the top")
	}
	// Hunks without any context (git diff -U0) go by their line numbers, as
	// with git apply --unidiff-zero: not to the end of the file.
	if got, err := apply(t, src, "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-y\n+Y\n@@ -4,0 +5 @@\n+ins\n"); err != nil || got != "x\nY\nz\nq\nins\nx\ny\nz\nr\n" {
		t.Errorf("-U0 hunks: %q %v", got, err)
	}
	if got, err := apply(t, src, "--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+top\n"); err != nil || got != "top\n"+src {
		t.Errorf("-U0 insertion at the top: %q %v", got, err)
	}
	// A -U0 insertion's line ends are the patch's (git apply's), a Begin Patch
	// addition's the file's.
	if got, err := apply(t, "a\nb\n", "--- a/f\n+++ b/f\n@@ -1,0 +2 @@\n+ins\r\n"); err != nil || got != "a\nins\r\nb\n" {
		t.Errorf("-U0 insertion with CRLF: %q %v", got, err)
	}
	if got, err := apply(t, "a\nb\n", bp("@@\n+ins\r\n")); err != nil || got != "a\nb\nins\n" {
		t.Errorf("Begin Patch addition with CRLF: %q %v", got, err)
	}
	// A hunk without trailing context must end the file.
	if _, err := apply(t, src, "--- a/f\n+++ b/f\n@@ -3,2 +3,2 @@\n z\n-q\n+Q\n"); err == nil {
		t.Error("a hunk without trailing context applied before the end")
	}
}

// newTestServer serves a memory-backed Dir holding files.
func newTestServer(t *testing.T, files map[string]string) (*server, vfs.Backend) {
	t.Helper()
	m := memory.New()
	d, _ := dir.New(m)
	ctx := context.Background()
	for name, content := range files {
		if i := strings.LastIndex(name, "/"); i > 0 {
			if err := d.MkdirAll(ctx, name[:i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.WriteFile(ctx, name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &server{root: d}
	s.opts.defaults()
	return s, m
}

func readFile(t *testing.T, s *server, name string) string {
	t.Helper()
	b, err := s.root.ReadFile(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestApplyPatchTool: through the tool's engine: CRLF kept, ambiguity refused
// with conflict naming the lines, both formats, nothing changed on refusal.
func TestApplyPatchTool(t *testing.T) {
	s, _ := newTestServer(t, map[string]string{"w.txt": "a\r\nb\r\nc\r\n", "dup.txt": "k\nv\nk\nv\n"})
	ctx := context.Background()
	if _, err := s.applyPatch(ctx, patchIn{Patch: "*** Begin Patch\n*** Update File: w.txt\n@@\n a\n-b\n+B\n*** End Patch\n"}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, s, "w.txt"); got != "a\r\nB\r\nc\r\n" {
		t.Fatalf("CRLF file after an LF patch: %q", got)
	}
	_, err := s.applyPatch(ctx, patchIn{Patch: "*** Begin Patch\n*** Update File: w.txt\n@@\n-c\n+C\n*** Update File: dup.txt\n@@\n k\n-v\n+V\n*** End Patch\n"})
	if vfs.CodeOf(err) != vfs.CodeConflict || !strings.Contains(err.Error(), "lines 1, 3") || !strings.Contains(err.Error(), "dup.txt") {
		t.Fatalf("ambiguous hunk: %v", err)
	}
	if got := readFile(t, s, "w.txt"); got != "a\r\nB\r\nc\r\n" {
		t.Fatalf("a refused patch changed w.txt: %q", got)
	}
	diff := "diff --git a/dup.txt b/dup.txt\n--- a/dup.txt\n+++ b/dup.txt\n@@ -2,3 +2,3 @@\n v\n k\n-v\n+V\n"
	if _, err := s.applyPatch(ctx, patchIn{Patch: diff}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, s, "dup.txt"); got != "k\nv\nk\nV\n" {
		t.Fatalf("unified diff: %q", got)
	}
	_, err = s.applyPatch(ctx, patchIn{Patch: "diff --git a/x b/x\nindex 1..2 100644\nBinary files a/x and b/x differ\n"})
	if vfs.CodeOf(err) != vfs.CodeNotSupported {
		t.Fatalf("binary patch: %v", err)
	}
	// A unified deletion must remove the whole file.
	_, err = s.applyPatch(ctx, patchIn{Patch: "diff --git a/dup.txt b/dup.txt\ndeleted file mode 100644\n--- a/dup.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-k\n-v\n"})
	if vfs.CodeOf(err) != vfs.CodeConflict {
		t.Fatalf("partial deletion: %v", err)
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
	f.Add("diff --git a/x b/x\nold mode 100644\nnew mode 100755\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n")
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
		again, err := parsePatch(text)
		if err != nil || !reflect.DeepEqual(again, files) {
			t.Fatalf("parsing twice differs: %v", err)
		}
		unified := files[0].Unified
		for _, pf := range files {
			if pf.Unified != unified {
				t.Fatal("a patch mixes formats")
			}
			if pf.Path == "" || (!unified && strings.TrimSpace(pf.Path) != pf.Path) {
				t.Fatalf("path %q is empty or untrimmed", pf.Path)
			}
			if !unified && pf.Kind == patchUpdate && len(pf.Chunks) == 0 && pf.MoveTo == "" {
				t.Fatal("an update without hunks or move")
			}
			for _, c := range pf.Chunks {
				if c.Soft > len(c.Lines) {
					t.Fatal("more soft lines than lines")
				}
			}
		}
		// Applying any parsed update to any text must not panic.
		for _, pf := range files {
			_, _ = applyChunks(text, pf.Chunks)
		}
		if unified || strings.Contains(text, "\r") {
			return // a lone CR at a line end reads back as a CRLF line end
		}
		again, err = parsePatch(formatPatch(files))
		if err != nil {
			t.Fatalf("the canonical form does not parse: %v\n%s", err, formatPatch(files))
		}
		if !reflect.DeepEqual(again, files) {
			t.Fatalf("round trip changed the patch:\n%#v\n%#v", files, again)
		}
	})
}
