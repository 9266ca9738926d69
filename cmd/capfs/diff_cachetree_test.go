package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDiffCacheTree: a diff that uses the cache-tree extension of git's own
// index (internal/gitindex reads it) still shows a change git's index does
// not know about, in a directory whose tree is unchanged, and is the same as
// git diff's and as without the index; it skips the revision's Lstats only
// under the directories whose cache-tree git kept valid.
func TestDiffCacheTree(t *testing.T) {
	t.Parallel()
	root := gitRepo(t, map[string]string{
		"top.txt": "top\n", "a/one.txt": "1\n", "a/b/two.txt": "2\n", "c/three.txt": "3\n", "c/d/four.txt": "4\n",
	})
	git := func(args ...string) string {
		t.Helper()
		c := exec.Command("git", args...)
		c.Dir = root
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	// A fresh cache-tree for every directory, then one invalidated: an
	// intent-to-add file in c/d invalidates c/d, c and the top.
	git("read-tree", "HEAD")
	if err := os.WriteFile(filepath.Join(root, "c/d/new.txt"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "-N", "c/d/new.txt")
	// Under a/b, whose tree is the index's: an edit git's index has not seen
	// (size changed) is shown.
	old := time.Now().Add(-time.Hour)
	for _, f := range []string{"top.txt", "a/one.txt", "a/b/two.txt", "c/three.txt", "c/d/four.txt"} {
		if err := os.Chtimes(filepath.Join(root, f), old, old); err != nil {
			t.Fatal(err)
		}
	}
	git("update-index", "-q", "--refresh")
	if err := os.WriteFile(filepath.Join(root, "a/b/two.txt"), []byte("2\nmore\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := git("diff", "--stat")
	logs := t.TempDir()
	with := runCapfs(t, root, "--audit", filepath.Join(logs, "with.jsonl"), "diff", "--stat", "ref/head", "project").want(t, 0)
	without := runCapfs(t, root, "diff", "--stat", "--no-index-cache", "ref/head", "project").want(t, 0)
	if strings.TrimSpace(with.stdout) != want || with.stdout != without.stdout {
		t.Errorf("with the index:\n%s\nwithout:\n%s\ngit diff --stat:\n%s", with.stdout, without.stdout, want)
	}
	// The revision's unchanged files under a were not looked at one by one
	// (its tree is the index's); c's were (git invalidated its cache-tree).
	looked := map[string]bool{}
	for _, e := range readAudit(t, filepath.Join(logs, "with.jsonl")) {
		if e.Op == "stat" {
			looked[e.Path] = true
		}
	}
	if looked["ref/head/a/one.txt"] || !looked["ref/head/c/three.txt"] {
		t.Errorf("stat calls on the revision: %v", looked)
	}
}
