//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/vfs"
)

// fakeBwrap writes an executable script standing in for bwrap: it appends a line
// to a count file at every call, prints msg on stderr and exits with status.
func fakeBwrap(t *testing.T, msg string, status int) (bin, count string) {
	t.Helper()
	d := t.TempDir()
	bin, count = filepath.Join(d, "bwrap"), filepath.Join(d, "calls")
	script := "#!/bin/sh\necho call >> '" + count + "'\necho '" + msg + "' >&2\nexit " + strconv.Itoa(status) + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, count
}

func calls(t *testing.T, count string) int {
	t.Helper()
	b, err := os.ReadFile(count)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "call\n")
}

const noNamespaces = "bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces."

func TestProbeFailureRefusesRun(t *testing.T) {
	bin, count := fakeBwrap(t, noNamespaces, 1)
	ring := audit.NewRing(8)
	r := &Runner{Wrappers: []Wrapper{Bubblewrap(BubblewrapOptions{Path: bin})}, Audit: ring}
	work := t.TempDir()
	l := sh("echo ran > ran.txt", Mount{Source: work, Target: "/work", Writable: true})
	l.Subject = "builder"
	res, err := r.Run(context.Background(), l)
	if res != nil || err == nil {
		t.Fatalf("Run = %+v, %v; want a refusal", res, err)
	}
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errors.ErrUnsupported) || vfs.CodeOf(err) != vfs.CodeNotSupported {
		t.Fatalf("error %v: want ErrUnavailable with code not_supported", err)
	}
	if !strings.Contains(err.Error(), "No permissions to create new namespace") {
		t.Fatalf("error %q does not carry bwrap's complaint", err)
	}
	if _, err := os.Lstat(filepath.Join(work, "ran.txt")); err == nil {
		t.Fatal("the command ran although the sandbox is unavailable")
	}
	if n := calls(t, count); n != 1 {
		t.Fatalf("fake bwrap called %d times, want once (the probe)", n)
	}
	evs := ring.Events()
	if len(evs) != 2 {
		t.Fatalf("events %+v, want a probe and a run event", evs)
	}
	if p := evs[0]; p.Op != "sandbox_probe" || p.Outcome != audit.Failed || p.Rule != "sandbox_required" || p.Subject != "builder" {
		t.Fatalf("probe event %+v", p)
	}
	if e := evs[1]; e.Op != "run" || e.Outcome != audit.Denied || e.Code != "not_supported" || e.Rule != "sandbox_required" ||
		e.RequestID != evs[0].RequestID {
		t.Fatalf("run event %+v", e)
	}
	// A failed probe is not remembered: the next run probes again.
	if _, err := r.Run(context.Background(), sh("true")); err == nil {
		t.Fatal("second run was not refused")
	}
	if n := calls(t, count); n != 2 {
		t.Fatalf("fake bwrap called %d times, want 2", n)
	}
}

func TestProbeMissingBinary(t *testing.T) {
	w := Bubblewrap(BubblewrapOptions{Path: filepath.Join(t.TempDir(), "no-bwrap")})
	err := w.Probe(context.Background())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "not installed") {
		t.Fatalf("Probe = %v, want unavailable: not installed", err)
	}
	if _, err := wrapNow(w, sh("true")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Wrap without a binary = %v", err)
	}
}

