//go:build linux

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/fuseexport"
)

// needLazy skips unless capfs run can sandbox and FUSE works here.
func needLazy(t *testing.T) {
	t.Helper()
	needSandbox(t)
	if err := lazyAvailable(); err != nil {
		t.Skipf("FUSE is not usable here (needs /dev/fuse and root or fusermount3; make sysdeps installs fuse3): %v", err)
	}
}

var auditPathRe = regexp.MustCompile(`capfs: audit log: (\S+)`)

// auditOf reads the audit log a run named on stderr.
func auditOf(t *testing.T, stderr string) []audit.Event {
	t.Helper()
	m := auditPathRe.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no audit log named in:\n%s", stderr)
	}
	return readAudit(t, m[1])
}

// leftovers fails the test when a run left a checkout under base, a lazy
// mount point in the state directory env names, or a FUSE mount under either.
func leftovers(t *testing.T, env []string, base string) {
	t.Helper()
	state := filepath.Join(strings.TrimPrefix(env[0], "XDG_STATE_HOME="), "capfs", "mnt")
	for _, pat := range []string{filepath.Join(base, "capfs-checkout-*"), filepath.Join(base, "capfs-lazy-*"), filepath.Join(state, "capfs-lazy-*")} {
		if m, _ := filepath.Glob(pat); len(m) > 0 {
			t.Errorf("left behind: %v", m)
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && (strings.Contains(string(b), base) || strings.Contains(string(b), state)) {
		t.Errorf("a mount under %s or %s is left:\n%s", base, state, b)
	}
}

// TestRunLazySyncBack: a lazy run (the summary says so) creates, modifies,
// deletes, renames a directory, makes a symlink and a deep directory; all of it
// is synced back, nothing is left behind (no mount, no upper), and the files
// the command never touched were never read (nothing is copied up front).
func TestRunLazySyncBack(t *testing.T) {
	needLazy(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "a\n", "mod.txt": "old\n", "gone.txt": "bye\n",
		"dir/x.c": "x\n", "dir/sub/y.c": "y\n", "untouched/big.txt": strings.Repeat("u", 1<<16), `odd\name`: "o\n"})
	env, base := stateEnv(t)
	r := runCapfsEnv(t, root, env, "run", "--lazy", "--show", "-1", "--", "sh", "-c",
		"ls >/dev/null; ls >/dev/null; cat a.txt; echo new > new.txt; echo changed > mod.txt; rm gone.txt; mv dir renamed; mkdir -p made/deep; echo d > made/deep/f; ln -s a.txt link").want(t, 0)
	if r.stdout != "a\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "work tree: lazy") {
		t.Errorf("the summary does not say the run was lazy:\n%s", r.stderr)
	}
	// A name no path can hold is told once (Options.Unaddressable), though listed twice.
	if n := strings.Count(r.stderr, `project: skipped 1 name the capability cannot address (odd\\name: contains a backslash)`); n != 1 {
		t.Errorf("the unaddressable name is told %d times; want once:\n%s", n, r.stderr)
	}
	for p, want := range map[string]string{"new.txt": "new\n", "mod.txt": "changed\n", "renamed/x.c": "x\n", "renamed/sub/y.c": "y\n", "made/deep/f": "d\n", "a.txt": "a\n"} {
		if got := readFile(t, filepath.Join(root, p)); got != want {
			t.Errorf("%s = %q, want %q\n%s", p, got, want, r.stderr)
		}
	}
	for _, p := range []string{"gone.txt", "dir"} {
		if _, err := os.Lstat(filepath.Join(root, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was not deleted (%v)", p, err)
		}
	}
	if tg, err := os.Readlink(filepath.Join(root, "link")); err != nil || tg != "a.txt" {
		t.Errorf("link: %q, %v", tg, err)
	}
	for _, want := range []string{"A project/new.txt", "M project/mod.txt", "D project/gone.txt", "A project/renamed/", "D project/dir/"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("summary lacks %q:\n%s", want, r.stderr)
		}
	}
	for _, ev := range auditOf(t, r.stderr) {
		if strings.HasPrefix(ev.Path, "project/untouched/") && ev.Op == "read" {
			t.Errorf("a file the command never opened was read: %+v", ev)
		}
	}
	leftovers(t, env, base)
}

