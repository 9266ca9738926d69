//go:build linux

package physical

import (
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

// returns runs fn in a goroutine and fails t if it has not returned after a
// generous bound: it detects a call that hangs, not a slow one.
func returns(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return: a special file hung the call", what)
	}
}

// TestFIFO: a FIFO with no writer (THREATS 32) is never opened, for reading or
// writing, directly or through a link; the calls answer at once with
// not_regular_file.
func TestFIFO(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		if err := unix.Mkfifo(h.in("fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		h.plant("fifo", "lfifo")
		f := newAt(t, h.root, opts...)
		ctx := t.Context()
		returns(t, "operations on a FIFO", func() {
			for _, name := range []string{"fifo", "lfifo"} {
				for _, flag := range []int{os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC, os.O_RDWR | os.O_CREATE, os.O_WRONLY | os.O_APPEND, os.O_RDONLY | os.O_TRUNC} {
					h, err := f.OpenFile(ctx, P(name), flag, 0o644)
					if err == nil {
						h.Close()
					}
					wantCode(t, err, vfs.CodeNotRegular, "OpenFile(%s, %#x)", name, flag)
				}
				_, err := f.ReadDir(ctx, P(name))
				wantCode(t, err, vfs.CodeNotDir, "ReadDir(%s)", name)
				_, err = f.Sub(ctx, P(name))
				wantCode(t, err, vfs.CodeNotDir, "Sub(%s)", name)
				wantCode(t, f.Chmod(ctx, P(name), 0o600), vfs.CodeNotRegular, "Chmod(%s)", name)
				wantCode(t, f.Chtimes(ctx, P(name), time.Unix(1, 0), time.Unix(2, 0)), vfs.CodeNotRegular, "Chtimes(%s)", name)
				_, err = f.Stat(ctx, P(name+"/"))
				wantCode(t, err, vfs.CodeNotDir, "Stat(%s/)", name)
			}
			info, err := f.Stat(ctx, P("lfifo"))
			if err != nil || info.Mode.Type() != os.ModeNamedPipe {
				t.Errorf("Stat(lfifo) = %v, %v; want a named pipe (stat needs no open)", info.Mode, err)
			}
		})
		fi, err := os.Stat(h.in("fifo"))
		if err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("the FIFO changed: %v, %v", fi, err)
		}
	})
}

// TestSocketAndDevices: sockets and character devices (THREATS 33) show in Stat
// and listings but cannot be opened or changed.
func TestSocketAndDevices(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		l, err := net.Listen("unix", h.in("sock"))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		names := []string{"sock"}
		// A copy of /dev/null, and a 0:0 whiteout: only root may make them.
		if err := unix.Mknod(h.in("null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err == nil {
			names = append(names, "null")
			if err := unix.Mknod(h.in("whiteout"), unix.S_IFCHR|0o600, 0); err == nil {
				names = append(names, "whiteout")
			}
		} else {
			t.Logf("cannot make device nodes here (%v); testing the socket only", err)
		}
		f := newAt(t, h.root, opts...)
		ctx := t.Context()
		returns(t, "operations on special files", func() {
			for _, name := range names {
				for _, flag := range []int{os.O_RDONLY, os.O_WRONLY, os.O_RDWR | os.O_CREATE, os.O_WRONLY | os.O_TRUNC} {
					h, err := f.OpenFile(ctx, P(name), flag, 0o644)
					if err == nil {
						h.Close()
					}
					wantCode(t, err, vfs.CodeNotRegular, "OpenFile(%s, %#x)", name, flag)
				}
				wantCode(t, f.Chmod(ctx, P(name), 0o777), vfs.CodeNotRegular, "Chmod(%s)", name)
				if _, err := f.Stat(ctx, P(name)); err != nil {
					t.Errorf("Stat(%s): %v", name, err)
				}
			}
		})
		ents, err := f.ReadDir(ctx, vfs.Root)
		if err != nil {
			t.Fatal(err)
		}
		types := map[string]os.FileMode{}
		for _, e := range ents {
			types[e.Name] = e.Type
		}
		if types["sock"] != os.ModeSocket {
			t.Errorf("ReadDir lists sock as %v", types["sock"])
		}
		if len(names) > 1 && types["null"] != os.ModeDevice|os.ModeCharDevice {
			t.Errorf("ReadDir lists null as %v", types["null"])
		}
	})
}

// TestProcRoot: a root at /proc/self (THREATS 34) cannot reach through its magic
// links (cwd, root, exe, fd/N) to the rest of the host.
func TestProcRoot(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc here")
	}
	eachResolver(t, func(t *testing.T, opts ...Option) {
		f := newAt(t, "/proc/self", opts...)
		ctx := t.Context()
		for _, s := range []string{"cwd", "root", "exe", "cwd/x", "root/etc/passwd", "root/etc", "cwd/", "root/"} {
			_, err := f.Stat(ctx, P(s))
			wantCode(t, err, vfs.CodeOutside, "Stat(%s)", s)
			_, err = readAll(ctx, f, s)
			if err == nil {
				t.Errorf("ReadFile(%s) succeeded through a magic link", s)
			}
		}
		for _, s := range []string{"fd/0", "fd/1", "fd/2"} {
			if _, err := readAll(ctx, f, s); err == nil {
				t.Errorf("ReadFile(%s) succeeded through a magic link", s)
			}
		}
		if _, err := f.ReadDir(ctx, P("root")); vfs.CodeOf(err) != vfs.CodeOutside {
			t.Errorf("ReadDir(root) = %v; want path_outside_sandbox", err)
		}
		// Ordinary files of the directory itself are fine.
		if _, err := f.Stat(ctx, P("status")); err != nil {
			t.Errorf("Stat(status): %v", err)
		}
	})
}
