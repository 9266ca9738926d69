//go:build unix

package gitindex

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// gitRepo makes a git repository holding files, committed, and returns its
// directory. It skips the test when git is not installed.
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root := t.TempDir()
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, root, "init", "-q", "-b", "main")
	git(t, root, "add", "-A")
	git(t, root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "initial")
	return root
}

// git runs git in root and returns its output, trimmed.
func git(t *testing.T, root string, args ...string) string {
	t.Helper()
	c := exec.Command("git", args...)
	c.Dir = root
	c.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestCacheTreesGitsOwn: the cache-tree extension of git's own index is read
// as git wrote it: every valid directory with the tree id git has for it, the
// directories git invalidated left out.
func TestCacheTreesGitsOwn(t *testing.T) {
	t.Parallel()
	root := gitRepo(t, map[string]string{
		"top.txt": "top\n", "a/one.txt": "1\n", "a/b/two.txt": "2\n", "c/three.txt": "3\n", "c/d/four.txt": "4\n",
	})
	// A fresh cache-tree for every directory, then one invalidated: an
	// intent-to-add file in c/d invalidates c/d, c and the top.
	git(t, root, "read-tree", "HEAD")
	if err := os.WriteFile(filepath.Join(root, "c/d/new.txt"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, root, "add", "-N", "c/d/new.txt")
	data, err := os.ReadFile(filepath.Join(root, ".git/index"))
	if err != nil {
		t.Fatal(err)
	}
	trees := cacheTrees(data, strings.Count(git(t, root, "ls-files", "--stage"), "\n")+1)
	if trees == nil {
		t.Fatalf("no cache-tree read from git's index")
	}
	for _, d := range []string{"a", "a/b"} {
		if want := git(t, root, "rev-parse", "HEAD:"+d); trees[d] != want {
			t.Errorf("cache-tree %s = %q, want %s", d, trees[d], want)
		}
	}
	for _, d := range []string{"", "c", "c/d"} {
		if id, ok := trees[d]; ok {
			t.Errorf("cache-tree %q = %s, but git invalidated it", d, id)
		}
	}
}

// TestCacheTreesRejectsDamage: an index whose extension does not parse
// exactly gives no cache-tree (the diff then checks every file on both sides).
func TestCacheTreesRejectsDamage(t *testing.T) {
	t.Parallel()
	root := gitRepo(t, map[string]string{"a/x.txt": "x\n"})
	git(t, root, "read-tree", "HEAD")
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
		git(t, root, "read-tree", "HEAD")
		git(t, root, "update-index", "--index-version", v)
		ids := []string{
			git(t, root, "rev-parse", "HEAD:a"), git(t, root, "rev-parse", "HEAD:a/b"),
			git(t, root, "rev-parse", "HEAD:c"), git(t, root, "rev-parse", "HEAD^{tree}"),
		}
		data, err := os.ReadFile(filepath.Join(root, ".git/index"))
		if err != nil {
			t.Fatal(err)
		}
		tr := cacheTrees(data, 5)
		if tr["a"] != ids[0] || tr["a/b"] != ids[1] || tr["c"] != ids[2] || tr[""] != ids[3] {
			t.Errorf("index version %s: cache-tree %v, want a, a/b, c and the top %v", v, tr, ids)
		}
	}
}

// TestLoad: the index of a work tree is loaded with its entries relative to
// the directory compared, the top's and a subdirectory's; a work tree whose
// index is not a regular file (a FIFO would block the read for ever) or
// whose .git is a file has no hints.
func TestLoad(t *testing.T) {
	t.Parallel()
	root := gitRepo(t, map[string]string{"top.txt": "t\n", "a/one.txt": "1\n", "a/b/two.txt": "2\n"})
	h := Load(root, ".")
	if h == nil || h.entries["top.txt"] == nil || h.entries["a/b/two.txt"] == nil || len(h.trees) == 0 {
		t.Fatalf("Load(top) = %+v", h)
	}
	h = Load(root, "a")
	if h == nil || h.entries["one.txt"] == nil || h.entries["b/two.txt"] == nil || h.entries["top.txt"] != nil || h.prefix != "a" {
		t.Fatalf("Load(a) = %+v", h)
	}
	if Load(t.TempDir(), ".") != nil {
		t.Error("hints without a .git")
	}
	idx := filepath.Join(root, ".git", "index")
	if err := os.Remove(idx); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(idx, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if Load(root, ".") != nil {
		t.Error("hints from a FIFO index")
	}
	wt := t.TempDir()
	if err := os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: "+filepath.Join(root, ".git")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if Load(wt, ".") != nil {
		t.Error("a .git file was followed")
	}
}

// TestCacheTreesTruncated: an index cut anywhere, or one whose entry claims
// extended flags (version 3) the data then lacks, gives no cache-tree and
// does not panic; before the bound on the flags' two bytes, an index cut
// just after an entry's fixed part with them set panicked (a slice past its
// end).
func TestCacheTreesTruncated(t *testing.T) {
	t.Parallel()
	root := gitRepo(t, map[string]string{"a/x.txt": "x\n"})
	git(t, root, "read-tree", "HEAD")
	data, err := os.ReadFile(filepath.Join(root, ".git/index"))
	if err != nil {
		t.Fatal(err)
	}
	ext := append([]byte(nil), data...)
	ext[7] = 3         // version 3
	ext[12+60] |= 0x40 // the first entry's extended flag
	for _, d := range [][]byte{data, ext} {
		for n := range len(d) - 1 {
			if tr := cacheTrees(d[:n], 1); tr != nil {
				t.Errorf("a cache-tree from the first %d bytes: %v", n, tr)
			}
		}
	}
}