func TestProbeSuccessRemembered(t *testing.T) {
	bin, count := fakeBwrap(t, "", 0)
	w := Bubblewrap(BubblewrapOptions{Path: bin})
	for range 3 {
		if err := w.Probe(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := calls(t, count); n != 1 {
		t.Fatalf("bwrap ran %d times for 3 probes, want 1", n)
	}
}

func TestUnsandboxedAllowedIsAudited(t *testing.T) {
	bin, _ := fakeBwrap(t, noNamespaces, 1)
	ring := audit.NewRing(8)
	rec := &recorder{name: "rec"}
	r := &Runner{
		Wrappers:         []Wrapper{Bubblewrap(BubblewrapOptions{Path: bin}), rec},
		AllowUnsandboxed: true,
		Audit:            ring,
	}
	work, sub := t.TempDir(), "pkg"
	if err := os.Mkdir(filepath.Join(work, sub), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CAPFS_HOST_SECRET", "s3cret")
	l := sh(`pwd -P; echo "home=$HOME secret=$CAPFS_HOST_SECRET rec=$WRAPPED_BY_REC"; echo ran > ran.txt`,
		Mount{Source: work, Target: "/work", Writable: true})
	l.Dir = "/work/" + sub
	res, out, _ := runOut(t, r, l)
	if res.Sandboxed || !slices.Equal(res.Wrappers, []string{"rec"}) || res.ExitCode != 0 {
		t.Fatalf("result %+v, want unsandboxed, wrappers [rec]", res)
	}
	real, _ := filepath.EvalSymlinks(filepath.Join(work, sub))
	if want := real + "\nhome=/tmp secret= rec=1\n"; out != want {
		t.Fatalf("output %q, want %q", out, want)
	}
	if _, err := os.Stat(filepath.Join(work, sub, "ran.txt")); err != nil {
		t.Fatalf("the unsandboxed command did not run in the mapped directory: %v", err)
	}
	evs := ring.Events()
	if len(evs) != 2 || evs[0].Op != "sandbox_probe" || evs[0].Rule != "allow_unsandboxed" || evs[0].Outcome != audit.Failed {
		t.Fatalf("events %+v, want the failed probe first", evs)
	}
	if e := evs[1]; e.Op != "run" || e.Outcome != audit.OK || e.Rule != "unsandboxed wrappers=rec" || e.Dest != "/work/pkg" {
		t.Fatalf("run event %+v", e)
	}
}

func TestNoSandboxWrapperRefused(t *testing.T) {
	r := &Runner{Wrappers: []Wrapper{&recorder{name: "rec"}}}
	_, err := r.Run(context.Background(), sh("true"))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Run without a sandbox = %v, want ErrUnavailable", err)
	}
	if err := r.Probe(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Probe without a sandbox = %v", err)
	}
	r.AllowUnsandboxed = true
	res, out, _ := runOut(t, r, sh("echo ok"))
	if out != "ok\n" || res.Sandboxed {
		t.Fatalf("allowed unsandboxed run: %q %+v", out, res)
	}
}

func TestUnsandboxedStartFailure(t *testing.T) {
	r := &Runner{AllowUnsandboxed: true}
	for _, p := range []string{"capfs-no-such-command", "/nonexistent/capfs-prog"} {
		res, err := r.Run(context.Background(), &Launch{Path: p})
		if res != nil || vfs.CodeOf(err) != vfs.CodeNotFound {
			t.Fatalf("Run(%s) = %+v, %v; want not_found and no result", p, res, err)
		}
	}
	// A working directory in no grant is refused rather than guessed.
	_, err := r.Run(context.Background(), &Launch{Path: "true", Dir: "/elsewhere"})
	if vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Fatalf("Run with an unmapped dir = %v", err)
	}
}

func TestUnsandboxedNewSession(t *testing.T) {
	_, out, _ := runOut(t, &Runner{AllowUnsandboxed: true}, sh(`set -- $(cat /proc/$$/stat); echo "$1 $5 $6"`))
	f := strings.Fields(out)
	if len(f) != 3 || f[0] != f[1] || f[0] != f[2] {
		t.Fatalf("pid, pgrp, session = %q: want the command to lead its own session", out)
	}
}

func TestUnsandboxedFileMountDir(t *testing.T) {
	work := t.TempDir()
	f := openPath(t, work)
	r := &Runner{AllowUnsandboxed: true}
	_, out, _ := runOut(t, r, sh("pwd -P", Mount{File: f, Target: "/w", Writable: true}))
	real, _ := filepath.EvalSymlinks(work)
	if out != real+"\n" {
		t.Fatalf("pwd %q, want %q", out, real)
	}
}

func TestUnsandboxedCancelKillsGroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	defer pr.Close()
	marker := "100.1" + strconv.Itoa(os.Getpid())
	// The shell's background child is in the same process group: cancel kills both.
	l := sh("sleep " + marker + " & echo started; wait")
	l.Stdout = pw
	done := make(chan error, 1)
	go func() {
		_, err := (&Runner{AllowUnsandboxed: true}).Run(ctx, l)
		pw.Close()
		done <- err
	}()
	if line, err := bufio.NewReader(pr).ReadString('\n'); err != nil || line != "started\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-done; vfs.CodeOf(err) != vfs.CodeCanceled {
		t.Fatalf("Run after cancel = %v", err)
	}
	waitGone(t, marker)
}

