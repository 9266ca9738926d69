package vfs_test

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// The conformance suite wants New to return an empty, writable root, and compares
// whole trees with a host directory. A namespace with a nested mount lists that
// mount's top directory at its root, so the runs below look at the namespace in one
// of two ways, each a thin test view that forwards every call unchanged:
//
//   - hideRoot: the namespace itself, with the nested mount's top directory (a
//     reserved name the suite never uses) left out of the root listing;
//   - underMount: the namespace seen from a mount point below its root, every path
//     prefixed with that mount point. The view checks that every error (of the
//     namespace and of its Files) is addressed exactly with the namespace path the
//     call used, then re-addresses it to the view, as a Dir would.

// reserved is the top directory of the nested mount in hideRoot runs.
const reserved = "ns-reserved"

// TestNamespaceConformance runs the conformance suite over namespaces of nested
// memory mounts.
func TestNamespaceConformance(t *testing.T) {
	// pair returns a namespace with a memory backend at the root and another at
	// top/n.
	pair := func(t *testing.T, top string) *vfs.Namespace {
		n := vfs.NewNamespace()
		nsMount(t, n, ".", memory.New(), vfs.MountOptions{})
		nsMount(t, n, top+"/n", memory.New(), vfs.MountOptions{})
		return n
	}
	run := func(name string, newBackend func(t *testing.T) vfs.Backend) {
		t.Run(name, func(t *testing.T) {
			vfstest.TestBackend(t, vfstest.Config{New: newBackend, Goroutines: 4, OpsPerGoroutine: 100})
		})
	}
	// (a) The root mount of a namespace that also has a mount at ns-reserved/n.
	run("RootMount", func(t *testing.T) vfs.Backend {
		return hideRoot{pair(t, reserved)}
	})
	// (b) The mount at m/n of a namespace whose root is another memory backend.
	run("NestedMount", func(t *testing.T) vfs.Backend {
		return &underMount{t: t, n: pair(t, "m"), at: nsP("m/n")}
	})
	// (c) A namespace mounted at the root of another namespace.
	run("NamespaceAtRoot", func(t *testing.T) vfs.Backend {
		outer := vfs.NewNamespace()
		nsMount(t, outer, ".", pair(t, reserved), vfs.MountOptions{})
		return hideRoot{outer}
	})
	// (d) The m/n mount of a namespace mounted at "in" of another namespace.
	run("NamespaceInNamespace", func(t *testing.T) vfs.Backend {
		outer := vfs.NewNamespace()
		nsMount(t, outer, ".", memory.New(), vfs.MountOptions{})
		nsMount(t, outer, "in", pair(t, "m"), vfs.MountOptions{})
		return &underMount{t: t, n: outer, at: nsP("in/m/n")}
	})
}

// hideRoot is a Backend whose root listing leaves out the reserved name.
type hideRoot struct{ vfs.Backend }

func (h hideRoot) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	ents, err := h.Backend.ReadDir(ctx, p)
	if err != nil || !p.IsRoot() {
		return ents, err
	}
	return slices.DeleteFunc(slices.Clone(ents), func(e vfs.DirEntry) bool { return e.Name == reserved }), nil
}

func (h hideRoot) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	s, err := h.Backend.Sub(ctx, p)
	if err == nil && p.IsRoot() {
		s = hideRoot{s}
	}
	return s, err
}

// underMount is namespace n seen from directory at.
type underMount struct {
	t  *testing.T
	n  *vfs.Namespace
	at vfs.Path
}

func (u *underMount) full(p vfs.Path) vfs.Path {
	if p.IsResolved() {
		return u.at.Join(p).Resolved()
	}
	return u.at.Join(p)
}

func (u *underMount) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	loc, err := u.n.Resolve(ctx, u.full(p), follow)
	if err != nil {
		return loc, u.back(err, p, nil)
	}
	rel, ok := loc.Path.TrimPrefix(u.at)
	if !ok {
		u.t.Errorf("Resolve(%s) left the mount: %s", p, loc.Path)
	}
	loc.Path = rel
	return loc, nil
}

// back checks that err is addressed with the namespace paths of p (and q, for the
// two-path operations) and re-addresses it to the view.
func (u *underMount) back(err error, p vfs.Path, q *vfs.Path) error {
	var e *vfs.Error
	if !errors.As(err, &e) {
		return err
	}
	wantPath, wantDest, dest := u.full(p).String(), "", ""
	if q != nil {
		wantDest, dest = u.full(*q).String(), q.String()
	}
	if e.Path != wantPath || e.Dest != wantDest {
		u.t.Errorf("namespace error %v: addressed %q -> %q, want %q -> %q", err, e.Path, e.Dest, wantPath, wantDest)
	}
	return vfs.Readdress(e, "", p.String(), dest)
}

