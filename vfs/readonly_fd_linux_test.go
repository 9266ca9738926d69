//go:build linux

package vfs_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/internal/hostfd"
	"github.com/capfs/capfs/vfs"
)

// A host file opened through a read-only view keeps its host descriptor
// (for FUSE passthrough of the run's read-only tool mount), open for
// reading only: by OpenFile, by ResolveOpen, and under a read-only
// Namespace mount.
func TestReadOnlyFileKeepsReadOnlyHostFd(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	pfs, err := physical.New(host)
	if err != nil {
		t.Fatal(err)
	}
	defer pfs.Close()
	ctx := context.Background()
	ro := vfs.ReadOnly(pfs)
	n := vfs.NewNamespace()
	if err := n.Mount(vfs.MustParse("tools"), pfs, vfs.MountOptions{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	opens := map[string]func() (vfs.File, error){
		"OpenFile": func() (vfs.File, error) { return ro.OpenFile(ctx, vfs.MustParse("f"), os.O_RDONLY, 0) },
		"ResolveOpen": func() (vfs.File, error) {
			f, _, err := vfs.ResolveOpen(ctx, ro, vfs.MustParse("f"), func(vfs.Location) error { return nil })
			return f, err
		},
		"Namespace mount": func() (vfs.File, error) {
			return n.OpenFile(ctx, vfs.MustParse("tools/f"), os.O_RDONLY, 0)
		},
	}
	for name, open := range opens {
		f, err := open()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		fd, ok := hostfd.Of(f)
		if !ok {
			t.Errorf("%s: hostfd.Of(%T) gave no descriptor; want the physical file's", name, f)
		} else if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_ACCMODE != unix.O_RDONLY {
			t.Errorf("%s: descriptor %d has flags %#o (%v), want open for reading only", name, fd, fl, err)
		}
		f.Close()
	}
}

// fdBackend is a backend whose files give a host descriptor, open however
// the test opened it, whatever flags the file was opened with.
type fdBackend struct {
	vfs.Backend
	fd int
}

type fdFile struct {
	vfs.File
	fd int
}

func (f fdFile) HostFd(hostfd.Token) (int, bool) { return f.fd, true }

func (b fdBackend) OpenFile(ctx context.Context, p vfs.Path, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := b.Backend.OpenFile(ctx, p, flag, perm)
	if err != nil {
		return nil, err
	}
	return fdFile{f, b.fd}, nil
}

// A read-only view never hands out a descriptor open for writing, though
// the file it wraps gives one (a backend that holds a read-write
// descriptor under a file opened for reading); one open for reading it
// gives.
func TestReadOnlyFileWithholdsWritableHostFd(t *testing.T) {
	for _, c := range []struct {
		flag int
		give bool
	}{{os.O_RDWR, false}, {os.O_WRONLY, false}, {os.O_RDONLY, true}} {
		h, err := os.OpenFile(filepath.Join(t.TempDir(), "x"), c.flag|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		m := memory.New()
		nsWrite(t, m, "f", "data")
		f, err := vfs.ReadOnly(fdBackend{m, int(h.Fd())}).OpenFile(context.Background(), vfs.MustParse("f"), os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if fd, ok := hostfd.Of(f); ok != c.give || ok && fd != int(h.Fd()) {
			t.Errorf("open %#o: hostfd.Of(read-only file) = %d, %v; want a descriptor: %v", c.flag, fd, ok, c.give)
		}
		f.Close()
		h.Close()
	}
}
