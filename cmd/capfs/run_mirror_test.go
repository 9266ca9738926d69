//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func gitIn(t *testing.T, root string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %q: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestRunMirrorsPolicy: inside capfs run, persistence files and .git are
// read-only (EROFS at once); git cannot commit, tag or reset into the host's
// repository; the rest is synced back.
func TestRunMirrorsPolicy(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := gitRepo(t, map[string]string{"a.txt": "a\n", ".bashrc": "alias x=y\n"})
	writeTree(t, root, map[string]string{".env": "TOKEN=UNTRACKED\n"})
	before := gitIn(t, root, "rev-parse", "HEAD") + gitIn(t, root, "tag") + gitIn(t, root, "ls-files", "-s")
	script := `export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b
{ echo evil >> .bashrc; } 2>&1; { echo x > .git/hooks/pre-commit; } 2>&1
echo changed > a.txt; git commit -qam sandboxed 2>&1 | tail -n 1; git tag evil 2>&1 | tail -n 1
git reset -q --soft HEAD 2>&1 | tail -n 1; echo new > new.txt`
	r := runCapfs(t, root, "run", "--no-lazy", "--", "sh", "-c", script).want(t, 0)
	if n := strings.Count(r.stdout, "Read-only file system"); n < 4 {
		t.Errorf("want 4 writes refused with EROFS inside, got %d:\n%s", n, r.stdout)
	}
	after := gitIn(t, root, "rev-parse", "HEAD") + gitIn(t, root, "tag") + gitIn(t, root, "ls-files", "-s")
	if before != after {
		t.Fatalf("the host repository changed:\n%s\nthen\n%s", before, after)
	}
	if st := gitIn(t, root, "status", "--porcelain"); st != " M a.txt\n?? .env\n?? new.txt\n" {
		t.Fatalf("host git status %q", st)
	}
	if b, _ := os.ReadFile(filepath.Join(root, ".bashrc")); string(b) != "alias x=y\n" {
		t.Fatalf(".bashrc on the host: %q", b)
	}
	if !strings.Contains(r.stderr, "capfs: run: limits: ") {
		t.Errorf("the summary does not state the limits:\n%s", r.stderr)
	}
}

// TestRunGitHistorySecret: a committed secret the checkout hides is not
// reachable through git inside; the summary says why .git is empty.
func TestRunGitHistorySecret(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := gitRepo(t, map[string]string{"a.txt": "a\n", ".env": "TOKEN=COMMITTED-SECRET\n"})
	r := runCapfs(t, root, "run", "--no-lazy", "--", "sh", "-c", `git show HEAD:.env 2>&1; cat .env 2>&1; grep -r COMMITTED-SECRET . 2>&1; true`).want(t, 0)
	if strings.Contains(r.stdout, "COMMITTED-SECRET") {
		t.Fatalf("the committed secret reached the sandbox:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "project/.git's contents: git directory emptied: its history names .env, which the policy hides") {
		t.Errorf("the summary does not say .git was left out:\n%s", r.stderr)
	}
	// --git keep refuses such a history too (it showed the secret before).
	r = runCapfs(t, root, "run", "--git", "keep", "--", "sh", "-c", `git show HEAD:.env; true`).want(t, 0)
	if strings.Contains(r.stdout, "COMMITTED-SECRET") {
		t.Fatalf("--git keep: %q", r.stdout)
	}
}

// TestRunLimits: a fork bomb, a /tmp filler and a memory hog are bounded by
// --max-procs, --tmp-size and --max-memory.
func TestRunLimits(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	bomb := `sh -c 'i=0; while [ $i -lt 2000 ]; do sleep 1000 & i=$((i+1)); echo $i > /tmp/n; done' 2>/dev/null
read n < /tmp/n; echo "started $n"`
	r := runCapfs(t, root, "run", "--max-procs", "50", "--", "sh", "-c", bomb).want(t, 0)
	if !strings.Contains(r.stderr, "limits: 50 processes") {
		t.Fatalf("summary:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "processes unbounded") {
		t.Skipf("no cgroup here and the sandbox maps to root: processes are not bounded (%s)", r.stderr)
	}
	n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(r.stdout), "started "))
	if err != nil || n >= 50 {
		t.Fatalf("with --max-procs 50 the fork bomb started %q", r.stdout)
	}

	r = runCapfs(t, root, "run", "--tmp-size", "1M", "--", "sh", "-c", `head -c 2097152 /dev/zero > /tmp/big || echo refused`).want(t, 0)
	if !strings.Contains(r.stdout, "refused") || !strings.Contains(r.stderr, "No space left on device") {
		t.Fatalf("--tmp-size 1M, 2 MiB written: stdout %q stderr:\n%s", r.stdout, r.stderr)
	}

	hog := `x=$(head -c 150000000 /dev/zero | tr '\0' a); echo "held ${#x}"`
	r = runCapfs(t, root, "run", "--max-memory", "64M", "--", "sh", "-c", hog)
	if r.code == 0 || strings.Contains(r.stdout, "held") {
		t.Fatalf("--max-memory 64M, 150 MB held: exit %d stdout %q", r.code, r.stdout)
	}
	r = runCapfs(t, root, "run", "--max-memory", "1G", "--", "sh", "-c", hog).want(t, 0)
	if r.stdout != "held 150000000\n" {
		t.Fatalf("--max-memory 1G: %q", r.stdout)
	}
	for _, bad := range [][]string{{"--max-memory", "lots"}, {"--tmp-size", "-1"}, {"--max-procs", "-2"}, {"--git", "maybe"}} {
		if r := runCapfs(t, root, append(append([]string{"run"}, bad...), "--", "true")...); r.code != exitUsage {
			t.Errorf("capfs run %q: exit %d, want %d", bad, r.code, exitUsage)
		}
	}
}

