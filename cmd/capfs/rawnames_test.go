package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// TestErrorShowsRawNamesApart: an error on a name that is not UTF-8 shows it
// in the one escaped form, so two names that differ in such a byte print
// differently (and nothing raw reaches the terminal).
func TestErrorShowsRawNamesApart(t *testing.T) {
	a := showError(&vfs.Error{Code: vfs.CodeNotFound, Op: "Stat", Path: "p/caf\xe9"})
	b := showError(&vfs.Error{Code: vfs.CodeNotFound, Op: "Stat", Path: "p/caf\xe8"})
	if a == b || !strings.Contains(a, `p/caf\xe9: `) || !strings.Contains(b, `p/caf\xe8: `) {
		t.Errorf("errors %q and %q; want each name escaped, apart", a, b)
	}
	clean(t, "error", a+"\n")
}

// TestCLIRawNames: the CLI reads, lists and writes names that are not UTF-8
// under the default policy, shows them escaped, and its error on a missing
// one names it apart from its neighbour. Before, the policy refused them.
func TestCLIRawNames(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "caf\xe9"), []byte("latin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := []string{"-m", "p=physical:" + root}
	run := func(args ...string) result { return runCapfs(t, root, append(append([]string{}, m...), args...)...) }
	if r := run("cat", "p/caf\xe9").want(t, 0); r.stdout != "latin\n" {
		t.Errorf("cat: %q", r.stdout)
	}
	ls := run("ls", "p").want(t, 0)
	clean(t, "ls", ls.stdout)
	if linesWith(ls.stdout, `caf\xe9`) != 1 {
		t.Errorf("ls:\n%s", ls.stdout)
	}
	miss := run("cat", "p/caf\xe8").want(t, exitFailed)
	clean(t, "error line", miss.stderr)
	if !strings.Contains(miss.stderr, ` p/caf\xe8: `) {
		t.Errorf("error line: %q", miss.stderr)
	}
	glob := run("glob", "p/caf?").want(t, 0)
	if strings.TrimSpace(glob.stdout) != `p/caf\xe9` {
		t.Errorf("glob: %q", glob.stdout)
	}
	// JSON output: the escaped form, not U+FFFD.
	for _, args := range [][]string{{"ls", "--json", "p"}, {"glob", "--json", "p/*"}} {
		js := run(args...).want(t, 0)
		if !strings.Contains(js.stdout, `caf\\xe9"`) || strings.Contains(js.stdout, `\ufffd`) || strings.Contains(js.stdout, "\ufffd") {
			t.Errorf("%s: %s", args, js.stdout)
		}
	}
}