// TestRunLazyNoLazy: --no-lazy (and --lazy=false) check the work tree out, and
// the summary says so; --lazy with --no-lazy is a usage error.
func TestRunLazyNoLazy(t *testing.T) {
	needLazy(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "a\n"})
	env, base := stateEnv(t)
	for _, flag := range []string{"--no-lazy", "--lazy=false"} {
		r := runCapfsEnv(t, root, env, "run", flag, "--", "sh", "-c", "echo "+flag+" > a.txt").want(t, 0)
		if !strings.Contains(r.stderr, "work tree: checkout (copy; --no-lazy)") {
			t.Errorf("%s: the summary does not say checkout:\n%s", flag, r.stderr)
		}
		if got := readFile(t, filepath.Join(root, "a.txt")); got != flag+"\n" {
			t.Errorf("%s: a.txt = %q", flag, got)
		}
	}
	r := runCapfsEnv(t, root, append(env, envRunLazy+"=0"), "run", "--", "true").want(t, 0)
	if !strings.Contains(r.stderr, "work tree: checkout (copy; "+envRunLazy+"=0)") {
		t.Errorf("%s=0 did not check out:\n%s", envRunLazy, r.stderr)
	}
	runCapfsEnv(t, root, env, "run", "--lazy", "--no-lazy", "--", "true").want(t, exitUsage)
	leftovers(t, env, base)
}

// TestRunLazyRefused: inside the lazy mount a write the policy refuses fails at
// once (.envrc, .git/config: EROFS; a setuid bit: EACCES) while the rest of the command's
// work goes on and is synced; a change only the sync-back refuses (over
// --max-file-size) is refused and reported there (exit 3), the rest applied
// (--on-reject apply-rest), and the upper kept for capfs sync, which can
// discard it.
func TestRunLazyRefused(t *testing.T) {
	needLazy(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "a\n", ".git/config": "[core]\n", ".git/HEAD": "ref: refs/heads/main\n"})
	env, base := stateEnv(t)
	r := runCapfsEnv(t, root, env, "run", "--lazy", "--git", "keep", "--", "sh", "-c",
		"echo evil > .envrc || echo refused-envrc; echo evil >> .git/config || echo refused-git; echo ok > ok.txt; chmod 4755 ok.txt || echo refused-setuid").want(t, 0)
	for _, want := range []string{"refused-envrc", "refused-git", "refused-setuid"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("%s: the write succeeded inside:\nstdout %s\nstderr %s", want, r.stdout, r.stderr)
		}
	}
	if strings.Count(r.stderr, "Read-only file system") != 2 {
		t.Errorf("the policy's refusals are not EROFS inside, as a checkout's read-only binds are:\n%s", r.stderr)
	}
	if fi, err := os.Stat(filepath.Join(root, "ok.txt")); err != nil || fi.Mode()&fs.ModeSetuid != 0 {
		t.Errorf("ok.txt: %v, %v", fi, err)
	}
	if readFile(t, filepath.Join(root, ".git/config")) != "[core]\n" || readFile(t, filepath.Join(root, "ok.txt")) != "ok\n" {
		t.Errorf(".git/config %q, ok.txt %q", readFile(t, filepath.Join(root, ".git/config")), readFile(t, filepath.Join(root, "ok.txt")))
	}
	if _, err := os.Lstat(filepath.Join(root, ".envrc")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf(".envrc reached the host")
	}

	r = runCapfsEnv(t, root, env, "run", "--lazy", "--max-file-size", "10", "--", "sh", "-c",
		"head -c 100 /dev/zero > big.bin; echo small > small.txt").want(t, exitSyncBack)
	if readFile(t, filepath.Join(root, "small.txt")) != "small\n" {
		t.Errorf("small.txt was not applied:\n%s", r.stderr)
	}
	if _, err := os.Lstat(filepath.Join(root, "big.bin")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("big.bin reached the host over --max-file-size")
	}
	if !strings.Contains(r.stderr, "big.bin") || !strings.Contains(r.stderr, "max-file-size") {
		t.Errorf("the refusal is not reported:\n%s", r.stderr)
	}
	id := keptIDOf(t, r.stderr)
	if len(checkouts(t, base)) != 1 {
		t.Errorf("the upper is not kept under %s", base)
	}
	d := runCapfsEnv(t, root, env, "sync", "--diff", id).want(t, 0)
	if !strings.Contains(d.stdout, "big.bin") {
		t.Errorf("capfs sync --diff %s:\n%s%s", id, d.stdout, d.stderr)
	}
	runCapfsEnv(t, root, env, "sync", "--discard", id).want(t, 0)
	leftovers(t, env, base)
}

