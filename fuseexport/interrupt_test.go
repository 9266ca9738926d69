//go:build linux

package fuseexport

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/backends/overlay"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// interruptWindow is how long the test backends hold a request open after
// telling the test, which signals the calling thread meanwhile: the kernel
// then sends FUSE_INTERRUPT, and go-fuse cancels the request's context.
const interruptWindow = 200 * time.Millisecond

// interruptedAfter is a backend that, once a creating call has made its
// change, holds the request open (interruptWindow) before it returns: the
// window in which a request can be interrupted after its change is made.
type interruptedAfter struct {
	vfs.Backend
	made chan struct{} // a change was made, the request waits
}

func (b *interruptedAfter) wait(ctx context.Context) { hold(ctx, b.made) }

// hold tells the test on told that the server is in a request, then holds
// the request open for interruptWindow (or until its context is canceled,
// after which the rest of it fails at once).
func hold(ctx context.Context, told chan<- struct{}) {
	told <- struct{}{}
	select {
	case <-ctx.Done():
	case <-time.After(interruptWindow):
	}
}

// signaledDuring makes call on a thread of its own and, once the server says
// on held that it is in the request, signals that thread with SIGURG (the Go
// runtime's own preemption signal, which it ignores for a thread not running
// Go code): the kernel sees a signal and interrupts the request. It returns
// call's error.
func signaledDuring(t *testing.T, held <-chan struct{}, call func() error) error {
	t.Helper()
	errc, tidc := make(chan error, 1), make(chan int, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tidc <- unix.Gettid()
		errc <- call()
	}()
	tid := <-tidc
	select {
	case <-held:
	case err := <-errc:
		t.Fatalf("the call returned %v before the server held its request", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the server never held the call's request")
	}
	if err := unix.Tgkill(os.Getpid(), tid, unix.SIGURG); err != nil {
		t.Fatal(err)
	}
	return <-errc
}

// openClose opens p with flags (and mode) and closes it.
func openClose(p string, flags int, mode uint32) error {
	fd, err := unix.Open(p, flags|unix.O_CLOEXEC, mode)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func (b *interruptedAfter) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	err := b.Backend.Mkdir(ctx, p, perm)
	if err == nil {
		b.wait(ctx)
	}
	return err
}

func (b *interruptedAfter) Symlink(ctx context.Context, target string, p vfs.Path) error {
	err := b.Backend.Symlink(ctx, target, p)
	if err == nil {
		b.wait(ctx)
	}
	return err
}

func (b *interruptedAfter) Link(ctx context.Context, oldp, newp vfs.Path) error {
	err := b.Backend.Link(ctx, oldp, newp)
	if err == nil {
		b.wait(ctx)
	}
	return err
}

func (b *interruptedAfter) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := b.Backend.OpenFile(ctx, p, flag, perm)
	if err == nil && flag&os.O_CREATE != 0 {
		b.wait(ctx)
	}
	return f, err
}

// TestInterruptAfterChange: a creating request interrupted after its change
// is made (the calling thread takes a signal while the server is still
// answering) is answered as made. Answering EINTR instead made the caller
// retry a creation that had succeeded and fail with EEXIST, the cause of a
// rare failure of the conformance suite through a mount. (Before the server
// ignored interrupts, mkdir, symlink and link failed here with EINTR.)
func TestInterruptAfterChange(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "f"), []byte("F"), 0o644); err != nil {
		t.Fatal(err)
	}
	pb, err := physical.New(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pb.Close() })
	b := &interruptedAfter{Backend: pb, made: make(chan struct{})}
	d, _ := dir.New(b)
	mp, _ := mountT(t, d, Options{})
	for _, c := range []struct {
		name string
		call func(p string) error
	}{
		{"mkdir", func(p string) error { return unix.Mkdir(p, 0o755) }},
		{"symlink", func(p string) error { return unix.Symlink("f", p) }},
		{"link", func(p string) error { return unix.Link(filepath.Join(mp, "f"), p) }},
		{"create", func(p string) error { return openClose(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644) }},
		{"mknod", func(p string) error { return unix.Mknod(p, unix.S_IFREG|0o644, 0) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(mp, "new-"+c.name)
			if err := signaledDuring(t, b.made, func() error { return c.call(p) }); err != nil {
				t.Errorf("%s interrupted after its change: %v; want it answered as made", c.name, err)
			}
			if _, err := os.Lstat(filepath.Join(host, "new-"+c.name)); err != nil {
				t.Errorf("%s: nothing made on the host: %v", c.name, err)
			}
		})
	}
}