func TestWrapValidatesMounts(t *testing.T) {
	bin, _ := fakeBwrap(t, "", 0)
	w := Bubblewrap(BubblewrapOptions{Path: bin, GoRoot: "/opt/go"})
	src := t.TempDir()
	m := func(target string) Mount { return Mount{Source: src, Target: target} }
	for _, c := range []struct {
		name   string
		mounts []Mount
	}{
		{"relative", []Mount{m("work")}},
		{"unclean", []Mount{m("/work/../etc")}},
		{"trailing slash", []Mount{m("/work/")}},
		{"root", []Mount{m("/")}},
		{"usr", []Mount{m("/usr")}},
		{"under usr", []Mount{m("/usr/local/x")}},
		{"under etc", []Mount{m("/etc/x")}},
		{"proc", []Mount{m("/proc")}},
		{"dev", []Mount{m("/dev/shm")}},
		{"tmp", []Mount{m("/tmp")}},
		{"bin", []Mount{m("/bin")}},
		{"lib64", []Mount{m("/lib64")}},
		{"goroot", []Mount{m("/opt/capfs/go/src")}},
		{"above goroot", []Mount{m("/opt")}},
		{"duplicate", []Mount{m("/work"), m("/work")}},
		{"nested", []Mount{m("/work"), m("/work/ref")}},
		{"nested reversed", []Mount{m("/a/b"), m("/a")}},
		{"relative source", []Mount{{Source: "rel/dir", Target: "/work"}}},
		{"no source", []Mount{{Target: "/work"}}},
		{"NUL", []Mount{m("/wo\x00rk")}},
	} {
		_, err := wrapNow(w, &Launch{Path: "true", Mounts: c.mounts})
		if vfs.CodeOf(err) != vfs.CodeInvalidPath {
			t.Errorf("%s: Wrap = %v, want invalid_path", c.name, err)
		}
	}
	wm := Bubblewrap(BubblewrapOptions{Path: bin, GoModCache: "/root/go/pkg/mod"})
	if _, err := wrapNow(wm, &Launch{Path: "true", Mounts: []Mount{m("/opt/capfs")}}); vfs.CodeOf(err) != vfs.CodeInvalidPath {
		t.Errorf("mount holding the module cache: Wrap = %v, want invalid_path", err)
	}
	// The host paths of the toolchain and module cache are not the sandbox's.
	if _, err := wrapNow(wm, &Launch{Path: "true", Mounts: []Mount{m("/root/go"), m("/opt/go")}}); err != nil {
		t.Errorf("mounts at the host paths of the Go root and module cache refused: %v", err)
	}
	// Siblings and look-alike prefixes are fine.
	if _, err := wrapNow(w, &Launch{Path: "true", Mounts: []Mount{m("/work"), m("/workshop"), m("/usrdata"), m("/ref/head")}}); err != nil {
		t.Fatalf("valid mounts refused: %v", err)
	}
}

