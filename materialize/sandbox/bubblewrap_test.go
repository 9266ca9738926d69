//go:build linux

package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/vfs"
)

var (
	probeOnce sync.Once
	probeErr  error
)

// needBwrap skips the test when bubblewrap is missing or cannot create its
// namespaces on this host.
func needBwrap(t *testing.T) {
	t.Helper()
	probeOnce.Do(func() {
		probeErr = Bubblewrap(BubblewrapOptions{}).Probe(context.Background())
	})
	if probeErr != nil {
		t.Skipf("bubblewrap cannot sandbox here, skipping: %v", probeErr)
	}
}

// runOut runs l with r and returns its stdout and stderr.
func runOut(t *testing.T, r *Runner, l *Launch) (*Result, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	l.Stdout, l.Stderr = &out, &errb
	res, err := r.Run(context.Background(), l)
	if err != nil {
		t.Fatalf("Run(%s %q): %v (stderr %q)", l.Path, l.Args, err, errb.String())
	}
	return res, out.String(), errb.String()
}

func bwrapRunner(opts BubblewrapOptions, ws ...Wrapper) *Runner {
	return &Runner{Wrappers: append([]Wrapper{Bubblewrap(opts)}, ws...)}
}

func sh(script string, mounts ...Mount) *Launch {
	return &Launch{Path: "sh", Args: []string{"-c", script}, Mounts: mounts}
}

func TestBwrapRunsAsUnprivilegedUser(t *testing.T) {
	needBwrap(t)
	ring := audit.NewRing(8)
	r := bwrapRunner(BubblewrapOptions{})
	r.Audit = ring
	l := sh("id -u; id -g")
	l.Subject = "agent-7"
	res, out, _ := runOut(t, r, l)
	if out != "1000\n1000\n" {
		t.Fatalf("ids inside = %q, want 1000 and 1000", out)
	}
	if res.ExitCode != 0 || !res.Sandboxed || !slices.Equal(res.Wrappers, []string{"bubblewrap"}) {
		t.Fatalf("result = %+v, want exit 0, sandboxed, wrappers [bubblewrap]", res)
	}
	evs := ring.Events()
	if len(evs) != 1 {
		t.Fatalf("audit events = %+v, want one run event", evs)
	}
	e := evs[0]
	if e.Op != "run" || e.Subject != "agent-7" || e.Outcome != audit.OK || e.Rule != "sandboxed wrappers=bubblewrap" ||
		e.Path != "sh -c 'id -u; id -g'" || e.RequestID == "" {
		t.Fatalf("run event = %+v", e)
	}
}