// cancelAfterFirst is a lower layer whose first successful Lstat of path
// cancels the context of the call: a request interrupted between two of the
// Overlay's lookups.
type cancelAfterFirst struct {
	vfs.Backend
	path   string
	cancel context.CancelFunc
	fired  atomic.Bool
}

func (b *cancelAfterFirst) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	info, err := b.Backend.Lstat(ctx, p)
	if err == nil && p.Raw() == b.path && b.fired.CompareAndSwap(false, true) {
		b.cancel()
	}
	return info, err
}

// TestOverlayCanceledMidway: an Overlay call canceled after its first look at
// the lower layer fails with canceled and changes nothing; a canceled
// existence check is never read as "absent" (a removal used to report success
// having removed nothing, and no whiteout).
func TestOverlayCanceledMidway(t *testing.T) {
	for _, op := range []string{"remove", "rename"} {
		t.Run(op, func(t *testing.T) {
			host := t.TempDir()
			for _, f := range []string{"a", "b"} {
				if err := os.WriteFile(filepath.Join(host, f), []byte(f), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			pb, err := physical.New(host)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pb.Close() })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			low := &cancelAfterFirst{Backend: pb, path: "a", cancel: cancel}
			ov, err := overlay.NewOverlay(low, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ov.Close() })
			a := vfs.MustParse("a")
			if op == "remove" {
				err = ov.Remove(ctx, a)
			} else {
				err = ov.Rename(ctx, a, vfs.MustParse("c"), 0)
			}
			if !low.fired.Load() {
				t.Fatal("the lower layer was never asked: this tested nothing")
			}
			if vfs.CodeOf(err) != vfs.CodeCanceled {
				t.Errorf("%s canceled midway = %v; want canceled", op, err)
			}
			bg := context.Background()
			for _, name := range []string{"a", "b"} {
				info, err := ov.Lstat(bg, vfs.MustParse(name))
				if err != nil || !info.Mode.IsRegular() {
					t.Errorf("after a canceled %s, %s is %v, %v; want the lower file", op, name, info.Mode, err)
				}
			}
			if changes, err := ov.Changes(bg); err != nil || len(changes) != 0 {
				t.Errorf("after a canceled %s the overlay holds changes %v (%v)", op, changes, err)
			}
		})
	}
}

// slowLookup is a backend whose Lstat of one name holds the request open
// (interruptWindow) before it answers.
type slowLookup struct {
	vfs.Backend
	name    string
	waiting chan struct{}
}

func (b *slowLookup) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	if p.Base() == b.name {
		hold(ctx, b.waiting)
	}
	return b.Backend.Lstat(ctx, p)
}

// TestSignalDuringLookup: a process that takes a signal while the server
// looks a name up gets the answer, not EINTR. Programs do not retry a stat or
// an open of a file on EINTR (Linux's NFS likewise lets only a fatal signal
// interrupt a request), and a build's make takes SIGCHLD whenever a job ends.
// (Before the server ignored interrupts, both failed here with EINTR.)
func TestSignalDuringLookup(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "slow"), []byte("S"), 0o644); err != nil {
		t.Fatal(err)
	}
	pb, err := physical.New(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pb.Close() })
	b := &slowLookup{Backend: pb, name: "slow", waiting: make(chan struct{}, 16)}
	d, _ := dir.New(b)
	mp, _ := mountT(t, d, Options{EntryTimeout: -1, AttrTimeout: -1, NegativeTimeout: -1})
	for _, c := range []struct {
		name string
		call func(p string) error
	}{
		{"stat", func(p string) error { var st unix.Stat_t; return unix.Lstat(p, &st) }},
		{"open", func(p string) error { return openClose(p, unix.O_RDONLY, 0) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := signaledDuring(t, b.waiting, func() error { return c.call(filepath.Join(mp, "slow")) }); err != nil {
				t.Errorf("%s with a signal during the lookup: %v; want the file", c.name, err)
			}
			for len(b.waiting) > 0 {
				<-b.waiting
			}
		})
	}
}
