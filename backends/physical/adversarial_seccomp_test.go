//go:build linux

package physical_test

// THREATS.md lines 46 and 47 with a real seccomp filter: child processes of the
// test binary install a filter that makes openat2 fail (ENOSYS or EPERM, as
// container runtimes do; or EAGAIN forever, an endless rename storm) and run the
// adversarial and race suites with the default resolver (ResolverAuto), which
// must fall back to the portable resolver and pass them all.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/vfs"
)

// seccompEnv, set in a child's environment, names the errno its filter returns
// for openat2.
const seccompEnv = "CAPFS_ADV_SECCOMP"

var seccompErrnos = map[string]unix.Errno{"ENOSYS": unix.ENOSYS, "EPERM": unix.EPERM, "EAGAIN": unix.EAGAIN}

func init() {
	// ENOSYS and EPERM children filter openat2 before any test runs; the EAGAIN
	// child installs its filter itself, after opening backends.
	switch v := os.Getenv(seccompEnv); v {
	case "ENOSYS", "EPERM":
		if err := denyOpenat2(seccompErrnos[v]); err != nil {
			fmt.Fprintf(os.Stderr, "installing the seccomp filter: %v\n", err)
			os.Exit(3)
		}
	}
}

// seccompChild reports the errno of the filter installed in this process for
// the whole run, or "" if none.
func seccompChild() string {
	if v := os.Getenv(seccompEnv); v == "ENOSYS" || v == "EPERM" {
		return v
	}
	return ""
}

// denyOpenat2 installs a seccomp filter, on every thread of the process, that
// fails openat2 with errno and allows every other system call.
func denyOpenat2(errno unix.Errno) error {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
	default:
		return errors.New("no seccomp filter for " + runtime.GOARCH)
	}
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4}, // seccomp_data.arch
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 3, K: arch},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_OPENAT2},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(errno)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_NO_NEW_PRIVS: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	runtime.KeepAlive(filter)
	if fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC}); err != errno {
		if err == nil {
			unix.Close(fd)
		}
		return fmt.Errorf("openat2 after the filter: %v; want %v", err, errno)
	}
	return nil
}

func canFilter(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skipf("no seccomp filter for %s", runtime.GOARCH)
	}
	if os.Getenv(seccompEnv) != "" {
		t.Skip("already inside a seccomp child")
	}
}

// runChild runs the test binary again with the filter named by errno and the
// given -test.run pattern, and returns its verbose output. CAPFS_STRESS is
// dropped: the child runs the bounded suite.
func runChild(t *testing.T, errno, run string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.skip=^TestAdvSeccomp(Openat2)?$", "-test.v", "-test.count=1")
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "CAPFS_STRESS") && !strings.HasPrefix(e, seccompEnv+"=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, seccompEnv+"="+errno)
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail := string(out)
		if len(tail) > 8000 {
			tail = tail[len(tail)-8000:]
		}
		t.Fatalf("child with openat2 -> %s: %v\n%s", errno, err, tail)
	}
	return string(out)
}

// TestAdvSeccompOpenat2 covers line 47: under a seccomp filter that fails
// openat2 with ENOSYS, and one that fails it with EPERM, the default resolver
// falls back to the portable one and the whole adversarial and race suites pass
// (each of their tests runs once, with ResolverAuto); ResolverOpenat2 fails with
// not_supported. It also runs the EAGAIN child (line 46).
func TestAdvSeccompOpenat2(t *testing.T) {
	canFilter(t)
	for _, errno := range []string{"ENOSYS", "EPERM"} {
		t.Run(errno, func(t *testing.T) {
			out := runChild(t, errno, "^Test(Adv|Race)")
			passed := strings.Count(out, "--- PASS: TestAdv") + strings.Count(out, "--- PASS: TestRace")
			sub := strings.Count(out, "/auto-seccomp-"+errno+" (")
			if strings.Contains(out, "--- FAIL") || passed < 30 || sub < 30 {
				t.Errorf("child with openat2 -> %s: %d tests passed, %d seccomp subtests; want no failure, 30 or more of each:\n%s", errno, passed, sub, out)
			}
			if strings.Contains(out, "--- SKIP: TestAdv") && strings.Contains(out, "openat2 is not available") {
				t.Errorf("a test skipped for want of openat2 instead of falling back:\n%s", out)
			}
			t.Logf("child with openat2 -> %s: %d tests and %d ResolverAuto subtests passed", errno, passed, sub)
		})
	}
	t.Run("EAGAIN", func(t *testing.T) {
		out := runChild(t, "EAGAIN", "^TestAdvSeccompEAGAINChild$")
		if !strings.Contains(out, "--- PASS: TestAdvSeccompEAGAINChild") {
			t.Errorf("EAGAIN child:\n%s", out)
		}
	})
}

// TestAdvSeccompEAGAINChild covers line 46 in the EAGAIN child: backends opened
// while openat2 worked, then a filter that fails every openat2 with EAGAIN (a
// rename storm that never ends). Every call returns, after the bounded retries,
// with a typed error (io_error); none reads anything, and ResolverAuto does not
// silently switch resolvers. New itself fails the same way for ResolverOpenat2
// and ResolverAuto; ResolverPortable keeps working and confining.
func TestAdvSeccompEAGAINChild(t *testing.T) {
	if os.Getenv(seccompEnv) != "EAGAIN" {
		t.Skip("runs in the EAGAIN child of TestAdvSeccompOpenat2")
	}
	w := newWorld(t, physical.ResolverOpenat2)
	auto := openFS(t, w.root, physical.ResolverAuto)
	w.file("f", "OK")
	w.file("d/f", "OK")
	w.link("../outside/secret", "relf")
	w.link("../../outside/secret", "d/relf")
	if err := denyOpenat2(unix.EAGAIN); err != nil {
		t.Fatal(err)
	}
	// Paths that need resolution (names directly in the root may be answered
	// with fstatat, which needs none).
	for name, f := range map[string]*physical.FS{"openat2": w.fs, "auto": auto} {
		for _, s := range []string{"d/f", "relf", "d/relf", "d/missing"} {
			for i := range 3 { // again: no switch to another resolver after the first failure
				_, err := f.Stat(w.ctx, p(s))
				w.wantCode(name+" Stat("+s+") #"+fmt.Sprint(i), err, vfs.CodeIO)
				h, err := f.OpenFile(w.ctx, p(s), os.O_RDONLY, 0)
				if err == nil {
					h.Close()
				}
				w.wantCode(name+" OpenFile("+s+") #"+fmt.Sprint(i), err, vfs.CodeIO)
			}
		}
		t.Logf("%s under an endless EAGAIN: %v", name, func() error { _, err := f.Stat(w.ctx, p("d/f")); return err }())
	}
	for _, mode := range []physical.ResolverMode{physical.ResolverOpenat2, physical.ResolverAuto} {
		f, err := physical.New(w.root, physical.WithResolver(mode))
		if err == nil {
			f.Close()
			t.Errorf("New(%v) under an endless EAGAIN succeeded", mode)
			continue
		}
		if vfs.CodeOf(err) != vfs.CodeIO {
			t.Errorf("New(%v) under an endless EAGAIN: %v; want io_error", mode, err)
		}
	}
	portable := openFS(t, w.root, physical.ResolverPortable)
	h, err := portable.OpenFile(w.ctx, p("f"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("portable OpenFile(f): %v", err)
	}
	h.Close()
	_, err = portable.Stat(w.ctx, p("relf"))
	w.wantCode("portable Stat(relf)", err, vfs.CodeOutside)
}
