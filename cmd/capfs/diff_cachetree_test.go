package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDiffCacheTree: the cache-tree extension of git's own index is read as
// git wrote it (every valid directory with the tree id git has for it, the
// directories git invalidated left out), and a diff that uses it still shows
// a change git's index does not know about, in a directory whose tree is
// unchanged, and is the same as git diff's and as without the index.
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
	data, err := os.ReadFile(filepath.Join(root, ".git/index"))
	if err != nil {
		t.Fatal(err)
	}
	trees := cacheTrees(data, strings.Count(git("ls-files", "--stage"), "\n")+1)
	if trees == nil {
		t.Fatalf("no cache-tree read from git's index")
	}
	for _, d := range []string{"a", "a/b"} {
		if want := git("rev-parse", "HEAD:"+d); trees[d] != want {
			t.Errorf("cache-tree %s = %q, want %s", d, trees[d], want)
		}
	}
	for _, d := range []string{"", "c", "c/d"} {
		if id, ok := trees[d]; ok {
			t.Errorf("cache-tree %q = %s, but git invalidated it", d, id)
		}
	}
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

// TestCacheTreesRejectsDamage: an index whose extension does not parse
// exactly gives no cache-tree (the diff then checks every file on both sides).
func TestCacheTreesRejectsDamage(t *testing.T) {
	t.Parallel()
	root := gitRepo(t, map[string]string{"a/x.txt": "x\n"})
	c := exec.Command("git", "read-tree", "HEAD")
	c.Dir = root
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(root, ".git/index"))
	if err != nil {
		t.Fatal(err)
	}
	if cacheTrees(data, 1) == nil {
		t.Fatal("no cache-tree in a fresh index")
	}
	if cacheTrees(data, 2) != nil {
		t.Error("an entry count that does not match was accepted")
	}
	i := strings.Index(string(data), "TREE")
	if i < 0 {
		t.Fatal("no TREE extension")
	}
	bad := append([]byte(nil), data...)
	bad[i+8] = 'a' // the top's name must be empty
	if cacheTrees(bad, 1) != nil {
		t.Error("a damaged extension was accepted")
	}
	if cacheTrees(data[:20], 1) != nil {
		t.Error("a truncated index was accepted")
	}
}

// TestCacheTreesIndexVersions: the entries are skipped right in every index
// version git writes (2, 3, and 4 with its prefix-compressed names), so the
// extension after them is found and read the same.
func TestCacheTreesIndexVersions(t *testing.T) {
	t.Parallel()
	root := gitRepo(t, map[string]string{"top.txt": "t\n", "a/one.txt": "1\n", "a/b/two.txt": "2\n", "a/b/three-long-name.txt": "3\n", "c/x.txt": "x\n"})
	for _, v := range []string{"2", "3", "4"} {
		c := exec.Command("sh", "-c", "git read-tree HEAD && git update-index --index-version "+v+" && git rev-parse HEAD:a HEAD:a/b HEAD:c 'HEAD^{tree}'")
		c.Dir = root
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("index version %s: %v\n%s", v, err, out)
		}
		ids := strings.Fields(string(out))
		data, err := os.ReadFile(filepath.Join(root, ".git/index"))
		if err != nil {
			t.Fatal(err)
		}
		tr := cacheTrees(data, 5)
		if len(ids) != 4 || tr["a"] != ids[0] || tr["a/b"] != ids[1] || tr["c"] != ids[2] || tr[""] != ids[3] {
			t.Errorf("index version %s: cache-tree %v, want a, a/b, c and the top %v", v, tr, ids)
		}
	}
}