// TestRunMountinfo: no host path of the project or of a read-only grant shows
// in the sandbox's /proc/self/mountinfo; --bind-grants shows the grant's
// (documented), which proves the probe can see one.
func TestRunMountinfo(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := filepath.Join(t.TempDir(), "alice-project-5e1d")
	deps := filepath.Join(t.TempDir(), "alice-deps-0b7c")
	writeTree(t, root, map[string]string{"main.go": "package main\n"})
	writeTree(t, deps, map[string]string{"lib/x.go": "package lib\n"})
	args := []string{"-m", "project=physical:" + root, "-m", "deps=physical:" + deps + ",ro", "run"}
	r := runCapfs(t, root, append(args, "--", "cat", "/proc/self/mountinfo", "/capfs/deps/lib/x.go")...).want(t, 0)
	if !strings.Contains(r.stdout, "package lib") {
		t.Fatalf("the grant is not in the sandbox:\n%s", r.stdout)
	}
	for _, p := range []string{root, deps, "alice-project", "alice-deps"} {
		if strings.Contains(r.stdout, p) {
			t.Errorf("mountinfo inside names the host path %s:\n%s", p, r.stdout)
		}
	}
	// As root with /dev/shm a tmpfs, each checkout is a tmpfs of its own: not
	// even its temporary name shows.
	base := os.Getenv("CAPFS_TMPDIR")
	if base == "" {
		base = "/dev/shm"
	}
	var sfs unix.Statfs_t
	if os.Geteuid() == 0 && unix.Statfs(base, &sfs) == nil && sfs.Type == unix.TMPFS_MAGIC && strings.Contains(r.stdout, "capfs-checkout-") {
		t.Errorf("mountinfo inside names a checkout directory:\n%s", r.stdout)
	}
	r = runCapfs(t, root, append(args, "--bind-grants", "--", "cat", "/proc/self/mountinfo")...).want(t, 0)
	if !strings.Contains(r.stdout, "alice-deps-0b7c") {
		t.Errorf("--bind-grants: the bound grant's path should show (as documented):\n%s", r.stdout)
	}
}

// TestRunGrantUnaddressable: a read-only grant holding a name the namespace
// cannot address (a backslash) never shows it inside, bound or not.
func TestRunGrantUnaddressable(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root, deps := t.TempDir(), t.TempDir()
	writeTree(t, deps, map[string]string{"pub/readme": "hello\n", `pub/sec\ret`: "SECRET-BACKSLASH\n"})
	for _, extra := range [][]string{nil, {"--bind-grants"}} {
		args := append([]string{"-m", "project=physical:" + root, "-m", "deps=physical:" + deps + ",ro", "run"}, extra...)
		r := runCapfs(t, root, append(args, "--", "sh", "-c", `ls -A /capfs/deps/pub; grep -r SECRET /capfs/deps || echo "no secret"`)...).want(t, 0)
		if r.stdout != "readme\nno secret\n" {
			t.Errorf("capfs run %q: %q", extra, r.stdout)
		}
	}
}
