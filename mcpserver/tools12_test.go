package mcpserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/mcpserver"
	"github.com/capfs/capfs/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestTail(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	f := newFixture(t, map[string]string{"f.txt": b.String(), "short.txt": "a\nb", "empty.txt": ""})
	if got := f.ok("tail", map[string]any{"path": "f.txt", "lines": 3}); got != "    48\tline 48\n    49\tline 49\n    50\tline 50\n" {
		t.Errorf("tail 3: %q", got)
	}
	if got := f.ok("tail", map[string]any{"path": "short.txt", "lines": 5}); got != "     1\ta\n     2\tb\n" {
		t.Errorf("tail of a short file without a final newline: %q", got)
	}
	mustContain(t, f.ok("tail", map[string]any{"path": "empty.txt"}), "(empty file)")
	if got := f.ok("tail", map[string]any{"path": "f.txt"}); !strings.HasPrefix(got, "    31\tline 31\n") {
		t.Errorf("tail default: %q", got[:40])
	}
	f.fail("tail", map[string]any{"path": "f.txt", "lines": -2}, "invalid_argument")
}

func TestMultiEdit(t *testing.T) {
	src := "alpha\nbeta\ngamma\n"
	f := newFixture(t, map[string]string{"f.txt": src, "crlf.txt": "one\r\ntwo\r\n"})
	out := f.ok("multi_edit", map[string]any{"path": "f.txt", "edits": []map[string]any{
		{"old_string": "alpha", "new_string": "ALPHA"},
		{"old_string": "ALPHA\nbeta", "new_string": "AB"}, // sees the first edit's result
	}})
	mustContain(t, out, "2 edit(s)")
	if got := f.content("f.txt"); got != "AB\ngamma\n" {
		t.Fatalf("after multi_edit: %q", got)
	}
	// All or none: the second edit fails, the first is not written.
	r := f.fail("multi_edit", map[string]any{"path": "f.txt", "edits": []map[string]any{
		{"old_string": "AB", "new_string": "x"},
		{"old_string": "missing", "new_string": "y"},
	}}, "not_found")
	mustContain(t, r.text, "edits[1]", "no edit was applied")
	if got := f.content("f.txt"); got != "AB\ngamma\n" {
		t.Fatalf("a failed multi_edit wrote: %q", got)
	}
	f.fail("multi_edit", map[string]any{"path": "f.txt", "edits": []map[string]any{}}, "invalid_argument")
	r = f.fail("multi_edit", map[string]any{"path": "f.txt", "edits": []map[string]any{{"old_string": "x"}}}, "invalid_argument")
	mustContain(t, r.text, `missing required argument edits[0]."new_string"`)
	// CRLF kept.
	f.ok("multi_edit", map[string]any{"path": "crlf.txt", "edits": []map[string]any{{"old_string": "one\ntwo\n", "new_string": "1\n2\n3\n"}}})
	if got := f.content("crlf.txt"); got != "1\r\n2\r\n3\r\n" {
		t.Fatalf("crlf multi_edit: %q", got)
	}
}

func TestEditNearMissReasons(t *testing.T) {
	f := newFixture(t, map[string]string{
		"mixed.txt": "one\r\ntwo\nthree\n",
		"code.go":   "func main() {\n\tfmt.Println(\"hello\")\n}\n",
	})
	// A mixed file where old_string's line ends match neither form.
	r := f.fail("edit", map[string]any{"path": "mixed.txt", "old_string": "one\r\ntwo\r\n", "new_string": "x"}, "not_found")
	mustContain(t, r.text, "differ only in line endings")
	r = f.fail("edit", map[string]any{"path": "code.go", "old_string": "fmt.Println(\"helo\")", "new_string": "x"}, "not_found")
	mustContain(t, r.text, "Nearest: line 2", "First difference at column 18")
	r = f.fail("edit", map[string]any{"path": "code.go", "old_string": "func main() {\n    fmt.Println(\"hello\")", "new_string": "x"}, "not_found")
	mustContain(t, r.text, "match if whitespace is ignored")
}

