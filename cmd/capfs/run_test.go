//go:build linux

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	sandboxOnce   sync.Once
	sandboxReason string
)

// needSandbox skips the test when bubblewrap cannot run here (not installed, or
// user namespaces refused), saying why.
func needSandbox(t *testing.T) {
	t.Helper()
	sandboxOnce.Do(func() {
		if _, err := exec.LookPath("bwrap"); err != nil {
			sandboxReason = "bwrap (bubblewrap) is not installed"
			return
		}
		dir := t.TempDir()
		r := runCapfs(t, dir, "-m", "p=physical:"+dir, "run", "--work", "p", "--", "true")
		if r.code != 0 {
			sandboxReason = fmt.Sprintf("bubblewrap cannot run here (capfs run -- true exited %d: %s)", r.code, strings.TrimSpace(r.stderr))
		}
	})
	if sandboxReason != "" {
		t.Skip(sandboxReason)
	}
}

// snapshot records every path under root with its type, mode and contents, to
// check that a refused sync-back left the source untouched.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		v := info.Mode().String()
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			v += " -> " + target
		}
		snap[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func sameSnapshot(t *testing.T, before, after map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range before {
		if after[k] != v {
			diffs = append(diffs, fmt.Sprintf("%s: %q -> %q", k, v, after[k]))
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: new %q", k, v))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("the source changed:\n%s", strings.Join(diffs, "\n"))
	}
}

// TestRunBuildSyncsBack runs a real make in the sandbox (no flags: the current
// directory is the project) and checks that its outputs, edits and deletions come
// back, with the summary and the audit trail.
func TestRunBuildSyncsBack(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"Makefile": "all:\n\tmkdir -p out\n\techo built > out/result.txt\n\techo changed > a.txt\n\trm b.txt\n\tpwd > out/pwd.txt\n",
		"a.txt":    "original\n",
		"b.txt":    "to delete\n",
		".env":     "SECRET=1\n",
	})
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	r := runCapfs(t, root, "--audit", logPath, "run", "--no-lazy", "--", "make").want(t, 0)
	for name, want := range map[string]string{
		"out/result.txt": "built\n",
		"out/pwd.txt":    "/capfs/project\n",
		"a.txt":          "changed\n",
		".env":           "SECRET=1\n",
	} {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "b.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("b.txt was not deleted: %v", err)
	}
	for _, want := range []string{
		"exited with status 0 (sandboxed; wrappers: bubblewrap; setup ",
		"applied in project: 3 added, 1 modified, 1 deleted (29 B written)\n",
		"  A project/out/\n", "  A project/out/result.txt  6 B\n", "  M project/a.txt  8 B\n", "  D project/b.txt\n",
		"not in the sandbox: project/.env (fs_permission_denied)",
		"audit log: " + logPath + "\n",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stdout, "capfs:") {
		t.Errorf("capfs's own messages went to stdout:\n%s", r.stdout)
	}
	var sawRun, sawWrite bool
	for _, e := range readAudit(t, logPath) {
		if e.Op == "run" && strings.Contains(e.Rule, "sandboxed") {
			sawRun = true
		}
		if e.Path == "project/out/result.txt" && e.Subject == "capfs/run" {
			sawWrite = true
		}
		noHostPath(t, e.Path+e.Dest+e.GuestPath, root)
	}
	if !sawRun || !sawWrite {
		t.Errorf("audit log lacks the run (%v) or the synced write (%v)", sawRun, sawWrite)
	}
}

