//go:build linux

package physical_test

// THREATS.md lines 32-34 and 36: FIFOs, sockets, devices, a root at /proc/self,
// and files too large (or endless) to read whole.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// hangLimit is a watchdog only: far above any real answer (the requirement is 100
// ms), it exists so that a call that blocks forever fails the test instead of
// hanging it. No test asserts how long a call takes.
const hangLimit = 5 * time.Second

// noHang runs fn and fails t if it has not returned within hangLimit; unblock is
// then called to release it.
func noHang(t testing.TB, what string, unblock func(), fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(hangLimit):
		t.Errorf("%s: still blocked after %v (a FIFO or device was opened)", what, hangLimit)
		unblock()
		return <-done
	}
}

// releaseFIFO opens a FIFO for reading and writing, which never blocks and
// releases anything blocked opening it.
func releaseFIFO(path string) func() {
	return func() {
		if fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK, 0); err == nil {
			time.AfterFunc(time.Second, func() { unix.Close(fd) })
		}
	}
}

// specialCalls are every Dir and backend call that would read or write the
// contents of s. Copy is among them unless s is a symlink (which Copy copies as a
// link).
func specialCalls(w *world, s string) []guestCall {
	calls := []guestCall{}
	fi, err := os.Lstat(w.host(s))
	isLink := err == nil && fi.Mode()&fs.ModeSymlink != 0
	for _, c := range guestCalls() {
		switch c.name {
		case "ReadFile", "WriteFile", "Append", "Open(O_RDONLY)", "Open(O_RDWR|O_CREATE)", "Open(O_WRONLY|O_TRUNC)",
			"Open(O_WRONLY|O_APPEND)", "OpenFile+ReadBytes":
			calls = append(calls, c)
		case "Copy(from)":
			if !isLink {
				calls = append(calls, c)
			}
		}
	}
	calls = append(calls,
		guestCall{"FS ReadFile", func(_ context.Context, d *dir.Dir, s string) error { _, err := fs.ReadFile(d.FS(), s); return err }},
		guestCall{"Open(O_WRONLY)", func(ctx context.Context, d *dir.Dir, s string) error {
			return closeHandle(d.Open(ctx, s, os.O_WRONLY, 0))
		}},
	)
	for _, flag := range []int{os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_CREATE, os.O_RDWR | os.O_TRUNC, os.O_WRONLY | os.O_APPEND} {
		calls = append(calls, guestCall{"backend OpenFile(" + flagName(flag) + ")", func(ctx context.Context, _ *dir.Dir, s string) error {
			f, err := w.fs.OpenFile(ctx, p(s), flag, 0o644)
			if err != nil {
				return err
			}
			b := make([]byte, 1)
			_, rerr := f.Read(b)
			f.Close()
			return errors.Join(errors.New("opened"), rerr)
		}})
	}
	return calls
}

func flagName(flag int) string {
	var parts []string
	switch flag & (os.O_WRONLY | os.O_RDWR) {
	case os.O_RDONLY:
		parts = append(parts, "O_RDONLY")
	case os.O_WRONLY:
		parts = append(parts, "O_WRONLY")
	default:
		parts = append(parts, "O_RDWR")
	}
	for _, f := range []struct {
		bit  int
		name string
	}{{os.O_CREATE, "O_CREATE"}, {os.O_TRUNC, "O_TRUNC"}, {os.O_APPEND, "O_APPEND"}, {os.O_EXCL, "O_EXCL"}} {
		if flag&f.bit != 0 {
			parts = append(parts, f.name)
		}
	}
	s := parts[0]
	for _, x := range parts[1:] {
		s += "|" + x
	}
	return s
}

// TestAdvFIFO covers line 32: a FIFO with no writer (and one with no reader) is
// refused with not_regular_file by every call that would open it for reading or
// writing, directly or through a link, and none blocks; its metadata is visible.
func TestAdvFIFO(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		must(t, unix.Mkfifo(w.host("fifo"), 0o666))
		w.link("fifo", "lfifo")
		w.mkdir("d")
		w.link("../fifo", "d/lfifo")
		for _, s := range []string{"fifo", "lfifo", "d/lfifo"} {
			for _, c := range specialCalls(w, s) {
				err := noHang(t, c.name+"("+s+")", releaseFIFO(w.host("fifo")), func() error { return c.run(w.ctx, w.dir, s) })
				w.wantCode(c.name+"("+s+")", err, vfs.CodeNotRegular)
			}
		}
		info, err := w.dir.Stat(w.ctx, "lfifo")
		if err != nil || info.Mode()&fs.ModeNamedPipe == 0 {
			t.Errorf("Stat(lfifo) = %v, %v; want a named pipe", info, err)
		}
		names, err := w.dir.List(w.ctx, ".")
		if err != nil || !slices.Contains(names, "fifo") {
			t.Errorf("List = %v, %v", names, err)
		}
		// Chmod of a FIFO is refused like any special file.
		w.wantCode("Chmod(fifo)", w.dir.Chmod(w.ctx, "fifo", 0o600), vfs.CodeNotRegular)
	})
}