func TestListSortAndGlobExclude(t *testing.T) {
	f := newFixture(t, map[string]string{"small.txt": "1", "big.txt": "1234567890", "mid.txt": "12345", "d/": "",
		"src/a.go": "", "src/node_modules/x/b.go": "", "src/c_test.go": ""})
	if got := f.ok("list", map[string]any{"sort_by": "size"}); !strings.HasPrefix(got, "[FILE] big.txt  10 bytes\n[FILE] mid.txt  5 bytes\n[FILE] small.txt  1 bytes\n") {
		t.Errorf("sort_by size: %q", got)
	}
	if got := f.ok("list", map[string]any{"sort_by": "name", "reverse": true}); !strings.HasPrefix(got, "[DIR]  src/\n[FILE] small.txt") {
		t.Errorf("reverse: %q", got)
	}
	if got := f.ok("list", map[string]any{"sizes": false}); !strings.Contains(got, "[FILE] big.txt\n") || strings.Contains(got, "bytes") {
		t.Errorf("sizes false: %q", got)
	}
	f.fail("list", map[string]any{"sort_by": "colour"}, "invalid_argument")
	got := f.ok("glob", map[string]any{"pattern": "**/*.go", "exclude": []string{"node_modules", "*_test.go"}})
	if strings.TrimSpace(got) != "src/a.go" {
		t.Errorf("glob exclude: %q", got)
	}
}

func TestGrepNamesTooLargeFiles(t *testing.T) {
	d, _ := dir.New(memory.New())
	populate(t, d, map[string]string{"big.txt": strings.Repeat("needle\n", 100), "small.txt": "needle\n", ".git/x": "needle\n", "ign/y.txt": "needle\n", ".gitignore": "ign/\n"})
	cs := connect(t, d, mcpserver.Options{MaxGrepFileBytes: 100})
	r := callTool(t, cs, "grep", map[string]any{"pattern": "needle"})
	mustContain(t, r.text, "small.txt\n", "skipped big.txt: too large (700 bytes)")
	mustNotContain(t, r.text, ".git/x", "ign/y.txt")
	r = callTool(t, cs, "grep", map[string]any{"pattern": "needle", "no_ignore": true})
	mustContain(t, r.text, ".git/x", "ign/y.txt")
}

func TestReadMediaAndEncodings(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
	wav := "RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00"
	d, _ := dir.New(memory.New())
	populate(t, d, map[string]string{"i.png": png, "s.wav": wav, "t.txt": "text\n", "u16.txt": "\xff\xfeh\x00i\x00", "l1.txt": "ok\ncaf\xe9\n"})
	cs := connect(t, d, mcpserver.Options{MaxMediaBytes: 1 << 10})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_media", Arguments: map[string]any{"path": "s.wav"}})
	if err != nil || res.IsError || len(res.Content) != 2 {
		t.Fatalf("read_media wav: %v %+v", err, res)
	}
	if a, ok := res.Content[0].(*mcp.AudioContent); !ok || a.MIMEType != "audio/wav" || string(a.Data) != wav {
		t.Errorf("audio content: %#v", res.Content[0])
	}
	res, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": "i.png"}})
	if im, ok := res.Content[0].(*mcp.ImageContent); !ok || im.MIMEType != "image/png" {
		t.Errorf("read png: %#v", res.Content[0])
	}
	failWith(t, cs, "read_media", map[string]any{"path": "t.txt"}, "not_supported")
	r := failWith(t, cs, "read", map[string]any{"path": "u16.txt"}, "not_supported")
	mustContain(t, r.text, "UTF-16")
	r = failWith(t, cs, "read", map[string]any{"path": "l1.txt"}, "not_supported")
	mustContain(t, r.text, "line 2 is not valid UTF-8")
	// The first line alone is valid: reading it works.
	if got := callTool(t, cs, "read", map[string]any{"path": "l1.txt", "limit": 1}); got.isErr {
		t.Errorf("the valid first line: %q", got.text)
	}
	big := strings.Repeat("x", 2<<10)
	populate(t, d, map[string]string{"big.png": png + big})
	failWith(t, cs, "read", map[string]any{"path": "big.png"}, "file_too_large")
}

func TestArgumentErrorsInProcess(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "x\n"})
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"read", map[string]any{"path": "a.txt", "limit": "10"}, `argument "limit" must be an integer, got the string "10"`},
		{"read_many", map[string]any{"paths": "a.txt"}, `argument "paths" must be an array, got the string "a.txt"`},
		{"read_many", map[string]any{"paths": []any{"a.txt", 3}}, `argument "paths[1]" must be a string, got the number 3`},
		{"grep", map[string]any{"pattern": "x", "-i": "yes"}, `argument "-i" must be true or false, got the string "yes"`},
		{"list", map[string]any{"file_path": "a"}, `unknown argument "file_path"; this tool takes: path, sort_by, reverse, sizes`},
		{"grep", map[string]any{"pattern": "(x"}, `argument "pattern" is not a valid regular expression`},
	} {
		r := f.fail(c.tool, c.args, "invalid_argument")
		mustContain(t, r.text, c.want)
		if r.path != "" {
			t.Errorf("%s %v: an argument error names path %q", c.tool, c.args, r.path)
		}
	}
}

