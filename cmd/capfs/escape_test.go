package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostile names: a terminal escape (recolour, clear screen, retitle), a newline
// that would forge a line, a carriage return that would overwrite one, a bidi
// override that would reorder one, a C1 control and invalid UTF-8.
var hostileNames = []string{
	"esc\x1b[31mred\x1b[0m",
	"clear\x1b[2J\x1b]0;pwned\x07",
	"forged\nfake-line.txt",
	"over\rwrite",
	"evil\u202egnp.exe",
	"c1\u009bx",
	"bad\xffutf8",
}

// escapedNames are hostileNames as the CLI must show them.
var escapedNames = []string{
	`esc\u001b[31mred\u001b[0m`,
	`clear\u001b[2J\u001b]0;pwned\u0007`,
	`forged\nfake-line.txt`,
	`over\rwrite`,
	`evil\u202egnp.exe`,
	`c1\u009bx`,
	`bad\xffutf8`,
}

// hostileTree makes a host directory holding a file and a symlink (whose target
// is hostile too) for each hostile name, under dir sub.
func hostileTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	sub := filepath.Join(root, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range hostileNames {
		if err := os.WriteFile(filepath.Join(sub, n), []byte("needle\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(n, filepath.Join(sub, "L"+n)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// clean fails if out holds anything a terminal would interpret: C0 controls other
// than newline, DEL, C1 controls, bidi controls, invalid UTF-8.
func clean(t *testing.T, what, out string) {
	t.Helper()
	if !strings.ContainsRune(out, '\n') && out != "" {
		t.Errorf("%s: no newline in %q", what, out)
	}
	for i, r := range out {
		bad := (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) ||
			(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f
		if r == 0xfffd && strings.HasPrefix(out[i:], "\xff") {
			bad = true
		}
		if bad {
			t.Errorf("%s: raw %U at byte %d:\n%q", what, r, i, out)
			return
		}
	}
	if strings.Contains(out, "\xff") {
		t.Errorf("%s: raw invalid UTF-8:\n%q", what, out)
	}
}

// utf8Hostile is how many of hostileNames are valid UTF-8 (the last is not; the
// policy decides it on its bytes, so it is listed, globbed and synced back like
// the others).
const utf8Hostile = 6

// linesWith counts the output lines holding want.
func linesWith(out, want string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, want) {
			n++
		}
	}
	return n
}

func TestCLIEscapesNames(t *testing.T) {
	t.Parallel()
	root := hostileTree(t)
	m := []string{"-m", "p=physical:" + root}
	run := func(args ...string) result { return runCapfs(t, root, append(append([]string{}, m...), args...)...) }

	ls := run("ls", "p/sub").want(t, 0)
	clean(t, "ls", ls.stdout)
	if got, want := strings.Count(ls.stdout, "\n"), 2*len(hostileNames); got != want {
		t.Errorf("ls printed %d lines for %d entries:\n%s", got, want, ls.stdout)
	}
	lsl := run("ls", "-l", "p/sub").want(t, 0)
	clean(t, "ls -l", lsl.stdout)
	tree := run("tree", "p/sub").want(t, 0)
	clean(t, "tree", tree.stdout)
	glob := run("glob", "p/sub/*").want(t, 0)
	clean(t, "glob", glob.stdout)
	if got, want := strings.Count(glob.stdout, "\n"), 2*len(hostileNames); got != want {
		t.Errorf("glob printed %d lines for %d matches:\n%s", got, want, glob.stdout)
	}
	grep := run("grep", "-n", "needle", "p/sub").want(t, 0)
	clean(t, "grep", grep.stdout)
	if linesWith(ls.stdout, escapedNames[utf8Hostile]) != 2 {
		t.Errorf("ls does not show %q and its link as %s:\n%s", hostileNames[utf8Hostile], escapedNames[utf8Hostile], ls.stdout)
	}
	for i, e := range escapedNames[:utf8Hostile] {
		for what, out := range map[string]string{"ls": ls.stdout, "glob": glob.stdout, "grep": grep.stdout} {
			if linesWith(out, e) == 0 {
				t.Errorf("%s does not show %q as %s:\n%s", what, hostileNames[i], e, out)
			}
		}
		// ls -l and tree show the symlink L<name> -> <name>, both escaped, on one line.
		for what, out := range map[string]string{"ls -l": lsl.stdout, "tree": tree.stdout} {
			if linesWith(out, "L"+e+" -> "+e) != 1 {
				t.Errorf("%s does not show the link L%q -> %q on one line:\n%s", what, hostileNames[i], hostileNames[i], out)
			}
		}
	}
	st := run("stat", "p/sub/L"+hostileNames[0]).want(t, 0)
	clean(t, "stat", st.stdout)
	if !strings.Contains(st.stdout, "path:     p/sub/L"+escapedNames[0]+"\n") || !strings.Contains(st.stdout, "target:   "+escapedNames[0]+"\n") {
		t.Errorf("stat:\n%s", st.stdout)
	}
	// Error lines: a missing hostile path, and a diff refusal quoting one.
	miss := run("cat", "p/sub/"+hostileNames[2]+"-missing").want(t, exitFailed)
	clean(t, "error line", miss.stderr)
	if !strings.HasPrefix(miss.stderr, "capfs: ") || !strings.Contains(miss.stderr, " p/sub/"+escapedNames[2]+"-missing: ") || strings.Count(miss.stderr, "\n") != 1 {
		t.Errorf("error line: %q", miss.stderr)
	}
	diff := run("diff", "p/sub", "p/sub/"+hostileNames[0]).want(t, exitFailed)
	clean(t, "diff error", diff.stderr)
	if strings.Count(diff.stderr, "\n") != 1 {
		t.Errorf("diff error is not one line: %q", diff.stderr)
	}
	// mounts: a mount point with a hostile name.
	mounts := runCapfs(t, root, "-m", "odd\x1b[7m=memory:", "mounts").want(t, 0)
	clean(t, "mounts", mounts.stdout)
	if !strings.Contains(mounts.stdout, `/odd\u001b[7m`) {
		t.Errorf("mounts:\n%s", mounts.stdout)
	}
}

// TestCLIDiffEscapesNames: diff headers quote hostile names as git does.
func TestCLIDiffEscapesNames(t *testing.T) {
	t.Parallel()
	a, b := t.TempDir(), t.TempDir()
	for _, n := range hostileNames[:utf8Hostile] {
		if err := os.WriteFile(filepath.Join(a, n), []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(b, n), []byte("new\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := runCapfs(t, a, "-m", "a=physical:"+a, "-m", "b=physical:"+b, "diff", "a", "b").want(t, 0)
	clean(t, "diff", r.stdout)
	if got := strings.Count(r.stdout, "diff --git "); got != utf8Hostile {
		t.Errorf("%d diff headers for %d files:\n%s", got, utf8Hostile, r.stdout)
	}
	if !strings.Contains(r.stdout, `diff --git "a/esc\033[31mred\033[0m" "b/esc\033[31mred\033[0m"`) {
		t.Errorf("diff does not quote the names as git does:\n%s", r.stdout)
	}
}

// TestRunSummaryEscapesNames: files the sandboxed command creates with hostile
// names are listed escaped, one line each, in run's summary.
func TestRunSummaryEscapesNames(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	root := t.TempDir()
	var script strings.Builder
	for _, n := range hostileNames[:utf8Hostile] {
		script.WriteString("printf x > '" + n + "'\n")
	}
	r := runCapfs(t, root, "-m", "p=physical:"+root, "run", "--work", "p", "--show", "-1", "--", "sh", "-c", script.String()).want(t, 0)
	clean(t, "run summary", r.stderr)
	for _, e := range escapedNames[:utf8Hostile] {
		if linesWith(r.stderr, "  A p/"+e) != 1 {
			t.Errorf("summary does not list p/%s on one line:\n%s", e, r.stderr)
		}
	}
	if got := strings.Count(r.stderr, "\n  A "); got != utf8Hostile {
		t.Errorf("summary lists %d additions for %d files:\n%s", got, utf8Hostile, r.stderr)
	}
	// A refused change is reported escaped too: a secret (*.pem) whose name is
	// not UTF-8. (Such a name is no longer refused for itself.)
	r = runCapfs(t, root, "-m", "p=physical:"+root, "run", "--no-lazy", "--work", "p", "--", "sh", "-c",
		"printf x > '"+hostileNames[utf8Hostile]+".pem'; printf y > '"+hostileNames[0]+"'").want(t, exitSyncBack)
	clean(t, "refusal summary", r.stderr)
	if linesWith(r.stderr, "capfs: refused: added p/"+escapedNames[utf8Hostile]+".pem: ") != 1 {
		t.Errorf("refusal not reported escaped on one line:\n%s", r.stderr)
	}
}

// TestMCPEscapesNames: through the real binary's MCP server, list and glob show
// hostile names escaped, one per line, and an error quoting one is escaped.
func TestMCPEscapesNames(t *testing.T) {
	t.Parallel()
	root := hostileTree(t)
	cs := mcpClient(t, root, "-m", "p=physical:"+root)
	defer cs.Close()
	list, isErr, _ := mcpCall(t, cs, "list", map[string]any{"path": "p/sub"})
	if isErr {
		t.Fatalf("list: %s", list)
	}
	glob, _, _ := mcpCall(t, cs, "glob", map[string]any{"pattern": "p/sub/*"})
	errText, isErr, _ := mcpCall(t, cs, "read", map[string]any{"path": "p/sub/" + hostileNames[2] + "-missing"})
	if !isErr {
		t.Fatalf("read of a missing file succeeded: %s", errText)
	}
	for what, out := range map[string]string{"list": list, "glob": glob, "error": errText + "\n"} {
		clean(t, "mcp "+what, out)
	}
	if got := strings.Count(list, "\n"); got != 2*len(hostileNames) {
		t.Errorf("list: %d lines for %d entries:\n%s", got, 2*len(hostileNames), list)
	}
	for i, e := range escapedNames[:utf8Hostile] {
		if linesWith(list, "[LINK] L"+e+" -> "+e) != 1 || linesWith(glob, "p/sub/"+e) != 1 {
			t.Errorf("%q is not shown escaped on its own line:\nlist:\n%s\nglob:\n%s", hostileNames[i], list, glob)
		}
	}
	if !strings.Contains(errText, "p/sub/"+escapedNames[2]+"-missing") {
		t.Errorf("error text: %q", errText)
	}
}
