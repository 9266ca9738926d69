//go:build linux

package materialize_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/policy"
)

// TestScanGitHistoryCache: a second scan of the same git directory reads the
// cache (same paths, Cached); a new commit, a changed budget past what the
// scan read, and a cache file altered in any byte each mean a rescan.
func TestScanGitHistoryCache(t *testing.T) {
	root := gitRepo(t, map[string]string{"a.txt": "a\n", "conf/.env": "S=1\n"}, map[string]string{"conf/.env": ""})
	gitdir := filepath.Join(root, ".git")
	cache := t.TempDir()
	first, err := materialize.ScanGitHistory(ctx, gitdir, 0, cache)
	must(t, err)
	if first.Cached || !first.Complete || !slices.Contains(first.Paths, "conf/.env") || !slices.Contains(first.Paths, "a.txt") {
		t.Fatalf("first scan: %+v", first)
	}
	if len(first.Objects) == 0 || !first.Objects["objects"] {
		t.Fatalf("first scan's Objects: %v", first.Objects)
	}
	again, err := materialize.ScanGitHistory(ctx, gitdir, 0, cache)
	must(t, err)
	if !again.Cached || !slices.Equal(again.Paths, first.Paths) || again.Trees != first.Trees {
		t.Fatalf("second scan: %+v, want the first's paths from the cache", again)
	}
	// A budget below what the scan read cannot trust the cached answer.
	small, err := materialize.ScanGitHistory(ctx, gitdir, 1, cache)
	must(t, err)
	if small.Cached || small.Complete {
		t.Fatalf("budget 1: %+v, want a rescan that stops at the budget", small)
	}

	files, _ := filepath.Glob(filepath.Join(cache, "*.scan"))
	if len(files) != 1 {
		t.Fatalf("cache files: %q", files)
	}
	good, err := os.ReadFile(files[0])
	must(t, err)
	for i := 0; i < len(good); i += max(1, len(good)/40) {
		bad := slices.Clone(good)
		bad[i] ^= 0x20
		must(t, os.WriteFile(files[0], bad, 0o600))
		h, err := materialize.ScanGitHistory(ctx, gitdir, 0, cache)
		must(t, err)
		if h.Cached {
			t.Fatalf("byte %d altered: the cache was trusted", i)
		}
		if !slices.Equal(h.Paths, first.Paths) {
			t.Fatalf("byte %d altered: rescan paths %q", i, h.Paths)
		}
	}
	must(t, os.WriteFile(files[0], good[:len(good)-1], 0o600))
	if h, err := materialize.ScanGitHistory(ctx, gitdir, 0, cache); err != nil || h.Cached {
		t.Fatalf("truncated cache: %+v %v", h, err)
	}

	writeHost(t, root, map[string]string{"b.txt": "b\n"})
	hostGit(t, root, "add", "b.txt")
	hostGit(t, root, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-m", "b")
	after, err := materialize.ScanGitHistory(ctx, gitdir, 0, cache)
	must(t, err)
	if after.Cached || !slices.Contains(after.Paths, "b.txt") {
		t.Fatalf("after a commit: %+v, want a rescan that finds b.txt", after)
	}
}

// TestGitCheckoutUsesCache: a checkout's scan goes through Options.GitScanCache
// (GitReports says Cached the second time) and still leaves out a history that
// names a hidden path.
func TestGitCheckoutUsesCache(t *testing.T) {
	root := gitRepo(t, map[string]string{"a.txt": "a\n", ".env": "S=1\n"}, map[string]string{".env": ""})
	d, _ := physicalDir(t, root, dir.WithPolicy(policy.Defaults()))
	cache := t.TempDir()
	for i, cached := range []bool{false, true} {
		tr := checkout(t, d, materialize.Options{GitScanCache: cache})
		reps := tr.GitReports()
		if len(reps) != 1 || reps[0].Kept || reps[0].Cached != cached || !strings.Contains(reps[0].Why, ".env") {
			t.Fatalf("checkout %d: GitReports() = %+v", i, reps)
		}
		if sk := gitSkip(tr, ".git"); sk == nil {
			t.Fatalf("checkout %d kept .git", i)
		}
	}
}

// TestGitWorktreeIndexHides: a path added in a linked worktree (named only by
// worktrees/NAME/index, its blob in the shared store) is part of the history:
// the .git is left out.
func TestGitWorktreeIndexHides(t *testing.T) {
	root := gitRepo(t, map[string]string{"a.txt": "a\n"})
	wt := filepath.Join(t.TempDir(), "wt")
	hostGit(t, root, "worktree", "add", "-q", wt)
	writeHost(t, wt, map[string]string{"secrets/.env": "TOKEN=WORKTREE-SECRET\n"})
	hostGit(t, wt, "add", "-f", "secrets/.env")
	h, err := materialize.ScanGitHistory(ctx, filepath.Join(root, ".git"), 0, "")
	must(t, err)
	if !slices.Contains(h.Paths, "secrets/.env") {
		t.Fatalf("paths %q lack the worktree's secrets/.env", h.Paths)
	}
	d, _ := physicalDir(t, root, dir.WithPolicy(policy.Defaults()))
	if sk := gitSkip(checkout(t, d, materialize.Options{}), ".git"); sk == nil || !strings.Contains(sk.Reason, "secrets/.env") {
		t.Fatalf(".git with a worktree index naming secrets/.env: %+v", sk)
	}
}

// TestGitUnnamedObjects: a blob added to the index and dropped from it (no
// path names it) is left out of a kept .git while loose, and the .git is left
// out under GitAuto once it is packed (kept under GitKeep); the cache keeps
// both answers.
func TestGitUnnamedObjects(t *testing.T) {
	root := gitRepo(t, map[string]string{"a.txt": "a\n"})
	writeHost(t, root, map[string]string{".env": "TOKEN=DANGLING-SECRET\n"})
	id := strings.TrimSpace(hostGit(t, root, "hash-object", "-w", ".env"))
	must(t, os.Remove(filepath.Join(root, ".env")))
	loose := "objects/" + id[:2] + "/" + id[2:]
	cache := t.TempDir()
	for i := range 2 {
		h, err := materialize.ScanGitHistory(ctx, filepath.Join(root, ".git"), 0, cache)
		must(t, err)
		if h.Cached != (i == 1) || !slices.Equal(h.Unnamed, []string{loose}) || h.UnnamedPacked != 0 || h.Objects[loose] || !h.Objects["objects/"+id[:2]] {
			t.Fatalf("scan %d: Unnamed %q, packed %d, cached %v, Objects[%s] %v", i, h.Unnamed, h.UnnamedPacked, h.Cached, loose, h.Objects[loose])
		}
	}
	d, _ := physicalDir(t, root, dir.WithPolicy(policy.Defaults()))
	tr := checkout(t, d, materialize.Options{})
	if reps := tr.GitReports(); len(reps) != 1 || !reps[0].Kept || reps[0].Unnamed != 1 {
		t.Fatalf("GitReports() = %+v, want .git kept with one unnamed object removed", reps)
	}
	if _, err := os.Lstat(filepath.Join(tr.Path(), ".git", filepath.FromSlash(loose))); !os.IsNotExist(err) {
		t.Fatalf("the unnamed blob is in the checkout: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, ".git", filepath.FromSlash(loose))); err != nil {
		t.Fatalf("the host's blob: %v", err)
	}
	needBwrap(t)
	out := inSandbox(t, `git cat-file --batch-all-objects --batch 2>&1; git fsck --lost-found 2>&1; git log --oneline | wc -l`, workMount(tr))
	if strings.Contains(out, "DANGLING-SECRET") || !strings.Contains(out, "1\n") {
		t.Fatalf("inside the sandbox:\n%s", out)
	}

	cmd := exec.Command("git", "pack-objects", "-q", ".git/objects/pack/pack")
	cmd.Dir, cmd.Stdin = root, strings.NewReader(id+"\n")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git pack-objects: %v\n%s", err, b)
	}
	must(t, os.Remove(filepath.Join(root, ".git", filepath.FromSlash(loose))))
	h, err := materialize.ScanGitHistory(ctx, filepath.Join(root, ".git"), 0, cache)
	must(t, err)
	if h.Cached || h.UnnamedPacked != 1 || len(h.Unnamed) != 0 {
		t.Fatalf("packed: %+v", h)
	}
	if sk := gitSkip(checkout(t, d, materialize.Options{}), ".git"); sk == nil || !strings.Contains(sk.Reason, "packs 1 objects no commit") {
		t.Fatalf("a packed unnamed blob under GitAuto: %+v", sk)
	}
	if sk := gitSkip(checkout(t, d, materialize.Options{Git: materialize.GitKeep}), ".git"); sk != nil {
		t.Fatalf("a packed unnamed blob under GitKeep: %+v", sk)
	}
}