// TestRunExitStatus checks that the command's status is capfs's.
func TestRunExitStatus(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"f": "x"})
	r := runCapfs(t, root, "run", "--", "sh", "-c", "echo partial > out.txt; echo to-stdout; exit 7").want(t, 7)
	if r.stdout != "to-stdout\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	// The changes of a failed command are not applied (--sync=on-success, the
	// default) but kept, with the commands to apply or drop them.
	if _, err := os.Lstat(filepath.Join(root, "out.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("out.txt was synced back after a failure: %v", err)
	}
	for _, want := range []string{"not applied: sh exited with status 7 (--sync=on-success) in project: 1 added", "capfs sync --discard "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	// --sync=always applies them whatever the status.
	runCapfs(t, root, "run", "--sync=always", "--", "sh", "-c", "echo partial > out.txt; exit 7").want(t, 7)
	if b, err := os.ReadFile(filepath.Join(root, "out.txt")); err != nil || string(b) != "partial\n" {
		t.Errorf("out.txt = %q, %v", b, err)
	}
	runCapfs(t, root, "run", "--", "false").want(t, 1)
	// A missing command exits 127, one that cannot be executed 126, as in a shell.
	r = runCapfs(t, root, "run", "--", "no-such-program-xyz").want(t, exitNotFound)
	if !strings.Contains(r.stderr, "no-such-program-xyz: command not found") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	writeTree(t, root, map[string]string{"notexec.sh": "echo hi\n"})
	r = runCapfs(t, root, "run", "--", "./notexec.sh").want(t, exitNotExecutable)
	if !strings.Contains(r.stderr, "./notexec.sh: permission denied") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	runCapfs(t, root, "run", "--", "./missing.sh").want(t, exitNotFound)
	runCapfs(t, root, "run", "--", "/usr").want(t, exitNotExecutable)
}

// TestRunWriteOutside checks that the sandboxed command cannot write outside its
// checkout: not to a read-only grant, not to the system, not beside the project.
func TestRunWriteOutside(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	top := t.TempDir()
	proj, other := filepath.Join(top, "proj"), filepath.Join(top, "other")
	writeTree(t, proj, map[string]string{"f.txt": "f\n"})
	writeTree(t, other, map[string]string{"lib.txt": "library\n"})
	before := snapshot(t, top)
	script := `
		cat /capfs/other/lib.txt || exit 10
		echo x > /capfs/other/evil && exit 11
		echo x > /capfs/other/lib.txt && exit 12
		echo x > /usr/evil && exit 13
		echo x > /etc/evil && exit 14
		echo x > ../escape
		echo x > /capfs/escape
		exit 0`
	r := runCapfs(t, top, "-m", "p=physical:"+proj, "-m", "other=physical:"+other, "run", "--work", "p", "--", "sh", "-c", script).want(t, 0)
	if !strings.Contains(r.stdout, "library") {
		t.Errorf("the read-only grant was not readable: %q", r.stdout)
	}
	sameSnapshot(t, before, snapshot(t, top))
}

// TestRunRefusals checks that sync-back refuses what must not reach the source,
// leaving it untouched (a legitimate change made in the same run included).
func TestRunRefusals(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	for _, tc := range []struct {
		name, script, path, code string
	}{
		{"escaping symlink", "ln -s ../../../etc/passwd leak", "project/leak", "path_outside_sandbox"},
		{"absolute symlink", "ln -s /etc/passwd abs", "project/abs", "path_outside_sandbox"},
		{"fifo", "mkfifo pipe", "project/pipe", "not_regular_file"},
		// The existing .git is read-only inside (EROFS, TestRunMirrorsPolicy): a
		// new repository's hooks are refused at sync-back.
		{"git hook", "mkdir -p sub/.git/hooks && printf '#!/bin/sh\\necho pwned\\n' > sub/.git/hooks/pre-commit", "project/sub/.git/hooks/pre-commit", "fs_permission_denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			writeTree(t, root, map[string]string{"a.txt": "a\n", ".git/HEAD": "ref: refs/heads/main\n"})
			before := snapshot(t, root)
			r := runCapfs(t, root, "run", "--no-lazy", "--on-reject", "abort", "--", "sh", "-c", "echo legit > a.txt && "+tc.script).want(t, exitSyncBack)
			if !strings.Contains(r.stderr, "capfs: refused: ") || !strings.Contains(r.stderr, tc.path) || !strings.Contains(r.stderr, "("+tc.code+")") {
				t.Errorf("stderr does not name the refusal of %s (%s):\n%s", tc.path, tc.code, r.stderr)
			}
			if !strings.Contains(r.stderr, "applied in project: nothing;") {
				t.Errorf("stderr does not say nothing was applied:\n%s", r.stderr)
			}
			noHostPath(t, r.stderr, root)
			sameSnapshot(t, before, snapshot(t, root))
		})
	}
}