// TestRunLazySecretsHidden: the secrets the policy hides are absent from the
// lazy mount (not listed, not readable), and so is a .git whose index names
// one (git in a lazy run: run_git_test.go).
func TestRunLazySecretsHidden(t *testing.T) {
	needLazy(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "a\n", ".env": "SECRET=1\n", ".ssh/id_rsa": "KEY\n", "sub/server.pem": "PEM\n", ".git/HEAD": "ref: refs/heads/main\n"})
	gitIndexNaming(t, root, "sub/server.pem")
	// Links the project holds to the secrets: followed by the kernel, each
	// step decided where it lands.
	for link, target := range map[string]string{"k": ".ssh/id_rsa", "e": ".env", "s": ".ssh", "sub/up": ".."} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	env, base := stateEnv(t)
	r := runCapfsEnv(t, root, env, "run", "--lazy", "--", "sh", "-c",
		"ls -a . sub .git; cat .env .ssh/id_rsa sub/server.pem .git/HEAD; cat k e s/id_rsa sub/up/.env; ln -s .env e2; cat e2; true").want(t, 0)
	for _, bad := range []string{".env", ".ssh", "server.pem", "SECRET", "KEY", "PEM", "HEAD", "refs"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("%q shows in the lazy mount:\n%s", bad, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "a.txt") || !strings.Contains(r.stdout, ".git") {
		t.Errorf("listing:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "project/.git's contents") {
		t.Errorf("the hidden git history is not reported:\n%s", r.stderr)
	}
	leftovers(t, env, base)
}

// TestRunLazyReadOnly: beside a lazy work tree, a read-only mount is EROFS; a
// --rev run mounts the revision the same way (nothing written to the work
// tree) and its changes go to --out.
func TestRunLazyReadOnly(t *testing.T) {
	needLazy(t)
	t.Parallel()
	work, ro := t.TempDir(), t.TempDir()
	writeTree(t, work, map[string]string{"a.txt": "a\n"})
	writeTree(t, ro, map[string]string{"r.txt": "r\n"})
	env, base := stateEnv(t)
	r := runCapfsEnv(t, work, env, "-m", "p=physical:"+work, "-m", "ro=physical:"+ro+",ro", "run", "--lazy", "--work", "p", "--", "sh", "-c",
		"cat /capfs/ro/r.txt; echo x > /capfs/ro/r.txt; echo $?").want(t, 0)
	if !strings.Contains(r.stderr, "Read-only file system") || !strings.Contains(r.stdout, "r\n") {
		t.Errorf("the read-only mount is not EROFS:\nstdout %s\nstderr %s", r.stdout, r.stderr)
	}
	if readFile(t, filepath.Join(ro, "r.txt")) != "r\n" {
		t.Errorf("the read-only mount changed")
	}

	repo := gitRepo(t, map[string]string{"v.txt": "one\n"})
	writeTree(t, repo, map[string]string{"v.txt": "work tree\n"})
	out := filepath.Join(t.TempDir(), "out")
	r = runCapfsEnv(t, repo, env, "run", "--lazy", "--rev", "HEAD", "--out", out, "--", "sh", "-c", "cat v.txt > built.txt").want(t, 0)
	if got := readFile(t, filepath.Join(out, "built.txt")); got != "one\n" || !strings.Contains(r.stderr, "work tree: lazy") {
		t.Errorf("--rev lazy: out/built.txt = %q\n%s", got, r.stderr)
	}
	if _, err := os.Lstat(filepath.Join(repo, "built.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("--rev wrote into the work tree")
	}
	leftovers(t, env, base)
}

// TestRunLazyConflict: a file the host changes while the lazy sandbox changes
// it too is a conflict at sync-back: the host's edit stays, the conflict is
// reported (exit 3), the rest is applied, and the upper kept.
func TestRunLazyConflict(t *testing.T) {
	needLazy(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "base\n", "b.txt": "base\n"})
	env, base := stateEnv(t)
	cmd := exec.Command(capfsBinary(t), "run", "--lazy", "--on-reject", "apply-rest", "--", "sh", "-c", "echo sandbox > a.txt; echo sandbox > b.txt; echo > ready; read line; rm ready")
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), "XDG_STATE_HOME="+t.TempDir()), env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m, _ := filepath.Glob(filepath.Join(base, "capfs-checkout-*", "ready")); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the sandbox never got ready:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("host edit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in.Write([]byte("go\n"))
	in.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitSyncBack {
		t.Fatalf("exit %v, want %d\n%s", err, exitSyncBack, stderr.String())
	}
	if got := readFile(t, filepath.Join(root, "a.txt")); got != "host edit\n" {
		t.Errorf("the host's edit was overwritten: %q", got)
	}
	if got := readFile(t, filepath.Join(root, "b.txt")); got != "sandbox\n" {
		t.Errorf("b.txt = %q", got)
	}
	if !strings.Contains(stderr.String(), "a.txt") || !strings.Contains(stderr.String(), "changed in the source") {
		t.Errorf("the conflict is not reported:\n%s", stderr.String())
	}
	keptIDOf(t, stderr.String())
	if len(checkouts(t, base)) != 1 {
		t.Errorf("the upper holding the conflicting change is not kept")
	}
}

