package gitree

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestRefBeatsAbbreviatedID checks that a branch whose name is also an
// abbreviated object id resolves to the branch, as git rev-parse does.
func TestRefBeatsAbbreviatedID(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not on PATH")
	}
	d := t.TempDir()
	runGit(t, d, "init", "-q")
	write(t, filepath.Join(d, "a.txt"), "one\n", 0o644)
	runGit(t, d, "add", "-A")
	runGit(t, d, "commit", "-q", "-m", "one")
	old := runGit(t, d, "rev-parse", "HEAD^{tree}")
	write(t, filepath.Join(d, "a.txt"), "two\n", 0o644)
	runGit(t, d, "commit", "-q", "-am", "two")
	head := runGit(t, d, "rev-parse", "HEAD")
	name := head[:8]
	runGit(t, d, "branch", name, "HEAD~1")
	want := runGit(t, d, "-c", "core.warnAmbiguousRefs=false", "rev-parse", name+"^{tree}")
	if want != old {
		t.Fatalf("git rev-parse %s^{tree} = %s; the fixture expects the branch (%s)", name, want, old)
	}
	g, err := Open(d, name)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.TreeID() != want {
		t.Fatalf("Open(%q) = tree %s; want the branch's %s, as git resolves it", name, g.TreeID(), want)
	}
}
