//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRevWhereItLeads: capfs run --rev and --commit take the work path
// where it leads in the work tree (issue 26): a link in the project (lnk ->
// sub) runs on sub at the revision and commits there, a link to a denied
// directory is refused, and the repository is found above the mount or inside
// it.
func TestRunRevWhereItLeads(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	repo := gitRepo(t, map[string]string{"sub/s.txt": "at head\n", "vault/v.txt": "vaulted\n"})
	writeTree(t, repo, map[string]string{"sub/s.txt": "work tree\n"})
	for link, target := range map[string]string{"lnk": "sub", "hole": "vault"} {
		if err := os.Symlink(target, filepath.Join(repo, link)); err != nil {
			t.Fatal(err)
		}
	}
	env, _ := stateEnv(t)
	out := filepath.Join(t.TempDir(), "out")
	r := runCapfsEnv(t, repo, env, "run", "--no-lazy", "--work", "project/lnk", "--rev", "HEAD", "--out", out, "--", "cat", "s.txt").want(t, 0)
	if r.stdout != "at head\n" {
		t.Errorf("--work project/lnk --rev HEAD: stdout %q, want sub/s.txt at HEAD\n%s", r.stdout, r.stderr)
	}
	r = runCapfsEnv(t, repo, env, "run", "--no-lazy", "--work", "project/lnk", "--rev", "HEAD", "--commit", "capfs/via-link", "--", "sh", "-c", "echo x > new.txt").want(t, 0)
	if b, err := exec.Command("git", "-C", repo, "show", "capfs/via-link:sub/new.txt").Output(); err != nil || string(b) != "x\n" {
		t.Errorf("capfs/via-link:sub/new.txt = %q, %v\n%s", b, err, r.stderr)
	}

	pol := filepath.Join(t.TempDir(), "policy.toml")
	rules := "default = \"allow\"\n\n[[rules]]\nname = \"vault\"\neffect = \"deny\"\npaths = [\"project/vault\", \"project/vault/**\"]\nreason = \"the vault\"\n"
	if err := os.WriteFile(pol, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCapfsEnv(t, repo, env, "--policy", pol, "run", "--no-lazy", "--work", "project/hole", "--rev", "HEAD", "--out", filepath.Join(t.TempDir(), "o"), "--", "cat", "v.txt")
	if r.code == 0 || strings.Contains(r.stdout, "vaulted") || strings.Contains(r.stderr, repo) {
		t.Errorf("--work project/hole (-> vault, denied) --rev HEAD: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	// The repository above the mount: the project is its directory sub.
	out2 := filepath.Join(t.TempDir(), "out2")
	r = runCapfsEnv(t, filepath.Join(repo, "sub"), env, "run", "--no-lazy", "--rev", "HEAD", "--out", out2, "--", "cat", "s.txt").want(t, 0)
	if r.stdout != "at head\n" {
		t.Errorf("--rev HEAD in sub: stdout %q\n%s", r.stdout, r.stderr)
	}
	// ref/head in sub shows HEAD's sub: --rev and --commit take the same directory.
	out4 := filepath.Join(t.TempDir(), "out4")
	r = runCapfsEnv(t, filepath.Join(repo, "sub"), env, "run", "--no-lazy", "--work", "ref/head", "--rev", "HEAD", "--out", out4, "--", "cat", "s.txt").want(t, 0)
	if r.stdout != "at head\n" {
		t.Errorf("--work ref/head --rev HEAD in sub: stdout %q\n%s", r.stdout, r.stderr)
	}
	r = runCapfsEnv(t, filepath.Join(repo, "sub"), env, "run", "--no-lazy", "--work", "ref/head", "--commit", "capfs/head-sub", "--", "sh", "-c", "echo y > y.txt").want(t, 0)
	if b, err := exec.Command("git", "-C", repo, "show", "capfs/head-sub:sub/y.txt").Output(); err != nil || string(b) != "y\n" {
		t.Errorf("capfs/head-sub:sub/y.txt = %q, %v\n%s", b, err, r.stderr)
	}
	// The repository inside the mount, at project/inner.
	outer := t.TempDir()
	if err := os.Rename(gitRepo(t, map[string]string{"i.txt": "inner\n"}), filepath.Join(outer, "inner")); err != nil {
		t.Fatal(err)
	}
	out3 := filepath.Join(t.TempDir(), "out3")
	r = runCapfsEnv(t, outer, env, "run", "--no-lazy", "--work", "project/inner", "--rev", "HEAD", "--out", out3, "--", "cat", "i.txt").want(t, 0)
	if r.stdout != "inner\n" {
		t.Errorf("--work project/inner --rev HEAD: stdout %q\n%s", r.stdout, r.stderr)
	}
}

// TestRunRevOptionNames: a --rev or --commit name starting with "-" is a usage
// error before anything runs, never an option to git (issue 26). It failed on
// a0432e1^: --commit=-x reached git branch, which read it as an option.
func TestRunRevOptionNames(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	repo := gitRepo(t, map[string]string{"a.txt": "a\n"})
	env, _ := stateEnv(t)
	for _, args := range [][]string{
		{"--rev=-x"},
		{"--rev=--output=x"},
		{"--rev", "HEAD", "--commit=-x"},
		{"--rev", "HEAD", "--commit=--force"},
		{"--rev=-x", "--commit", "capfs/y"},
	} {
		a := append(append([]string{"run", "--no-lazy"}, args...), "--", "echo", "ran")
		r := runCapfsEnv(t, repo, env, a...)
		if r.code != exitUsage || strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, "must not start with -") {
			t.Errorf("capfs %q: exit %d, want %d before the command runs\nstdout:\n%s\nstderr:\n%s", a, r.code, exitUsage, r.stdout, r.stderr)
		}
	}
	if b, err := exec.Command("git", "-C", repo, "branch", "--list").Output(); err != nil || strings.TrimSpace(string(b)) != "* main" {
		t.Errorf("branches after the refused runs: %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(repo, "x")); err == nil {
		t.Errorf("a refused --rev wrote x")
	}
}