// TestRunSetuidStripped checks that a setuid file made in the sandbox comes back
// without its setuid bit (sync-back strips setuid, setgid and sticky).
func TestRunSetuidStripped(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	r := runCapfs(t, root, "run", "--no-lazy", "--", "sh", "-c", "printf '#!/bin/sh\\n' > su && chmod 6755 su && ls -l su").want(t, 0)
	if !strings.Contains(r.stdout, "rws") {
		t.Logf("the sandbox could not set the setuid bit itself: %s", r.stdout)
	}
	st, err := os.Lstat(filepath.Join(root, "su"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		t.Errorf("su came back with mode %v", st.Mode())
	}
}

// TestRunNoNetwork checks that the sandbox has no network: not even the host's
// loopback is reachable, and only a loopback interface of its own exists.
func TestRunNoNetwork(t *testing.T) {
	needSandbox(t)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	root := t.TempDir()
	script := fmt.Sprintf(`cat /proc/net/dev; if exec 3<>/dev/tcp/127.0.0.1/%d; then exit 0; else exit 9; fi`, port)
	r := runCapfs(t, root, "run", "--", "bash", "-c", script).want(t, 9)
	var ifaces []string
	for _, line := range strings.Split(r.stdout, "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok && !strings.Contains(name, "|") {
			ifaces = append(ifaces, strings.TrimSpace(name))
		}
	}
	if len(ifaces) != 1 || ifaces[0] != "lo" {
		t.Errorf("interfaces inside the sandbox: %q", ifaces)
	}
}

// TestRunConflict edits the source while the sandboxed command runs (a file
// handshake, no timing): the same file changed on both sides is a conflict.
func TestRunConflict(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	for _, tc := range []struct {
		mode     string
		code     int
		want     string // a.txt afterwards
		stderrOK string
	}{
		{"fail", exitSyncBack, "theirs\n", "conflict: project/a.txt changed in the source and in the sandbox"},
		{"theirs", 0, "theirs\n", "kept the source's version of project/a.txt"},
		{"ours", 0, "ours\n", "  M project/a.txt  5 B\n"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			root, base := t.TempDir(), t.TempDir()
			writeTree(t, root, map[string]string{"a.txt": "original\n", "b.txt": "b\n"})
			// The command changes a.txt and b.txt, says so (ready), and waits for the
			// test's go-ahead (go), which the test drops into the checkout (a
			// checkout: a lazy run's FUSE view need not see a file put into its
			// upper directory behind its back, and the run then never ends).
			script := `echo ours > a.txt; echo b2 > b.txt; touch ready; while [ ! -e go ]; do sleep 0.05; done; rm -f ready go`
			cmd := exec.Command(capfsBinary(t), "run", "--no-lazy", "--conflict", tc.mode, "--", "sh", "-c", script)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir(), "CAPFS_TMPDIR="+base)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var checkout string
			for checkout == "" {
				select {
				case err := <-done:
					t.Fatalf("capfs exited before the handshake: %v\n%s", err, stderr.String())
				case <-time.After(20 * time.Millisecond):
				}
				if m, _ := filepath.Glob(filepath.Join(base, "*", "ready")); len(m) == 1 {
					checkout = filepath.Dir(m[0])
				}
			}
			if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("theirs\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(checkout, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			err := <-done
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.stderrOK) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderrOK, stderr.String())
			}
			got, _ := os.ReadFile(filepath.Join(root, "a.txt"))
			if string(got) != tc.want {
				t.Errorf("a.txt = %q, want %q", got, tc.want)
			}
			gotB, _ := os.ReadFile(filepath.Join(root, "b.txt"))
			wantB := "b2\n" // a conflict leaves the rest applied (--on-reject apply-rest)
			if string(gotB) != wantB {
				t.Errorf("b.txt = %q, want %q", gotB, wantB)
			}
			// A change not applied keeps the checkout, and says where.
			_, err = os.Stat(checkout)
			if tc.mode == "ours" {
				if !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("the checkout was not removed: %v", err)
				}
			} else if err != nil || !strings.Contains(stderr.String(), "the checkout is kept at "+checkout+" (id ") {
				t.Errorf("the checkout was not kept (%v), or not reported:\n%s", err, stderr.String())
			}
		})
	}
}