func (u *underMount) named(info vfs.Info, p vfs.Path) vfs.Info {
	if p.IsRoot() {
		info.Name = "." // the namespace names a mount point after itself
	}
	return info
}

func (u *underMount) Features() vfs.Features { return u.n.Features() }

func (u *underMount) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	info, err := u.n.Stat(ctx, u.full(p))
	return u.named(info, p), u.back(err, p, nil)
}

func (u *underMount) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	info, err := u.n.Lstat(ctx, u.full(p))
	return u.named(info, p), u.back(err, p, nil)
}

func (u *underMount) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	ents, err := u.n.ReadDir(ctx, u.full(p))
	return ents, u.back(err, p, nil)
}

func (u *underMount) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := u.n.OpenFile(ctx, u.full(p), flag, perm)
	if err != nil {
		return nil, u.back(err, p, nil)
	}
	return &underFile{File: f, u: u, p: p}, nil
}

func (u *underMount) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	return u.back(u.n.Mkdir(ctx, u.full(p), perm), p, nil)
}

func (u *underMount) Remove(ctx context.Context, p vfs.Path) error {
	return u.back(u.n.Remove(ctx, u.full(p)), p, nil)
}

func (u *underMount) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	return u.back(u.n.Rename(ctx, u.full(from), u.full(to), flags), from, &to)
}

func (u *underMount) Symlink(ctx context.Context, target string, p vfs.Path) error {
	return u.back(u.n.Symlink(ctx, target, u.full(p)), p, nil)
}

func (u *underMount) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	s, err := u.n.Readlink(ctx, u.full(p))
	return s, u.back(err, p, nil)
}

func (u *underMount) Link(ctx context.Context, oldp, newp vfs.Path) error {
	return u.back(u.n.Link(ctx, u.full(oldp), u.full(newp)), oldp, &newp)
}

func (u *underMount) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	return u.back(u.n.Chmod(ctx, u.full(p), mode), p, nil)
}

func (u *underMount) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	return u.back(u.n.Chtimes(ctx, u.full(p), atime, mtime), p, nil)
}

func (u *underMount) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	s, err := u.n.Sub(ctx, u.full(p))
	return s, u.back(err, p, nil)
}

// underFile is a File of an underMount view: its errors must carry the namespace
// path it was opened with.
type underFile struct {
	vfs.File
	u *underMount
	p vfs.Path
}

func (f *underFile) Read(b []byte) (int, error) {
	n, err := f.File.Read(b)
	return n, f.u.back(err, f.p, nil)
}

func (f *underFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(b, off)
	return n, f.u.back(err, f.p, nil)
}

func (f *underFile) Write(b []byte) (int, error) {
	n, err := f.File.Write(b)
	return n, f.u.back(err, f.p, nil)
}

func (f *underFile) WriteAt(b []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(b, off)
	return n, f.u.back(err, f.p, nil)
}

func (f *underFile) Seek(off int64, whence int) (int64, error) {
	n, err := f.File.Seek(off, whence)
	return n, f.u.back(err, f.p, nil)
}

func (f *underFile) Stat() (vfs.Info, error) {
	info, err := f.File.Stat()
	return f.u.named(info, f.p), f.u.back(err, f.p, nil)
}

func (f *underFile) Truncate(size int64) error { return f.u.back(f.File.Truncate(size), f.p, nil) }
func (f *underFile) Sync() error               { return f.u.back(f.File.Sync(), f.p, nil) }
func (f *underFile) Close() error              { return f.u.back(f.File.Close(), f.p, nil) }

// TestReadOnlyConformance runs the suite's read-only checks over the ReadOnly
// wrapper, a namespace whose only mount is read-only, and an empty namespace.
func TestReadOnlyConformance(t *testing.T) {
	for name, newBackend := range map[string]func(t *testing.T) vfs.Backend{
		"ReadOnly": func(t *testing.T) vfs.Backend { return vfs.ReadOnly(memWith(t, "f=f", "d/")) },
		"ReadOnlyMount": func(t *testing.T) vfs.Backend {
			n := vfs.NewNamespace()
			nsMount(t, n, ".", memWith(t, "f=f", "d/"), vfs.MountOptions{ReadOnly: true})
			return n
		},
		"EmptyNamespace": func(t *testing.T) vfs.Backend { return vfs.NewNamespace() },
	} {
		t.Run(name, func(t *testing.T) {
			if !newBackend(t).Features().ReadOnly {
				t.Fatal("backend is not ReadOnly")
			}
			vfstest.TestBackend(t, vfstest.Config{New: newBackend})
		})
	}
}