// TestAdvSocketAndDevices covers line 33: a unix socket, character devices (a
// /dev/null and a /dev/zero alike, and the 0:0 whiteout) and a block device are
// visible to Stat (an O_PATH handle is harmless) but refused with not_regular_file
// by every call that would open them for reading or writing. Devices are skipped
// where mknod is not permitted.
func TestAdvSocketAndDevices(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		l, err := net.Listen("unix", w.host("sock"))
		if err != nil {
			t.Fatalf("listen on a unix socket: %v", err)
		}
		defer l.Close()
		specials := map[string]fs.FileMode{"sock": fs.ModeSocket}
		for name, dev := range map[string]struct {
			mode        uint32
			major, minr uint32
			want        fs.FileMode
		}{
			"null":     {unix.S_IFCHR, 1, 3, fs.ModeDevice | fs.ModeCharDevice},
			"zero":     {unix.S_IFCHR, 1, 5, fs.ModeDevice | fs.ModeCharDevice},
			"whiteout": {unix.S_IFCHR, 0, 0, fs.ModeDevice | fs.ModeCharDevice},
			"loop":     {unix.S_IFBLK, 7, 0, fs.ModeDevice},
		} {
			if err := unix.Mknod(w.host(name), dev.mode|0o666, int(unix.Mkdev(dev.major, dev.minr))); err != nil {
				t.Logf("mknod %s: %v (skipped)", name, err)
				continue
			}
			specials[name] = dev.want
		}
		for name, want := range specials {
			w.link(name, "l"+name)
			for _, s := range []string{name, "l" + name} {
				info, err := w.dir.Stat(w.ctx, s)
				if err != nil || info.Mode().Type() != want {
					t.Errorf("Stat(%s) = %v, %v; want type %v", s, info, err, want)
				}
				for _, c := range specialCalls(w, s) {
					err := noHang(t, c.name+"("+s+")", func() {}, func() error { return c.run(w.ctx, w.dir, s) })
					w.wantCode(c.name+"("+s+")", err, vfs.CodeNotRegular)
				}
				w.wantCode("Chmod("+s+")", w.dir.Chmod(w.ctx, s, 0o600), vfs.CodeNotRegular)
				w.wantCode("Chtimes("+s+")", w.dir.Chtimes(w.ctx, s, w0, w0), vfs.CodeNotRegular)
			}
		}
	})
}

// TestAdvProcSelfRoot covers line 34: a root at /proc/self. Its magic links
// (root, cwd, exe, fd/N) lead out of it and are refused (openat2: they are magic
// links, RESOLVE_NO_MAGICLINKS; portable: their targets are absolute, or name
// nothing beneath the root); "root/.." is cleaned lexically to the root itself.
func TestAdvProcSelfRoot(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		f := openFS(t, "/proc/self", mode)
		d, _ := dir.New(f)
		// Errors must not name the host path of the root.
		w := &world{t: t, ctx: t.Context(), tmp: "/proc/" + strconv.Itoa(os.Getpid())}
		ctx := t.Context()
		for _, s := range []string{"root", "root/etc/passwd", "root/proc/self/status", "cwd", "cwd/go.mod", "exe", "fd/0", "fd/1", "fd/2", "cwd/."} {
			data, err := d.ReadFile(ctx, s)
			w.wantCode("ReadFile("+s+")", err, vfs.CodeOutside, vfs.CodeNotFound, vfs.CodeTooManyLinks)
			if len(data) > 0 {
				t.Errorf("ReadFile(%s) returned %d bytes from outside /proc/self", s, len(data))
			}
			_, err = d.Stat(ctx, s)
			w.wantCode("Stat("+s+")", err, vfs.CodeOutside, vfs.CodeNotFound, vfs.CodeTooManyLinks)
			_, err = d.List(ctx, s)
			w.wantCode("List("+s+")", err, vfs.CodeOutside, vfs.CodeNotFound, vfs.CodeTooManyLinks, vfs.CodeNotDir)
			_, err = d.Sub(ctx, s)
			w.wantCode("Sub("+s+")", err, vfs.CodeOutside, vfs.CodeNotFound, vfs.CodeTooManyLinks, vfs.CodeNotDir)
		}
		// root and cwd point at absolute paths: refused as leaving the root.
		for _, s := range []string{"root", "cwd", "root/etc", "cwd/x"} {
			_, err := d.Stat(ctx, s)
			w.wantCode("Stat("+s+")", err, vfs.CodeOutside)
		}
		// root/.. is lexical: /proc/self itself.
		names, err := d.List(ctx, "root/..")
		if err != nil || !slices.Contains(names, "status") || slices.Contains(names, "etc") {
			t.Errorf("List(root/..) = %v, %v; want /proc/self's own entries", names, err)
		}
		// Plain files of /proc/self stay readable.
		if b, err := d.ReadFile(ctx, "status"); err != nil || !bytes.Contains(b, []byte("Pid:")) {
			t.Errorf("ReadFile(status) = %.40q, %v", b, err)
		}
		if got, err := d.Readlink(ctx, "root"); err == nil {
			t.Errorf("Readlink(root) = %q; want path_outside_sandbox (absolute target)", got)
		}
	})
}

