package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDiffLikeGit makes changes in a git work tree (an edit, an exact and an
// inexact rename, a rename with a mode change, an addition, a deletion, a
// mode change, an ignored build directory) and wants capfs diff ref/head
// project to print what "git diff --cached -M" prints once they are staged,
// in each format.
func TestDiffLikeGit(t *testing.T) {
	t.Parallel()
	body := "alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\n"
	root := gitRepo(t, map[string]string{
		".gitignore":    "build/\n*.o\n",
		"edit.txt":      "one\ntwo\nthree\n",
		"moved.txt":     body,
		"similar.txt":   body + "iota\n",
		"gone.txt":      "bye\n",
		"dir/keep.txt":  "keep\n",
		"dir/chmod.sh":  "#!/bin/sh\n",
		"unchanged.txt": "same\n",
		"tool.sh":       "#!/bin/sh\necho tool\n",
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(root, "edit.txt"), []byte("one\n2\nthree\n"), 0o644))
	must(os.Rename(filepath.Join(root, "moved.txt"), filepath.Join(root, "dir/renamed.txt")))
	must(os.Remove(filepath.Join(root, "similar.txt")))
	must(os.WriteFile(filepath.Join(root, "similar2.txt"), []byte(strings.Replace(body, "delta", "DELTA", 1)+"iota\n"), 0o644))
	must(os.Remove(filepath.Join(root, "gone.txt")))
	must(os.WriteFile(filepath.Join(root, "added.txt"), []byte("new\n"), 0o644))
	must(os.Chmod(filepath.Join(root, "dir/chmod.sh"), 0o755))
	must(os.Rename(filepath.Join(root, "tool.sh"), filepath.Join(root, "dir/runner.sh")))
	must(os.Chmod(filepath.Join(root, "dir/runner.sh"), 0o755))
	writeTree(t, root, map[string]string{"build/out.bin": "artifact\n", "x.o": "obj\n"})
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return string(out)
	}
	// Stage a copy of the index elsewhere, so the work tree is what capfs sees.
	git("add", "-A")
	for _, tc := range []struct{ capfs, git []string }{
		{nil, []string{"diff", "--cached", "-M", "--no-color"}},
		{[]string{"--stat"}, []string{"diff", "--cached", "-M", "--stat=80", "--no-color"}},
		{[]string{"--name-status"}, []string{"diff", "--cached", "-M", "--name-status"}},
		{[]string{"--name-only"}, []string{"diff", "--cached", "-M", "--name-only"}},
		{[]string{"--no-renames", "--name-status"}, []string{"diff", "--cached", "--no-renames", "--name-status"}},
	} {
		want := git(tc.git...)
		r := runCapfs(t, root, append(append([]string{"diff"}, tc.capfs...), "ref/head", "project")...).want(t, 0)
		if r.stdout != want {
			t.Errorf("capfs diff %q:\n%s\ngit %q:\n%s", tc.capfs, r.stdout, tc.git, want)
		}
	}
	// .git is compared with --dot-git only, ignored files with --no-ignore only.
	r := runCapfs(t, root, "diff", "--name-only", "--dot-git", "--no-ignore", "ref/head", "project").want(t, 0)
	for _, p := range []string{".git/", "build/out.bin", "x.o"} {
		if !strings.Contains(r.stdout, p) {
			t.Errorf("--dot-git --no-ignore lacks %s:\n%s", p, r.stdout)
		}
	}
	runCapfs(t, root, "diff", "--exit-code", "--name-only", "ref/head", "project").want(t, 1)
	r = runCapfs(t, root, "diff", "--exit-code", "ref/head/unchanged.txt", "project/unchanged.txt").want(t, 0)
	if r.stdout != "" {
		t.Errorf("equal files: %q", r.stdout)
	}
	runCapfs(t, root, "diff", "--stat", "--name-only", "ref/head", "project").want(t, 2)
}