// TestRunOnReject checks --on-reject: abort applies nothing, apply-rest
// applies what does not depend on a refused change; either way the refused
// change is listed and the checkout holding it kept (--keep-checkout keeps it
// even when everything was applied).
func TestRunOnReject(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	script := "echo legit > a.txt && mkdir -p gen && echo out > gen/out && echo evil > .bashrc"
	for _, mode := range []string{"abort", "apply-rest"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			root, base := t.TempDir(), t.TempDir()
			writeTree(t, root, map[string]string{"a.txt": "a\n"})
			r := runCapfsEnv(t, root, []string{"CAPFS_TMPDIR=" + base}, "run", "--no-lazy", "--on-reject", mode, "--", "sh", "-c", script).want(t, exitSyncBack)
			if !strings.Contains(r.stderr, "capfs: refused: added project/.bashrc") {
				t.Errorf("the refusal is not listed:\n%s", r.stderr)
			}
			kept, _ := filepath.Glob(filepath.Join(base, "capfs-checkout-*"))
			if len(kept) != 1 || !strings.Contains(r.stderr, "kept at "+kept[0]+" (id ") {
				t.Fatalf("checkouts kept %v:\n%s", kept, r.stderr)
			}
			if b, err := os.ReadFile(filepath.Join(kept[0], ".bashrc")); err != nil || string(b) != "evil\n" {
				t.Errorf("the kept checkout lacks the refused file: %q %v", b, err)
			}
			if _, err := os.Lstat(filepath.Join(root, ".bashrc")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf(".bashrc reached the source: %v", err)
			}
			a, _ := os.ReadFile(filepath.Join(root, "a.txt"))
			out, _ := os.ReadFile(filepath.Join(root, "gen/out"))
			if mode == "abort" {
				if string(a) != "a\n" || out != nil || !strings.Contains(r.stderr, "applied in project: nothing;") ||
					!strings.Contains(r.stderr, "not applied: modified project/a.txt: not applied: other changes were refused") {
					t.Errorf("abort applied something (a.txt %q, gen/out %q):\n%s", a, out, r.stderr)
				}
				return
			}
			if string(a) != "legit\n" || string(out) != "out\n" || !strings.Contains(r.stderr, "applied in project: 2 added, 1 modified") {
				t.Errorf("apply-rest: a.txt %q, gen/out %q:\n%s", a, out, r.stderr)
			}
		})
	}
	t.Run("keep-checkout", func(t *testing.T) {
		t.Parallel()
		root, base := t.TempDir(), t.TempDir()
		writeTree(t, root, map[string]string{"a.txt": "a\n"})
		r := runCapfsEnv(t, root, []string{"CAPFS_TMPDIR=" + base}, "run", "--keep-checkout", "--", "sh", "-c", "echo b > a.txt").want(t, 0)
		kept, _ := filepath.Glob(filepath.Join(base, "capfs-checkout-*"))
		if len(kept) != 1 || !strings.Contains(r.stderr, "the checkout is kept at "+kept[0]+" (id ") {
			t.Fatalf("checkouts kept %v:\n%s", kept, r.stderr)
		}
		if a, _ := os.ReadFile(filepath.Join(root, "a.txt")); string(a) != "b\n" {
			t.Errorf("a.txt %q", a)
		}
	})
}