// TestRunLazyStartConstant: a lazy `capfs run -- true` makes as many audited
// Dir calls on a tree of 2,000 files as on one of 2 (nothing is walked).
func TestRunLazyStartConstant(t *testing.T) {
	needLazy(t)
	t.Parallel()
	calls := map[int]int{}
	for _, n := range []int{2, 2000} {
		root := t.TempDir()
		files := map[string]string{}
		for i := range n {
			files[fmt.Sprintf("d%d/f%d.c", i%20, i)] = "int x;\n"
		}
		writeTree(t, root, files)
		env, _ := stateEnv(t)
		r := runCapfsEnv(t, root, env, "run", "--lazy", "--no-cache", "--", "true").want(t, 0)
		for _, ev := range auditOf(t, r.stderr) {
			if strings.HasPrefix(ev.Path, "project") {
				calls[n]++
			}
		}
	}
	if calls[2] == 0 {
		t.Errorf("no audited call on the work tree: the count measures nothing")
	}
	if calls[2] != calls[2000] {
		t.Errorf("audited calls on the work tree: %d for 2 files, %d for 2,000; want the same", calls[2], calls[2000])
	}
}

// TestRunLazyKilledSwept: a lazy run killed with SIGKILL leaves a dead FUSE
// mount behind; the next lazy run under the same base detaches and removes it
// (and keeps the killed run's upper, which holds its changes).
func TestRunLazyKilledSwept(t *testing.T) {
	needLazy(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "a\n"})
	env, base := stateEnv(t)
	cmd := exec.Command(capfsBinary(t), "run", "--lazy", "--", "sh", "-c", "echo changed > a.txt; touch ready; sleep 60")
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), "XDG_STATE_HOME="+t.TempDir()), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m, _ := filepath.Glob(filepath.Join(base, "capfs-checkout-*", "ready")); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the sandbox never got ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	mnt := filepath.Join(strings.TrimPrefix(env[0], "XDG_STATE_HOME="), "capfs", "mnt")
	// The work tree's mount (the caches' is capfs-lazy-tools-*, swept alike).
	mps, _ := filepath.Glob(filepath.Join(mnt, "capfs-lazy-[0-9]*", "work"))
	if len(mps) != 1 {
		t.Fatalf("mount points after the kill: %v", mps)
	}
	stale := fuseexport.CheckStale(mps[0]) != nil
	runCapfsEnv(t, root, env, "run", "--lazy", "--", "true").want(t, 0)
	if m, _ := filepath.Glob(filepath.Join(mnt, "capfs-lazy-*")); len(m) != 0 {
		t.Errorf("the dead mount (stale: %v) was not swept: %v", stale, m)
	}
	leftovers(t, env, t.TempDir())
	if m, _ := filepath.Glob(filepath.Join(base, "capfs-checkout-*", "a.txt")); len(m) != 1 {
		t.Errorf("the killed run's upper with its change is gone: %v", m)
	}
	if readFile(t, filepath.Join(root, "a.txt")) != "a\n" {
		t.Errorf("the killed run's change reached the project")
	}
}

