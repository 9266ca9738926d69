//go:build linux

package main

import (
	"strings"
	"testing"
)

// TestRunGitShownOnly: in every run mode, a shown .git holds only what git's
// read commands use (materialize.GitShows): a Git LFS object, rr-cache
// pre-images and MERGE_MSG, whose contents no history path names, are not in
// the sandbox, while git log still works. On the code before, they were shown.
func TestRunGitShownOnly(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := gitRepo(t, map[string]string{"a.txt": "a\n"})
	writeTree(t, root, map[string]string{
		".git/lfs/objects/ab/cd/abcd1234": "TOKEN=LFS-SECRET\n",
		".git/rr-cache/0123/preimage":     "TOKEN=RR-SECRET\n",
		".git/MERGE_MSG":                  "TOKEN=MSG-SECRET\n",
	})
	script := `grep -r SECRET .git 2>/dev/null || echo "no secret"; ls .git/lfs 2>&1 | head -n 1; git log --format=subject:%s`
	for _, mode := range gitModes(t) {
		env, _ := gitCacheEnv(t)
		r := runCapfsEnv(t, root, env, append(append([]string{"run"}, mode...), "--sync", "never", "--", "sh", "-c", script)...).want(t, 0)
		if strings.Contains(r.stdout, "-SECRET") || !strings.Contains(r.stdout, "no secret") || !strings.Contains(r.stdout, "subject:initial") {
			t.Errorf("%q: inside the sandbox:\n%s\nstderr:\n%s", mode, r.stdout, r.stderr)
		}
	}
}