// TestAdvReadLimit covers line 36: whole-file reads stop at the limit plus one
// byte: a 1 TiB sparse file, a file that keeps growing during the read, and
// endless files (/dev/zero-like devices, FIFOs; refused outright as not regular).
// The Dir's WithMaxReadBytes and the backend's WithMaxFileSize each hold.
func TestAdvReadLimit(t *testing.T) {
	const limit = 4096
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode, physical.WithMaxFileSize(limit))
		small, _ := dir.New(openFS(t, w.root, mode), dir.WithMaxReadBytes(limit))
		big, err := os.Create(w.host("big"))
		if err != nil {
			t.Fatal(err)
		}
		if err := big.Truncate(1 << 40); err != nil {
			big.Close()
			t.Skipf("cannot make a 1 TiB sparse file here: %v", err)
		}
		big.Close()
		_, err = small.ReadFile(w.ctx, "big")
		w.wantCode("Dir(WithMaxReadBytes).ReadFile(big)", err, vfs.CodeTooLarge)
		_, err = fs.ReadFile(small.FS(), "big")
		w.wantCode("FS ReadFile(big)", err, vfs.CodeTooLarge)
		if f, err := small.OpenFile(w.ctx, "big"); err == nil {
			_, err = f.ReadBytes(w.ctx)
			w.wantCode("File.ReadBytes(big)", err, vfs.CodeTooLarge)
		} else {
			t.Errorf("OpenFile(big): %v", err)
		}
		// The backend's limit: a stream read stops after limit+1 bytes.
		f, err := w.fs.OpenFile(w.ctx, p("big"), os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, f)
		f.Close()
		w.wantCode("backend read of big (WithMaxFileSize)", err, vfs.CodeTooLarge)
		if n > limit+1 {
			t.Errorf("backend read returned %d bytes; want at most %d", n, limit+1)
		}
		_, err = w.dir.ReadFile(w.ctx, "big")
		w.wantCode("Dir over WithMaxFileSize: ReadFile(big)", err, vfs.CodeTooLarge)

		// A file growing during the read.
		w.file("grow", "")
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := os.OpenFile(w.host("grow"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer g.Close()
			chunk := bytes.Repeat([]byte("g"), 512)
			for written := 0; !stop.Load() && written < 64<<20; written += len(chunk) {
				g.Write(chunk)
			}
		}()
		for range 50 {
			data, err := small.ReadFile(w.ctx, "grow")
			if err != nil {
				w.wantCode("ReadFile(grow)", err, vfs.CodeTooLarge)
			}
			if len(data) > limit {
				t.Errorf("ReadFile(grow) returned %d bytes; limit %d", len(data), limit)
			}
		}
		stop.Store(true)
		wg.Wait()
		// However far the writer got, make the file larger than the limit.
		g, err := os.OpenFile(w.host("grow"), os.O_WRONLY|os.O_APPEND, 0)
		must(t, err)
		_, err = g.Write(bytes.Repeat([]byte("g"), limit+1))
		must(t, errors.Join(err, g.Close()))
		_, err = small.ReadFile(w.ctx, "grow")
		w.wantCode("ReadFile(grow) once larger than the limit", err, vfs.CodeTooLarge)

		// Endless files are refused before any read.
		must(t, unix.Mkfifo(w.host("fifo"), 0o666))
		endless := []string{"fifo"}
		if err := unix.Mknod(w.host("zero"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err == nil {
			endless = append(endless, "zero")
		} else {
			t.Logf("mknod /dev/zero-like: %v (skipped)", err)
		}
		w.link("/dev/zero", "devzero")
		for _, s := range endless {
			for _, d := range []*dir.Dir{w.dir, small} {
				err := noHang(t, "ReadFile("+s+")", releaseFIFO(w.host("fifo")), func() error { _, err := d.ReadFile(w.ctx, s); return err })
				w.wantCode("ReadFile("+s+")", err, vfs.CodeNotRegular)
			}
		}
		_, err = w.dir.ReadFile(w.ctx, "devzero")
		w.wantCode("ReadFile(devzero -> /dev/zero)", err, vfs.CodeOutside)
	})
}