// TestDiffSecrets checks that a changed secret is left out and counted once,
// and compared with --allow-secret.
func TestDiffSecrets(t *testing.T) {
	t.Parallel()
	a, b := t.TempDir(), t.TempDir()
	writeTree(t, a, map[string]string{".env": "A=1\n", "k/server.key": "old\n", "x.txt": "x\n"})
	writeTree(t, b, map[string]string{".env": "A=2\n", "k/server.key": "new\n", "x.txt": "y\n"})
	args := []string{"-m", "a=physical:" + a + ",ro", "-m", "b=physical:" + b + ",ro"}
	r := runCapfs(t, a, append(args, "diff", "--name-only", "a", "b")...).want(t, 0)
	if r.stdout != "x.txt\n" {
		t.Errorf("diff shows a secret: %q", r.stdout)
	}
	if want := "capfs: diff: 2 paths not compared, refused by the policy: .env, k/server.key; pass --allow-secret GLOB to compare one\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
	r = runCapfs(t, a, append(args, "--allow-secret", "*/.env", "diff", "--name-only", "a", "b")...).want(t, 0)
	if r.stdout != ".env\nx.txt\n" {
		t.Errorf("--allow-secret: %q", r.stdout)
	}
}

// TestDiffIndexCache checks the work tree's git index used as git uses it: an
// unchanged file whose stat matches the index is not opened, and the diff is
// the same as with --no-index-cache and as git's.
func TestDiffIndexCache(t *testing.T) {
	t.Parallel()
	root := gitRepo(t, map[string]string{"same.txt": "same\n", "edit.txt": "a\nb\n", "sub/deep.txt": "deep\n"})
	old := time.Now().Add(-time.Hour)
	for _, f := range []string{"same.txt", "edit.txt", "sub/deep.txt"} {
		if err := os.Chtimes(filepath.Join(root, f), old, old); err != nil {
			t.Fatal(err)
		}
	}
	refresh := exec.Command("git", "update-index", "--refresh")
	refresh.Dir = root
	if out, err := refresh.CombinedOutput(); err != nil {
		t.Fatalf("git update-index: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(root, "edit.txt"), []byte("a\nB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitDiff := exec.Command("git", "diff")
	gitDiff.Dir = root
	want, err := gitDiff.Output()
	if err != nil {
		t.Fatal(err)
	}
	logs := t.TempDir()
	withCache := runCapfs(t, root, "--audit", filepath.Join(logs, "with.jsonl"), "diff", "ref/head", "project").want(t, 0)
	without := runCapfs(t, root, "--audit", filepath.Join(logs, "without.jsonl"), "diff", "--no-index-cache", "ref/head", "project").want(t, 0)
	if withCache.stdout != string(want) || without.stdout != string(want) {
		t.Errorf("with the index: %q\nwithout: %q\ngit diff: %q", withCache.stdout, without.stdout, want)
	}
	opened := func(name string) bool {
		for _, e := range readAudit(t, filepath.Join(logs, name)) {
			if strings.HasSuffix(e.Path, "same.txt") && e.Op == "read" {
				return true
			}
		}
		return false
	}
	if opened("with.jsonl") {
		t.Error("with the index cache, the unchanged same.txt was opened")
	}
	if !opened("without.jsonl") {
		t.Error("without the index cache, same.txt was not opened: the test does not see opens")
	}
}

// TestDiffColor checks --color=always: git's colours for headers, hunks,
// removed and added lines; and none in a pipe by default.
func TestDiffColor(t *testing.T) {
	t.Parallel()
	a, b := t.TempDir(), t.TempDir()
	writeTree(t, a, map[string]string{"f.txt": "one\ntwo\n"})
	writeTree(t, b, map[string]string{"f.txt": "one\n2\n"})
	args := []string{"-m", "a=physical:" + a + ",ro", "-m", "b=physical:" + b + ",ro", "diff"}
	r := runCapfs(t, a, append(args, "--color=always", "a", "b")...).want(t, 0)
	for _, want := range []string{"\x1b[1mdiff --git a/f.txt b/f.txt\x1b[m\n", "\x1b[36m@@ -1,2 +1,2 @@\x1b[m\n", "\x1b[31m-two\x1b[m\n", "\x1b[32m+2\x1b[m\n", " one\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--color=always lacks %q:\n%q", want, r.stdout)
		}
	}
	r = runCapfs(t, a, append(args, "a", "b")...).want(t, 0)
	if strings.Contains(r.stdout, "\x1b[") {
		t.Errorf("colour in a pipe: %q", r.stdout)
	}
}