func TestBwrapWriteBoundaries(t *testing.T) {
	needBwrap(t)
	work, ro := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "existing"), []byte("keep"), 0o666); err != nil {
		t.Fatal(err)
	}
	script := `
echo built > /work/out.txt || echo "work refused"
mkdir /work/sub && echo nested > /work/sub/n.txt
cat /ro/existing; echo
for p in /ro/new /ro/existing /usr/capfs-sandbox-probe /etc/capfs-sandbox-probe; do
	if (echo x > "$p") 2>/dev/null; then echo "$p writable"; else echo "$p refused"; fi
done
if mount -o remount,rw /usr 2>/dev/null; then echo "remount worked"; else echo "remount refused"; fi
pwd`
	_, out, _ := runOut(t, bwrapRunner(BubblewrapOptions{}), sh(script,
		Mount{Source: work, Target: "/work", Writable: true},
		Mount{Source: ro, Target: "/ro"}))
	want := "keep\n/ro/new refused\n/ro/existing refused\n/usr/capfs-sandbox-probe refused\n" +
		"/etc/capfs-sandbox-probe refused\nremount refused\n/work\n"
	if out != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out, want)
	}
	if b, err := os.ReadFile(filepath.Join(work, "out.txt")); err != nil || string(b) != "built\n" {
		t.Fatalf("host work/out.txt = %q, %v; want the sandbox's write", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(work, "sub", "n.txt")); err != nil || string(b) != "nested\n" {
		t.Fatalf("host work/sub/n.txt = %q, %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ro, "existing")); string(b) != "keep" {
		t.Fatalf("read-only grant changed on the host: %q", b)
	}
	for _, p := range []string{filepath.Join(ro, "new"), "/usr/capfs-sandbox-probe", "/etc/capfs-sandbox-probe"} {
		if _, err := os.Lstat(p); err == nil {
			t.Fatalf("%s appeared on the host", p)
		}
	}
}

func TestBwrapNoNetwork(t *testing.T) {
	needBwrap(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	// Interfaces, then a connection attempt to the host's listener through
	// loopback (bash's /dev/tcp), reported as "connected" or "unreachable".
	script := `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '
if bash -c 'echo hi > /dev/tcp/127.0.0.1/` + port + `' 2>/dev/null; then echo connected; else echo unreachable; fi`
	_, out, _ := runOut(t, bwrapRunner(BubblewrapOptions{}), sh(script))
	if out != "lo\nunreachable\n" {
		t.Fatalf("output %q, want only lo and an unreachable host port", out)
	}
	// Nothing reached the listener: no connection is pending.
	if err := ln.(*net.TCPListener).SetDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Fatal("the sandbox connected to a host port")
	}
}

func TestBwrapEnvironmentCleared(t *testing.T) {
	needBwrap(t)
	t.Setenv("CAPFS_HOST_SECRET", "s3cret")
	l := sh("env | sort")
	l.Env = []string{"FROM_LAUNCH=yes", "LANG=en_US.UTF-8"}
	_, out, _ := runOut(t, bwrapRunner(BubblewrapOptions{}), l)
	if strings.Contains(out, "CAPFS_HOST_SECRET") || strings.Contains(out, "s3cret") {
		t.Fatalf("host variable leaked into the sandbox:\n%s", out)
	}
	for _, want := range []string{"FROM_LAUNCH=yes", "HOME=/tmp", "LANG=en_US.UTF-8", "PATH=/usr/local/sbin:"} {
		if !strings.Contains(out, want) {
			t.Fatalf("environment lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "LANG=C.UTF-8") {
		t.Fatalf("the launch's LANG did not replace the default:\n%s", out)
	}
}

func TestBwrapExitStatus(t *testing.T) {
	needBwrap(t)
	ring := audit.NewRing(4)
	r := bwrapRunner(BubblewrapOptions{})
	r.Audit = ring
	for _, c := range []struct {
		script string
		want   int
	}{{"exit 7", 7}, {"exit 0", 0}, {"kill -9 $$", 128 + 9}} {
		res, err := r.Run(context.Background(), sh(c.script))
		if err != nil {
			t.Fatalf("%q: a non-zero exit must not be an error: %v", c.script, err)
		}
		if res.ExitCode != c.want {
			t.Fatalf("%q: exit code %d, want %d", c.script, res.ExitCode, c.want)
		}
	}
	if e := ring.Events()[0]; e.Outcome != audit.Failed || e.Code != "exit_status_7" {
		t.Fatalf("event of exit 7 = %+v", e)
	}
}

func TestBwrapCommandNotFoundInside(t *testing.T) {
	needBwrap(t)
	res, _, errOut := runOut(t, bwrapRunner(BubblewrapOptions{}), &Launch{Path: "capfs-no-such-command"})
	if res.ExitCode == 0 || !strings.Contains(errOut, "capfs-no-such-command") {
		t.Fatalf("exit %d, stderr %q: want a failure naming the command", res.ExitCode, errOut)
	}
}

// recorder is a custom wrapper that appends an argument and an environment
// variable, and remembers what it saw.
type recorder struct {
	name string
	mu   sync.Mutex
	saw  []*Launch
}

func (w *recorder) Name() string { return w.name }

func (w *recorder) Wrap(_ context.Context, l *Launch) (*Launch, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.saw = append(w.saw, l.clone())
	if slices.Contains(l.Wrappers, "bubblewrap") {
		return l, nil // after the sandbox: only look
	}
	l.Args = append(l.Args, "from-"+w.name)
	l.Env = append(l.Env, "WRAPPED_BY_"+strings.ToUpper(w.name)+"=1")
	return l, nil
}

func TestWrapperChainOrder(t *testing.T) {
	needBwrap(t)
	a, b, c := &recorder{name: "a"}, &recorder{name: "b"}, &recorder{name: "c"}
	r := &Runner{Wrappers: []Wrapper{a, b, Bubblewrap(BubblewrapOptions{}), c}}
	l := sh(`echo "A=$WRAPPED_BY_A B=$WRAPPED_BY_B args:$*"`)
	l.Args = append(l.Args, "sh", "x")
	res, out, _ := runOut(t, r, l)
	if out != "A=1 B=1 args:x from-a from-b\n" {
		t.Fatalf("output %q: the custom wrappers' args and env did not reach the command in order", out)
	}
	if want := []string{"a", "b", "bubblewrap", "c"}; !slices.Equal(res.Wrappers, want) || !res.Sandboxed {
		t.Fatalf("result wrappers %v sandboxed %v, want %v", res.Wrappers, res.Sandboxed, want)
	}
	if got := b.saw[0]; !slices.Equal(got.Wrappers, []string{"a"}) || got.Args[len(got.Args)-1] != "from-a" {
		t.Fatalf("b saw wrappers %v args %q: want a's launch", got.Wrappers, got.Args)
	}
	if got := c.saw[0]; !slices.Equal(got.Wrappers, []string{"a", "b", "bubblewrap"}) || !launchesBwrap(got) {
		t.Fatalf("c saw %s %q with wrappers %v: want the bwrap launch", got.Path, got.Args, got.Wrappers)
	}
	if len(l.Args) != 4 || len(l.Env) != 0 {
		t.Fatalf("the caller's launch was modified: %q %q", l.Args, l.Env)
	}
}

// launchesBwrap reports whether l runs bwrap, directly or through the limits
// launcher.
func launchesBwrap(l *Launch) bool {
	if strings.HasSuffix(l.Path, "bwrap") {
		return true
	}
	i := slices.Index(l.Args, "--")
	return l.Path == launcherShell && i >= 0 && i+1 < len(l.Args) && strings.HasSuffix(l.Args[i+1], "bwrap")
}

// bwrapArgs returns the arguments l passes to bwrap, those it reads from its
// --args descriptor in their place, and l's Cleanup run.
func bwrapArgs(t *testing.T, l *Launch) []string {
	t.Helper()
	defer func() {
		for i := len(l.Cleanup) - 1; i >= 0; i-- {
			l.Cleanup[i]()
		}
	}()
	args := l.Args
	if !strings.HasSuffix(l.Path, "bwrap") {
		i := slices.Index(l.Args, "--")
		if !launchesBwrap(l) {
			t.Fatalf("launch %s %q does not run bwrap", l.Path, l.Args)
		}
		args = l.Args[i+2:]
	}
	if len(args) < 2 || args[0] != "--args" {
		t.Fatalf("bwrap's arguments %q do not start with --args FD", args)
	}
	fd, err := strconv.Atoi(args[1])
	if err != nil || fd < 3 || fd-3 >= len(l.ExtraFiles) {
		t.Fatalf("bwrap's --args %q names no descriptor of the launch", args[1])
	}
	st, err := l.ExtraFiles[fd-3].Stat()
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, st.Size())
	if _, err := l.ExtraFiles[fd-3].ReadAt(data, 0); err != nil {
		t.Fatal(err)
	}
	inFile := strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
	return append(inFile, args[2:]...)
}

func TestBwrapCancelKillsProcess(t *testing.T) {
	needBwrap(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	defer pr.Close()
	marker := "100.0" + strconv.Itoa(os.Getpid())
	l := sh("echo started; exec sleep " + marker)
	l.Stdout = pw
	type ret struct {
		res *Result
		err error
	}
	done := make(chan ret, 1)
	go func() {
		res, err := bwrapRunner(BubblewrapOptions{}).Run(ctx, l)
		pw.Close()
		done <- ret{res, err}
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil || line != "started\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	cancel()
	go io.Copy(io.Discard, pr)
	got := <-done
	if got.err == nil || vfs.CodeOf(got.err) != vfs.CodeCanceled || !errors.Is(got.err, context.Canceled) {
		t.Fatalf("Run after cancel: %v, want a canceled error", got.err)
	}
	if got.res == nil || got.res.ExitCode != 128+9 {
		t.Fatalf("result after cancel = %+v, want killed (137)", got.res)
	}
	waitGone(t, marker)
}

// waitGone fails the test if a process whose command line holds marker is still
// alive after a bounded wait (the kernel reaps a killed pid namespace
// asynchronously).
func waitGone(t *testing.T, marker string) {
	t.Helper()
	for i := 0; ; i++ {
		pids := processesWith(marker)
		if len(pids) == 0 {
			return
		}
		if i == 200 {
			t.Fatalf("processes %v (%s) survived the cancel", pids, marker)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func processesWith(marker string) []string {
	ents, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(marker)) {
			st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
			if i := bytes.LastIndexByte(st, ')'); i > 0 && len(st) > i+2 && st[i+2] == 'Z' {
				continue // a zombie is dead
			}
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func openPath(t *testing.T, dir string) *os.File {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "opath")
	t.Cleanup(func() { f.Close() })
	return f
}

func TestBwrapFileMounts(t *testing.T) {
	needBwrap(t)
	rw, ro := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "in.txt"), []byte("input"), 0o644); err != nil {
		t.Fatal(err)
	}
	rwf, rof := openPath(t, rw), openPath(t, ro)
	// Rename the host directories away: the binds follow the descriptors, not the
	// paths.
	if err := os.Rename(rw, rw+".moved"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rw + ".moved") })
	script := `cat /in/in.txt; echo
echo out > /out/o.txt && echo wrote
if (echo x > /in/x) 2>/dev/null; then echo "in writable"; else echo "in refused"; fi
ls /proc/$$/fd`
	_, out, _ := runOut(t, bwrapRunner(BubblewrapOptions{}), sh(script,
		Mount{File: rwf, Target: "/out", Writable: true},
		Mount{File: rof, Target: "/in"}))
	if out != "input\nwrote\nin refused\n0\n1\n2\n" {
		t.Fatalf("output %q: want the read-only input, a write, a refusal and only fds 0-2", out)
	}
	if b, err := os.ReadFile(filepath.Join(rw+".moved", "o.txt")); err != nil || string(b) != "out\n" {
		t.Fatalf("host file through the fd mount = %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(ro, "x")); err == nil {
		t.Fatal("write through the read-only fd mount reached the host")
	}
}

func TestBwrapHidesPrivateEtc(t *testing.T) {
	needBwrap(t)
	fi, err := os.Stat("/etc/shadow")
	if err != nil || fi.Mode().Perm()&0o004 != 0 {
		t.Skip("no private /etc/shadow on this host")
	}
	script := `if cat /etc/shadow >/dev/null 2>&1; then echo shadow-readable; else echo shadow-hidden; fi
head -c 5 /etc/passwd; echo`
	_, out, _ := runOut(t, bwrapRunner(BubblewrapOptions{}), sh(script))
	if out != "shadow-hidden\nroot:\n" {
		t.Fatalf("output %q: want /etc/shadow hidden and /etc/passwd readable", out)
	}
	if ents, err := os.ReadDir("/etc/ssl/private"); err == nil && len(ents) > 0 {
		if fi, _ := os.Stat("/etc/ssl/private"); fi.Mode().Perm()&0o005 != 0o005 {
			_, out, _ := runOut(t, bwrapRunner(BubblewrapOptions{}), sh("ls -A /etc/ssl/private | wc -l"))
			if strings.TrimSpace(out) != "0" {
				t.Fatalf("/etc/ssl/private shows %s entries inside, want none", out)
			}
		}
	}
	_, out, _ = runOut(t, bwrapRunner(BubblewrapOptions{ShowPrivateEtc: true}), sh(script))
	if !strings.HasPrefix(out, "shadow-readable") {
		t.Fatalf("ShowPrivateEtc: output %q, want /etc/shadow as it is", out)
	}
}

func TestBwrapGoToolchain(t *testing.T) {
	needBwrap(t)
	root := DetectGoRoot()
	if root == "" {
		t.Skip("no go command on this host")
	}
	work := t.TempDir()
	src := "package main\n\nfunc main() { println(\"hi from the sandbox\") }\n"
	if err := os.WriteFile(filepath.Join(work, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	// go list loads the standard library's metadata from the bound GOROOT without
	// compiling it (a full build with an empty cache takes too long for a unit test).
	l := sh("go env GOROOT GOTOOLCHAIN && go list -f '{{.Name}} {{.Goroot}}' ./main.go && go list -f '{{.Name}} {{.Goroot}}' fmt",
		Mount{Source: work, Target: "/src", Writable: true})
	_, out, _ := runOut(t, bwrapRunner(BubblewrapOptions{GoRoot: root}), l)
	want := root
	if !within(root, "/usr") {
		want = GoRootTarget
	}
	if out != want+"\nlocal\nmain false\nfmt true\n" {
		t.Fatalf("output %q", out)
	}
}

func TestBwrapBuildsC(t *testing.T) {
	needBwrap(t)
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler on this host")
	}
	work := t.TempDir()
	src := "#include <stdio.h>\nint main(void) { puts(\"built inside\"); return 3; }\n"
	if err := os.WriteFile(filepath.Join(work, "hello.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	res, out, _ := runOut(t, bwrapRunner(BubblewrapOptions{}), sh("cc -o hello hello.c && ./hello",
		Mount{Source: work, Target: "/src", Writable: true}))
	if res.ExitCode != 3 || out != "built inside\n" {
		t.Fatalf("exit %d output %q, want the built program's status 3 and its line", res.ExitCode, out)
	}
	if fi, err := os.Stat(filepath.Join(work, "hello")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("the built binary is not on the host: %v", err)
	}
}

func TestBwrapGoModCache(t *testing.T) {
	needBwrap(t)
	mc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(mc, "cache", "download"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := `echo "$GOMODCACHE $GOPROXY"; ls "$GOMODCACHE/cache"
if (echo x > "$GOMODCACHE/poison") 2>/dev/null; then echo writable; else echo read-only; fi`
	_, out, _ := runOut(t, bwrapRunner(BubblewrapOptions{GoModCache: mc}), sh(script))
	if want := GoModCacheTarget + " off\ndownload\nread-only\n"; out != want {
		t.Fatalf("output %q, want %q", out, want)
	}
	if _, err := os.Lstat(filepath.Join(mc, "poison")); err == nil {
		t.Fatal("the sandbox wrote into the host module cache")
	}
}

func TestBwrapTmpSize(t *testing.T) {
	needBwrap(t)
	script := `if head -c 2097152 /dev/zero > /tmp/big 2>/dev/null; then echo fit; else echo full; fi
rm /tmp/big; head -c 1000 /dev/zero > /tmp/small && echo small`
	_, out, _ := runOut(t, bwrapRunner(BubblewrapOptions{TmpSize: 1 << 20}), sh(script))
	if out != "full\nsmall\n" {
		t.Fatalf("with a 1 MiB /tmp: %q, want a 2 MiB write refused", out)
	}
	_, out, _ = runOut(t, bwrapRunner(BubblewrapOptions{}), sh(script))
	if out != "fit\nsmall\n" {
		t.Fatalf("default /tmp: %q", out)
	}
}

func TestBwrapStdin(t *testing.T) {
	needBwrap(t)
	l := sh("tr a-z A-Z; echo err >&2")
	l.Stdin = strings.NewReader("piped in\n")
	_, out, errOut := runOut(t, bwrapRunner(BubblewrapOptions{}), l)
	if out != "PIPED IN\n" || errOut != "err\n" {
		t.Fatalf("stdout %q stderr %q", out, errOut)
	}
}