// TestRunLazyKeptThenSync: --dry-run applies and keeps nothing; --sync=never
// keeps the lazy run's upper as a checkout, and capfs sync ID applies it later
// (the upper reopened from its recorded bases) and removes it.
func TestRunLazyKeptThenSync(t *testing.T) {
	needLazy(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "old\n", "gone.txt": "g\n"})
	env, base := stateEnv(t)
	r := runCapfsEnv(t, root, env, "run", "--lazy", "--dry-run", "--", "sh", "-c", "echo x > d.txt").want(t, 0)
	if _, err := os.Lstat(filepath.Join(root, "d.txt")); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(r.stderr, "would apply (--dry-run)") {
		t.Errorf("--dry-run: %v\n%s", err, r.stderr)
	}
	leftovers(t, env, base)

	r = runCapfsEnv(t, root, env, "run", "--lazy", "--sync=never", "--", "sh", "-c", "echo new > a.txt; rm gone.txt; echo b > b.txt").want(t, 0)
	if readFile(t, filepath.Join(root, "a.txt")) != "old\n" {
		t.Errorf("--sync=never applied a.txt")
	}
	id := keptIDOf(t, r.stderr)
	runCapfsEnv(t, root, env, "sync", id).want(t, 0)
	if readFile(t, filepath.Join(root, "a.txt")) != "new\n" || readFile(t, filepath.Join(root, "b.txt")) != "b\n" {
		t.Errorf("capfs sync %s: a.txt %q, b.txt %q", id, readFile(t, filepath.Join(root, "a.txt")), readFile(t, filepath.Join(root, "b.txt")))
	}
	if _, err := os.Lstat(filepath.Join(root, "gone.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the deletion was not applied by capfs sync")
	}
	leftovers(t, env, base)
}

// TestRunLazyCAS: a CAS snapshot mounts as a lazy work tree the way a git
// revision does (issue 17): nothing is copied up front, the command reads the
// snapshot's files, its outputs go to --out, and the snapshot itself stays as
// it was (the same digest when saved again from a mount of it).
func TestRunLazyCAS(t *testing.T) {
	needLazy(t)
	t.Parallel()
	proj, store, out := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "out")
	writeTree(t, proj, map[string]string{"a.txt": "from the snapshot\n", "src/m.c": "int main(){return 0;}\n"})
	env, base := stateEnv(t)
	r := runCapfsEnv(t, proj, env, "--no-default-mounts", "-m", "p=physical:"+proj, "snapshot", "--store", store, "save", "v1", "p").want(t, 0)
	fields := strings.Fields(r.stdout)
	if len(fields) < 2 {
		t.Fatalf("snapshot save printed %q", r.stdout)
	}
	digest := fields[1]
	r = runCapfsEnv(t, proj, env, "--no-default-mounts", "-m", "w=cas:v1,store="+store, "run", "--lazy", "--work", "w", "--out", out, "--",
		"sh", "-c", "cat a.txt src/m.c > built.txt; echo x > a.txt 2>/dev/null; true").want(t, 0)
	if !strings.Contains(r.stderr, "work tree: lazy") {
		t.Errorf("not a lazy run:\n%s", r.stderr)
	}
	if got := readFile(t, filepath.Join(out, "built.txt")); got != "from the snapshot\nint main(){return 0;}\n" {
		t.Errorf("out/built.txt = %q", got)
	}
	r = runCapfsEnv(t, proj, env, "--no-default-mounts", "-m", "s=cas:v1,store="+store, "-m", "o=memory:", "snapshot", "--store", store, "save", "again", "s").want(t, 0)
	if f := strings.Fields(r.stdout); len(f) < 2 || f[1] != digest {
		t.Errorf("the snapshot changed: saved again as %q, was %s", r.stdout, digest)
	}
	leftovers(t, env, base)
}