func TestValidateLaunch(t *testing.T) {
	ring := audit.NewRing(16)
	r := &Runner{AllowUnsandboxed: true, Audit: ring}
	for _, l := range []*Launch{
		nil,
		{},
		{Path: "tr\x00ue"},
		{Path: "true", Args: []string{"a\x00"}},
		{Path: "true", Env: []string{"NOEQUALS"}},
		{Path: "true", Env: []string{"=v"}},
		{Path: "true", Dir: "rel"},
		{Path: "true", Dir: "/a/./b"},
	} {
		if _, err := r.Run(context.Background(), l); vfs.CodeOf(err) != vfs.CodeInvalidPath {
			t.Errorf("Run(%+v) = %v, want invalid_path", l, err)
		}
	}
	evs := ring.Events()
	if len(evs) != 7 { // the nil launch is not recorded: it names no subject or command
		t.Fatalf("%d events, want 7", len(evs))
	}
	for _, e := range evs {
		if e.Op != "run" || e.Outcome != audit.Denied || e.Code != "invalid_path" || e.Rule != "not_started" {
			t.Fatalf("event of an invalid launch: %+v", e)
		}
	}
}

// wrapNow wraps l with w and runs the launch's Cleanup at once (the launch is
// only inspected, never run).
func wrapNow(w Wrapper, l *Launch) (*Launch, error) {
	out, err := w.Wrap(context.Background(), l)
	if out != nil {
		// The cleanup closes bwrap's --args descriptor (the last extra
		// file): a copy stays for bwrapArgs to read.
		if n := len(out.ExtraFiles); n > len(l.ExtraFiles) {
			if fd, derr := unix.Dup(int(out.ExtraFiles[n-1].Fd())); derr == nil {
				out.ExtraFiles = append(out.ExtraFiles[:n-1:n-1], os.NewFile(uintptr(fd), "bwrap-args-copy"))
			}
		}
		for i := len(out.Cleanup) - 1; i >= 0; i-- {
			out.Cleanup[i]()
		}
	}
	return out, err
}

