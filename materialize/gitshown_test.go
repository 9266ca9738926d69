//go:build linux

package materialize_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/policy"
)

// TestGitShownOnly: a kept .git holds only what git's read commands use.
// Stores whose contents no history path names (a Git LFS object of a file
// added and dropped, rr-cache pre-images, a rebase's patches, MERGE_MSG) are
// left out of the checkout, so a secret in them does not reach the sandbox; on
// the code before, they were copied with the rest of the .git.
func TestGitShownOnly(t *testing.T) {
	root := gitRepo(t, map[string]string{"a.txt": "a\n"})
	writeHost(t, root, map[string]string{
		".git/lfs/objects/ab/cd/abcd1234": "TOKEN=LFS-SECRET\n",
		".git/rr-cache/0123/preimage":     "TOKEN=RR-SECRET\n",
		".git/rebase-apply/0001":          "+TOKEN=PATCH-SECRET\n",
		".git/MERGE_MSG":                  "TOKEN=MSG-SECRET\n",
	})
	d, _ := physicalDir(t, root, dir.WithPolicy(policy.Defaults()))
	tr := checkout(t, d, materialize.Options{})
	if reps := tr.GitReports(); len(reps) != 1 || !reps[0].Kept {
		t.Fatalf("GitReports() = %+v, want .git kept", reps)
	}
	for _, p := range []string{"lfs", "rr-cache", "rebase-apply", "MERGE_MSG"} {
		if _, err := os.Lstat(filepath.Join(tr.Path(), ".git", p)); !os.IsNotExist(err) {
			t.Errorf(".git/%s is in the checkout: %v", p, err)
		}
	}
	for _, p := range []string{"HEAD", "config", "objects", "refs", "index"} {
		if _, err := os.Lstat(filepath.Join(tr.Path(), ".git", p)); err != nil {
			t.Errorf(".git/%s is not in the checkout: %v", p, err)
		}
	}
	for _, p := range []string{"lfs/objects/ab/cd/abcd1234", "MERGE_MSG"} {
		if _, err := os.Lstat(filepath.Join(root, ".git", filepath.FromSlash(p))); err != nil {
			t.Errorf("the host's .git/%s: %v", p, err)
		}
	}
	if !materialize.GitShows("objects/ab/cd") || !materialize.GitShows("") || materialize.GitShows("lfs/objects") || materialize.GitShows("annex") {
		t.Error("GitShows: wrong answer")
	}
	needBwrap(t)
	out := inSandbox(t, `grep -r SECRET .git 2>/dev/null || echo "no secret"; git log --oneline | wc -l`, workMount(tr))
	if strings.Contains(out, "-SECRET") || !strings.Contains(out, "no secret") || !strings.Contains(out, "1\n") {
		t.Fatalf("inside the sandbox:\n%s", out)
	}
}

// TestGitShownNested: the stores no history path names are left out beneath
// a submodule's and a linked worktree's git directory too, and from a .git
// kept unread under GitKeep (history past the budget); on the code before,
// both kept them.
func TestGitShownNested(t *testing.T) {
	for _, c := range []struct {
		rel  string
		want bool
	}{
		{"modules/sub/objects/ab", true}, {"modules/a/b/HEAD", true}, {"modules/sub/lfs/objects/x", false},
		{"modules/a/b/rr-cache/1/preimage", false}, {"worktrees/w/MERGE_MSG", false}, {"worktrees/w/HEAD", true},
		{"refs/heads/lfs", true},
	} {
		if got := materialize.GitShows(c.rel); got != c.want {
			t.Errorf("GitShows(%s) = %v, want %v", c.rel, got, c.want)
		}
	}
	root := gitRepo(t, map[string]string{"a.txt": "a\n"})
	writeHost(t, root, map[string]string{
		".git/modules/sub/HEAD":              "ref: refs/heads/main\n",
		".git/modules/sub/lfs/objects/x/y":   "TOKEN=SUB-LFS-SECRET\n",
		".git/worktrees/w/rebase-apply/0001": "+TOKEN=WT-PATCH-SECRET\n",
		".git/lfs/objects/ab/cd/abcd":        "TOKEN=LFS-SECRET\n",
	})
	d, _ := physicalDir(t, root, dir.WithPolicy(policy.Defaults()))
	for _, opts := range []materialize.Options{{}, {Git: materialize.GitKeep, GitScanBudget: 1}} {
		tr := checkout(t, d, opts)
		if reps := tr.GitReports(); len(reps) != 1 || !reps[0].Kept {
			t.Fatalf("%+v: GitReports() = %+v, want .git kept", opts, reps)
		}
		for _, p := range []string{"modules/sub/lfs", "worktrees/w/rebase-apply", "lfs"} {
			if _, err := os.Lstat(filepath.Join(tr.Path(), ".git", filepath.FromSlash(p))); !os.IsNotExist(err) {
				t.Errorf("%+v: .git/%s is in the checkout: %v", opts, p, err)
			}
		}
		if _, err := os.Lstat(filepath.Join(tr.Path(), ".git", "modules", "sub", "HEAD")); err != nil {
			t.Errorf("%+v: .git/modules/sub/HEAD: %v", opts, err)
		}
	}
}