// TestHiddenConsistent: an entry the policy refuses is shown as hidden by
// both list and tree, with no size.
func TestHiddenConsistent(t *testing.T) {
	f := newFixture(t, map[string]string{"p/.env": "SECRET", "p/ok.txt": "x"}, dir.WithPolicy(policy.Defaults()))
	mustContain(t, f.ok("list", map[string]any{"path": "p"}), "[HIDDEN] .env (refused by the policy)")
	tree := f.ok("tree", map[string]any{"path": "p"})
	mustContain(t, tree, ".env (hidden: refused by the policy)")
	mustNotContain(t, tree, "-1 bytes", "6 bytes")
}

// TestGrepAuditSummary: with the sink wrapped by audit.Batching, a grep's
// successful reads are one summary event carrying the request tag and the
// count; each refusal is still an event of its own.
func TestGrepAuditSummary(t *testing.T) {
	ring := audit.NewRing(4096)
	m := memory.New()
	plain, _ := dir.New(m)
	files := map[string]string{".env": "needle=1\n", "sub/.env": "x\n"}
	for i := range 30 {
		files[fmt.Sprintf("sub/f%02d.txt", i)] = "needle\n"
	}
	populate(t, plain, files)
	d, _ := dir.New(m, dir.WithPolicy(policy.Defaults()), dir.WithAudit(audit.Batching(ring)))
	cs := connect(t, d, mcpserver.Options{})
	r := callTool(t, cs, "grep", map[string]any{"pattern": "needle"})
	if r.isErr || !strings.Contains(r.text, "sub/f29.txt") {
		t.Fatalf("grep: %+v", r)
	}
	var summary []audit.Event
	denied := 0
	for _, e := range ring.Events() {
		if e.Tag != r.tag {
			continue
		}
		switch {
		case e.Op == "grep":
			summary = append(summary, e)
		case e.Outcome == audit.Denied:
			denied++
		case e.Outcome == audit.OK:
			t.Errorf("a successful %s of %s was logged on its own: %+v", e.Op, e.Path, e)
		}
	}
	if len(summary) != 1 || summary[0].Count < 32 || summary[0].Outcome != audit.OK || summary[0].Path != "." {
		t.Fatalf("want one grep summary event standing for the 30 reads and the listings, got %+v", summary)
	}
	if denied != 2 {
		t.Fatalf("%d denied events for the two .env files, want 2", denied)
	}
}

// TestListNamesOnly: sizes false names files and directories in the
// structured result's names (directories ending in /) and describes the rest.
func TestListNamesOnly(t *testing.T) {
	f := newFixture(t, map[string]string{"b.txt": "x", "a/": "", "c.txt": "y"})
	if err := f.root.Symlink(context.Background(), "b.txt", "l"); err != nil {
		t.Fatal(err)
	}
	for _, rev := range []bool{false, true} {
		res, err := f.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list", Arguments: map[string]any{"sizes": false, "reverse": rev}})
		if err != nil || res.IsError {
			t.Fatal(err, res)
		}
		sc, _ := res.StructuredContent.(map[string]any)
		names := fmt.Sprint(sc["names"])
		want := "[a/ b.txt c.txt l]"
		text := "[DIR]  a/\n[FILE] b.txt\n[FILE] c.txt\n[LINK] l -> b.txt\n"
		if rev {
			want = "[l c.txt b.txt a/]"
			text = "[LINK] l -> b.txt\n[FILE] c.txt\n[FILE] b.txt\n[DIR]  a/\n"
		}
		if names != want {
			t.Errorf("reverse=%v: names %s, want %s", rev, names, want)
		}
		if ents := fmt.Sprint(sc["entries"]); ents != "[map[name:l target:b.txt type:symlink]]" {
			t.Errorf("reverse=%v: entries %s, want only the symlink described", rev, ents)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != text {
			t.Errorf("reverse=%v: text %q, want %q", rev, got, text)
		}
	}
}

// TestGrepIgnoreAbove: a grep below the root honours the .gitignore files of
// the directories above its path, as rg does in a work tree.
func TestGrepIgnoreAbove(t *testing.T) {
	f := newFixture(t, map[string]string{".gitignore": "*.log\n", "src/a.go": "needle\n", "src/b.log": "needle\n"})
	if got := f.ok("grep", map[string]any{"pattern": "needle", "path": "src"}); got != "src/a.go\n" {
		t.Errorf("grep in src: %q, want the root's .gitignore to leave out src/b.log", got)
	}
	if got := f.ok("grep", map[string]any{"pattern": "needle", "path": "src", "no_ignore": true}); got != "src/a.go\nsrc/b.log\n" {
		t.Errorf("grep in src, no_ignore: %q", got)
	}
}
