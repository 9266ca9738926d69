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