// TestRunUsage checks run's own usage errors and the refusal to run without a
// sandbox.
func TestRunUsage(t *testing.T) {
	t.Parallel()
	root, full := t.TempDir(), t.TempDir()
	writeTree(t, full, map[string]string{"x": "x"})
	ro := "r=physical:" + root + ",ro"
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"run"}, "requires at least 1 arg"},
		{[]string{"run", "--conflict", "maybe", "--", "true"}, "--conflict maybe"},
		{[]string{"run", "--on-reject", "maybe", "--", "true"}, "--on-reject maybe"},
		{[]string{"run", "--env", "NOEQUALS", "--", "true"}, "--env NOEQUALS"},
		{[]string{"-m", ro, "run", "--work", "elsewhere", "--", "true"}, "not inside any mount"},
		{[]string{"run", "--sync", "maybe", "--", "true"}, "--sync maybe"},
		{[]string{"run", "--tty", "maybe", "--", "true"}, "--tty maybe"},
		{[]string{"run", "--max-files", "-1", "--", "true"}, "--max-files -1"},
		{[]string{"run", "--max-bytes", "lots", "--", "true"}, "--max-bytes lots"},
		{[]string{"run", "--git-scan-budget", "0", "--", "true"}, "--git-scan-budget 0"},
		{[]string{"run", "--out", root, "--", "true"}, "--out is for --rev"},
		{[]string{"-m", ro, "run", "--work", "r", "--out", full, "--", "true"}, "not empty"},
		{[]string{"--no-default-mounts", "run", "--", "true"}, "no mounts"},
		{[]string{"run", "--work", "../x", "--", "true"}, "--work ../x"},
	} {
		r := runCapfs(t, root, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("capfs %q: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.stderr, tc.msg)
		}
	}
	// A missing work path inside a mount is an operation failure.
	r := runCapfs(t, root, "run", "--work", "project/missing", "--", "true").want(t, exitFailed)
	if !strings.Contains(r.stderr, "project/missing") || !strings.Contains(r.stderr, "(not_found)") {
		t.Errorf("stderr %q", r.stderr)
	}

	// Without bubblewrap in PATH, run refuses (125) unless unsandboxed runs are allowed.
	writeTree(t, root, map[string]string{"f.txt": "f\n"})
	noBwrap := []string{"PATH=" + t.TempDir()}
	r = runCapfsEnv(t, root, noBwrap, "run", "--", "true").want(t, exitRunFailed)
	if !strings.Contains(r.stderr, "--allow-unsandboxed") {
		t.Errorf("stderr does not suggest --allow-unsandboxed:\n%s", r.stderr)
	}
	r = runCapfsEnv(t, root, noBwrap, "run", "--allow-unsandboxed", "--", "sh", "-c", "cat f.txt && echo new > g.txt").want(t, 0)
	if !strings.Contains(r.stderr, "UNSANDBOXED") || r.stdout != "f\n" {
		t.Errorf("unsandboxed run: stdout %q, stderr:\n%s", r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(root, "g.txt")); err != nil || string(b) != "new\n" {
		t.Errorf("g.txt = %q, %v", b, err)
	}
}

// TestRunGrant shows a git revision read-only inside the sandbox with --grant.
func TestRunGrant(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := gitRepo(t, map[string]string{"a.txt": "committed\n"})
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `cat /capfs/ref/head/a.txt a.txt; echo x > /capfs/ref/head/a.txt && exit 5; exit 0`
	r := runCapfs(t, root, "run", "--grant", "ref/head", "--", "sh", "-c", script).want(t, 0)
	if r.stdout != "committed\nedited\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
}

// TestRunEnv checks the command's environment: the minimal one plus --env, never
// capfs's own.
func TestRunEnv(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	r := runCapfsEnv(t, root, []string{"CAPFS_TEST_LEAK=leaked"}, "run", "--env", "FOO=bar baz", "--",
		"sh", "-c", `echo "$FOO|$HOME|${CAPFS_TEST_LEAK:-unset}|$(id -u)"`).want(t, 0)
	if r.stdout != "bar baz|/tmp|unset|1000\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
}

// TestRunInterrupted checks that an interrupted run kills the command, syncs
// nothing back and exits 130 (a file handshake tells the test the command runs).
func TestRunInterrupted(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root, base := t.TempDir(), t.TempDir()
	cmd := exec.Command(capfsBinary(t), "run", "--", "sh", "-c", "echo new > out.txt; touch ready; while :; do sleep 0.05; done")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir(), "CAPFS_TMPDIR="+base)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		if m, _ := filepath.Glob(filepath.Join(base, "*", "ready")); len(m) == 1 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("capfs exited early: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := <-done
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit: %v, want %d\n%s", err, exitInterrupted, stderr.String())
	}
	if _, err := os.Lstat(filepath.Join(root, "out.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("out.txt was synced back after an interrupt: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(base, "*")); len(m) != 0 {
		t.Errorf("checkouts left behind: %q", m)
	}
}

// TestRunWorkSubdir checks out a subdirectory of a mount: the command starts there,
// its changes land there, and the default audit log is under $XDG_STATE_HOME.
func TestRunWorkSubdir(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	proj, state := t.TempDir(), t.TempDir()
	writeTree(t, proj, map[string]string{"sub/a.txt": "a\n", "top.txt": "top\n"})
	r := runCapfsEnv(t, proj, []string{"XDG_STATE_HOME=" + state}, "-m", "p=physical:"+proj, "run", "--work", "p/sub", "--",
		"sh", "-c", "pwd; ls; echo x > new.txt").want(t, 0)
	if r.stdout != "/capfs/p/sub\na.txt\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	if b, err := os.ReadFile(filepath.Join(proj, "sub", "new.txt")); err != nil || string(b) != "x\n" {
		t.Errorf("sub/new.txt = %q, %v", b, err)
	}
	logPath := filepath.Join(state, "capfs", "audit.jsonl")
	if !strings.Contains(r.stderr, "  A p/sub/new.txt  2 B\n") || !strings.Contains(r.stderr, "audit log: "+logPath+"\n") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	if len(readAudit(t, logPath)) == 0 {
		t.Error("the default audit log is empty")
	}
}