func TestWrapArguments(t *testing.T) {
	bin, _ := fakeBwrap(t, "", 0)
	w := Bubblewrap(BubblewrapOptions{Path: bin, GoRoot: "/opt/go"})
	src := t.TempDir()
	f := openPath(t, src)
	pre := openPath(t, src)
	in := &Launch{
		Path: "make", Args: []string{"-j2", "all"},
		Env:        []string{"CC=gcc"},
		ExtraFiles: []*os.File{pre},
		Mounts: []Mount{
			{Source: src, Target: "/ref"},
			{File: f, Target: "/work", Writable: true},
			{Source: src, Target: "/out", Writable: true},
		},
		Subject: "s",
	}
	out, err := wrapNow(w, in)
	if err != nil {
		t.Fatal(err)
	}
	if !launchesBwrap(out) || out.Dir != "/" || out.Mounts != nil || out.Subject != "s" {
		t.Fatalf("wrapped launch %+v", out)
	}
	// Between the mount's and the options: the sandbox's /etc/passwd and
	// /etc/group (passwd.go), where the host has them.
	if len(out.ExtraFiles) < 3 || len(out.ExtraFiles) > 5 || !slices.Equal(out.ExtraFiles[:2], []*os.File{pre, f}) {
		t.Fatalf("extra files %v, want the launch's, the mount's, then bwrap's options", out.ExtraFiles)
	}
	// bwrap's own argument list (/proc/1/cmdline inside) holds no host path:
	// the options come through a descriptor, the last.
	argsFD := strconv.Itoa(2 + len(out.ExtraFiles))
	if raw := strings.Join(out.Args, " "); strings.Contains(raw, src) || !strings.Contains(raw, "--args "+argsFD+" -- /bin/sh") {
		t.Errorf("bwrap's argument list names a host directory or lacks --args %s: %s", argsFD, raw)
	}
	args := strings.Join(bwrapArgs(t, out), " ")
	for _, want := range []string{
		"--unshare-all --unshare-user --disable-userns --uid 1000 --gid 1000",
		"--die-with-parent --new-session --clearenv --ro-bind /usr /usr",
		"--ro-bind /etc /etc",
		"--proc /proc --dev /dev --size 1073741824 --tmpfs /tmp --ro-bind /opt/go " + GoRootTarget,
		"--ro-bind " + src + " /ref --bind-fd 4 /work --bind " + src + " /out --chdir /work",
		"--setenv PATH " + GoRootTarget + "/bin:/usr/local/sbin:",
		"--setenv HOME /tmp", "--setenv GOTOOLCHAIN local", "--setenv CC gcc",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("bwrap args lack %q:\n%s", want, args)
		}
	}
	if !strings.HasSuffix(args, " -- /bin/sh -c "+ExecCheck+" capfs make -j2 all") {
		t.Errorf("bwrap args do not end with the command: %s", args)
	}
	// A toolchain inside the module cache is bound at the toolchain's target
	// too; neither's host path is a target or in the environment.
	out, err = wrapNow(Bubblewrap(BubblewrapOptions{Path: bin, GoRoot: "/m/golang.org/toolchain@v1/go", GoModCache: "/m"}), &Launch{Path: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(bwrapArgs(t, out), " "); !strings.Contains(args, "--ro-bind /m/golang.org/toolchain@v1/go "+GoRootTarget+" --ro-bind /m "+GoModCacheTarget) ||
		!strings.Contains(args, "--setenv GOMODCACHE "+GoModCacheTarget+" --setenv GOPROXY off") || strings.Contains(args, "--setenv PATH /m") {
		t.Errorf("args with GOROOT in the module cache: %s", args)
	}
	if _, err := wrapNow(w, &Launch{Path: "go", Mounts: []Mount{{Source: src, Target: "/m/x"}}}); err != nil {
		t.Errorf("a mount beside an unset module cache refused: %v", err)
	}
	// A Go root under /usr is bound already.
	out, err = wrapNow(Bubblewrap(BubblewrapOptions{Path: bin, GoRoot: "/usr/local/go"}), &Launch{Path: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(bwrapArgs(t, out), " "); strings.Contains(args, "--ro-bind /usr/local/go") || !strings.Contains(args, "--chdir / ") {
		t.Errorf("args with GOROOT under /usr: %s", args)
	}
}

func TestEtcMasks(t *testing.T) {
	root := t.TempDir()
	mk := func(p string, mode os.FileMode) {
		t.Helper()
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.Mkdir(full, 0o755); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(full, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, mode); err != nil {
			t.Fatal(err)
		}
	}
	mk("public", 0o644)
	mk("shadow", 0o640)
	mk("ssl/", 0o755)
	mk("ssl/cert.pem", 0o644)
	mk("ssl/private/", 0o755)
	mk("ssl/private/key.pem", 0o600)
	if err := os.Chmod(filepath.Join(root, "ssl/private"), 0o710); err != nil {
		t.Fatal(err)
	}
	mk("noread/", 0o711)
	if err := os.Symlink("shadow", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(etcMasks(root), " ")
	want := strings.Join([]string{
		"--tmpfs", root + "/noread", "--remount-ro", root + "/noread",
		"--ro-bind", "/dev/null", root + "/shadow",
		"--tmpfs", root + "/ssl/private", "--remount-ro", root + "/ssl/private",
	}, " ")
	if got != want {
		t.Fatalf("masks:\n%s\nwant:\n%s", got, want)
	}
}

func TestMergeEnvAndCommandLine(t *testing.T) {
	got := mergeEnv([]string{"A=1", "B=2"}, []string{"B=3", "C=4", "A=5", "C=6"})
	if want := []string{"A=5", "B=3", "C=6"}; !slices.Equal(got, want) {
		t.Fatalf("mergeEnv = %q, want %q", got, want)
	}
	if v := envValue(got, "C"); v != "6" {
		t.Fatalf("envValue = %q", v)
	}
	if s := commandLine("sh", []string{"-c", "echo 'hi' $X", ""}); s != `sh -c 'echo '\''hi'\'' $X' ''` {
		t.Fatalf("commandLine = %s", s)
	}
	long := commandLine("x", []string{strings.Repeat("é", 400)})
	if len(long) > 512 || !strings.HasPrefix(long, "x 'é") || !strings.HasSuffix(long, "é") {
		t.Fatalf("long command line cut wrongly: %d bytes", len(long))
	}
}

func TestWrapperErrorAndNilLaunch(t *testing.T) {
	ring := audit.NewRing(4)
	r := &Runner{AllowUnsandboxed: true, Audit: ring, Wrappers: []Wrapper{nilWrapper{}}}
	if _, err := r.Run(context.Background(), sh("true")); vfs.CodeOf(err) != vfs.CodeInvalidPath || !strings.Contains(err.Error(), "nil-wrapper") {
		t.Fatalf("nil launch from a wrapper: %v", err)
	}
	evs := ring.Events()
	if e := evs[len(evs)-1]; e.Op != "run" || e.Outcome != audit.Denied || e.Rule != "unsandboxed wrappers=" {
		t.Fatalf("run event %+v, want denied", e)
	}
}

type nilWrapper struct{}

func (nilWrapper) Name() string { return "nil-wrapper" }
func (nilWrapper) Wrap(context.Context, *Launch) (*Launch, error) {
	return nil, nil
}

func TestInheritedDescriptorsNotPassed(t *testing.T) {
	// Simulate a descriptor this process inherited without close-on-exec.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	// No pipeline in the command: the shell holds a pipe's ends for a moment while
	// it starts the commands of one, and ls would list them.
	_, out, _ := runOut(t, &Runner{AllowUnsandboxed: true}, sh("ls /proc/$$/fd"))
	if got := strings.Join(strings.Fields(out), " "); got != "0 1 2" {
		t.Fatalf("descriptors of the command: %q, want only 0 1 2 (this process's fd %d was inheritable)", got, w.Fd())
	}
}

func TestCanceledContextNeverFallsBack(t *testing.T) {
	bin, count := fakeBwrap(t, noNamespaces, 1)
	r := &Runner{Wrappers: []Wrapper{Bubblewrap(BubblewrapOptions{Path: bin})}, AllowUnsandboxed: true}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	work := t.TempDir()
	res, err := r.Run(ctx, sh("echo ran > ran.txt", Mount{Source: work, Target: "/work", Writable: true}))
	if res != nil || vfs.CodeOf(err) != vfs.CodeCanceled || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a canceled ctx = %+v, %v", res, err)
	}
	if _, err := os.Lstat(filepath.Join(work, "ran.txt")); err == nil || calls(t, count) != 0 {
		t.Fatal("something ran under a canceled context")
	}
}

func TestDefaultRunner(t *testing.T) {
	r := Default()
	if len(r.Wrappers) != 1 || r.Wrappers[0].Name() != "bubblewrap" || r.AllowUnsandboxed {
		t.Fatalf("Default() = %+v, want the bubblewrap sandbox alone, refusing unsandboxed runs", r)
	}
	if _, ok := r.Wrappers[0].(Sandbox); !ok {
		t.Fatal("the bubblewrap wrapper is not a Sandbox")
	}
	needBwrap(t)
	if DetectGoRoot() == "" {
		t.Skip("no go command on this host")
	}
	res, out, _ := runOut(t, r, sh("id -u; command -v go"))
	if !res.Sandboxed || !strings.HasPrefix(out, "1000\n/") || !strings.HasSuffix(out, "/bin/go\n") {
		t.Fatalf("Default run: %q %+v", out, res)
	}
}