// TestRunFinishesInterruptedSync leaves a committed sync journal behind, as a
// capfs killed while applying would (a change to a.txt not yet applied, its
// new contents in a checkout), and checks that the next run in that project
// finishes it first: a.txt gets the new contents and the checkout's time, and
// the journal and the old checkout are removed.
func TestRunFinishesInterruptedSync(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root, state, base := t.TempDir(), t.TempDir(), t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "old\n"})
	checkout := filepath.Join(t.TempDir(), "capfs-checkout-1")
	if err := os.Mkdir(checkout, 0o700); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)
	if err := os.WriteFile(filepath.Join(checkout, "a.txt"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(checkout, "a.txt"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	entry := func(data string, tm time.Time) map[string]any {
		sum := sha256.Sum256([]byte(data))
		return map[string]any{"Type": 0, "Size": len(data), "Mode": 0o644, "ModTime": tm, "Digest": hex.EncodeToString(sum[:])}
	}
	var journal bytes.Buffer
	enc := json.NewEncoder(&journal)
	for _, rec := range []any{
		map[string]any{"capfs_sync_journal": 1, "label": "physical:" + root + "//.", "checkout": checkout, "created": time.Now(), "steps": 1, "ops": 1},
		map[string]any{"step": map[string]any{"kind": "modified", "path": "a.txt", "old": entry("old\n", time.Now()), "new": entry("new\n", mtime), "perm": 0o644}},
		map[string]any{"op": []any{0, "create"}},
		map[string]any{"commit": 1},
	} {
		if err := enc.Encode(rec); err != nil {
			t.Fatal(err)
		}
	}
	jdir := filepath.Join(state, "capfs", "journal")
	if err := os.MkdirAll(jdir, 0o700); err != nil {
		t.Fatal(err)
	}
	jpath := filepath.Join(jdir, "1-1.journal")
	if err := os.WriteFile(jpath, journal.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCapfsEnv(t, root, []string{"XDG_STATE_HOME=" + state, "CAPFS_TMPDIR=" + base}, "run", "--", "true").want(t, 0)
	for _, want := range []string{"capfs: run: finishing the sync-back into project interrupted at ", "  M project/a.txt  4 B\n"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	fi, err := os.Stat(filepath.Join(root, "a.txt"))
	if b, _ := os.ReadFile(filepath.Join(root, "a.txt")); err != nil || string(b) != "new\n" || !fi.ModTime().Equal(mtime) {
		t.Errorf("a.txt %q (%v), mtime %v", b, err, fi.ModTime())
	}
	for _, p := range []string{jpath, checkout} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s not removed: %v", p, err)
		}
	}
}

// TestRunMakeConverges runs `capfs run -- make` twice on a small C project
// whose outputs sort before their inputs: the second run has nothing to do,
// because sync-back gave the project the times the sandbox's make left.
func TestRunMakeConverges(t *testing.T) {
	needSandbox(t)
	for _, tool := range []string{"make", "cc", "ar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found (make sysdeps installs it)", tool)
		}
	}
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"Makefile": "app: main.o libx.a\n\tcc -o app main.o libx.a\nlibx.a: x1.o x2.o\n\tar rcs libx.a x1.o x2.o\n%.o: %.c\n\tcc -c -o $@ $<\n",
		"x1.c":     "int x1(void) { return 1; }\n",
		"x2.c":     "int x2(void) { return 2; }\n",
		"main.c":   "int x1(void); int x2(void);\nint main(void) { return x1() + x2() - 3; }\n",
	})
	r := runCapfs(t, root, "run", "--", "make").want(t, 0)
	if !strings.Contains(r.stderr, "applied in project: 5 added") {
		t.Fatalf("first run:\n%s\n%s", r.stdout, r.stderr)
	}
	before := snapshot(t, root)
	times := map[string]time.Time{}
	for name := range before {
		fi, err := os.Lstat(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		times[name] = fi.ModTime()
	}
	r = runCapfs(t, root, "run", "--", "make").want(t, 0)
	if !strings.Contains(r.stdout, "is up to date") || !strings.Contains(r.stderr, "capfs: run: no changes in project\n") {
		t.Fatalf("second run did something:\n%s\n%s", r.stdout, r.stderr)
	}
	sameSnapshot(t, before, snapshot(t, root))
	for name, tm := range times {
		if fi, err := os.Lstat(filepath.Join(root, name)); err != nil || !fi.ModTime().Equal(tm) {
			t.Errorf("%s: time changed by the second run", name)
		}
	}
}
