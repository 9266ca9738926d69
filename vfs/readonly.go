package vfs

import (
	"context"
	"io/fs"
	"os"
	"sync/atomic"
	"time"

	"github.com/capfs/capfs/internal/hostfd"
)

// writeFlags are the OpenFile flags that can modify a file or the tree.
const writeFlags = os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_TRUNC | os.O_APPEND

// ReadOnly returns a Backend that serves b's reads and refuses every mutation.
//
// Mutations fail with read_only and change nothing: Mkdir, Remove, Rename,
// Symlink, Link, Chmod, Chtimes, Chown, Lchown, Lchtimes, and OpenFile with
// any of O_WRONLY, O_RDWR, O_CREATE, O_TRUNC or O_APPEND. The refusal does
// not consult b, so it says nothing about whether the path exists.
//
// Files opened through it are wrapped so that Write, WriteAt and Truncate
// fail with read_only too, and so do their Chmod and Chtimes ([AttrFile]).
// They keep the optional File interfaces ([OptionalFiles]) of b's files; the
// host descriptor answers only where it is open for reading only. Sub
// returns a read-only view of b's Sub. Features reports b's features with
// ReadOnly set.
//
// ReadOnly is idempotent: wrapping a backend ReadOnly returned gives it back as is.
//
// The result keeps every optional interface of [Optionals]. The read-side ones
// forward to b, through the helpers that fall back when b lacks one
// ([StatFSer] among them). [Chowner] and [LinkTimer] refuse with read_only.
// [Locator] is there only when b is a Locator, since nothing can answer it
// otherwise. HostPath forwards to b when b is a [HostPather] (reporting false
// otherwise), so a host can still bind the tree into a sandbox without
// copying. Such a host must bind it read-only, as Features().ReadOnly says.
func ReadOnly(b Backend) Backend {
	switch b.(type) {
	case *readOnlyBackend, readOnlyLocator:
		return b
	}
	r := &readOnlyBackend{b: b}
	if _, ok := b.(Locator); ok {
		return readOnlyLocator{r}
	}
	return r
}

// readOnlyBackend is the Backend ReadOnly returns for a b that is no Locator.
type readOnlyBackend struct{ b Backend }

// readOnlyLocator is the Backend ReadOnly returns for a Locator.
type readOnlyLocator struct{ *readOnlyBackend }

// Locate forwards to the wrapped backend: it only reads.
func (r readOnlyLocator) Locate(ctx context.Context) (Path, error) {
	return r.b.(Locator).Locate(ctx)
}

// wrapped is the backend r wraps.
func (r *readOnlyBackend) wrapped() Backend { return r.b }

func denyRO(op string, p Path) error {
	return &Error{Code: CodeReadOnly, Op: op, Path: p.String(), msg: "read-only"}
}

func denyRO2(op string, from, to Path) error {
	return &Error{Code: CodeReadOnly, Op: op, Path: from.String(), Dest: to.String(), msg: "read-only"}
}

func (r *readOnlyBackend) Features() Features {
	f := r.b.Features()
	f.ReadOnly = true
	return f
}

func (r *readOnlyBackend) Stat(ctx context.Context, p Path) (Info, error) { return r.b.Stat(ctx, p) }

func (r *readOnlyBackend) Lstat(ctx context.Context, p Path) (Info, error) {
	return r.b.Lstat(ctx, p)
}

func (r *readOnlyBackend) ReadDir(ctx context.Context, p Path) ([]DirEntry, error) {
	return r.b.ReadDir(ctx, p)
}

func (r *readOnlyBackend) OpenFile(ctx context.Context, p Path, flag int, perm fs.FileMode) (File, error) {
	if flag&writeFlags != 0 {
		return nil, denyRO("open", p)
	}
	f, err := r.b.OpenFile(ctx, p, flag, perm)
	if err != nil {
		return nil, err
	}
	return readOnly(f, p), nil
}

func (r *readOnlyBackend) Mkdir(ctx context.Context, p Path, perm fs.FileMode) error {
	return denyRO("mkdir", p)
}

func (r *readOnlyBackend) Remove(ctx context.Context, p Path) error { return denyRO("remove", p) }

func (r *readOnlyBackend) Rename(ctx context.Context, from, to Path, flags RenameFlags) error {
	return denyRO2("rename", from, to)
}

func (r *readOnlyBackend) Symlink(ctx context.Context, target string, p Path) error {
	return denyRO("symlink", p)
}

func (r *readOnlyBackend) Readlink(ctx context.Context, p Path) (string, error) {
	return r.b.Readlink(ctx, p)
}

func (r *readOnlyBackend) Link(ctx context.Context, oldp, newp Path) error {
	return denyRO2("link", oldp, newp)
}

func (r *readOnlyBackend) Chmod(ctx context.Context, p Path, mode fs.FileMode) error {
	return denyRO("chmod", p)
}

func (r *readOnlyBackend) Chtimes(ctx context.Context, p Path, atime, mtime time.Time) error {
	return denyRO("chtimes", p)
}

func (r *readOnlyBackend) Sub(ctx context.Context, p Path) (Backend, error) {
	s, err := r.b.Sub(ctx, p)
	if err != nil {
		return nil, err
	}
	return ReadOnly(s), nil
}

// Resolve forwards to the wrapped backend: resolution reads only.
func (r *readOnlyBackend) Resolve(ctx context.Context, p Path, follow bool) (Location, error) {
	return r.b.Resolve(ctx, p, follow)
}

// ResolveOpen forwards to the wrapped backend (see [ResolveOpen]), which only
// reads, and returns the file OpenFile would: writes to it fail with read_only,
// naming p.
func (r *readOnlyBackend) ResolveOpen(ctx context.Context, p Path, decide func(Location) error) (File, Location, error) {
	f, loc, err := ResolveOpen(ctx, r.b, p, decide)
	if err != nil {
		return nil, loc, err
	}
	return readOnly(f, p), loc, nil
}

// ResolveStat forwards to the wrapped backend (see [ResolveStat]).
func (r *readOnlyBackend) ResolveStat(ctx context.Context, p Path, follow bool) (Location, Info, error) {
	return ResolveStat(ctx, r.b, p, follow)
}

// ResolveReadDir forwards to the wrapped backend (see [ResolveReadDir]). It
// only reads.
func (r *readOnlyBackend) ResolveReadDir(ctx context.Context, p Path, decide func(Location) error) ([]DirEntry, Location, error) {
	return ResolveReadDir(ctx, r.b, p, decide)
}

// HostLinkTarget forwards to the wrapped backend when it is a HostLinkResolver
// (ok false otherwise: a backend without host links has no such target).
func (r *readOnlyBackend) HostLinkTarget(ctx context.Context, p Path) (Path, bool, error) {
	if h, ok := r.b.(HostLinkResolver); ok {
		return h.HostLinkTarget(ctx, p)
	}
	return Path{}, false, nil
}

// HostPath forwards to the wrapped backend when it is a HostPather.
func (r *readOnlyBackend) HostPath() (string, bool) {
	if h, ok := r.b.(HostPather); ok {
		return h.HostPath()
	}
	return "", false
}

// readOnly wraps f, opened at p, as a readOnlyFile with the optional File
// interfaces f has (see [WrapFile]).
func readOnly(f File, p Path) File {
	return WrapFile(&readOnlyFile{File: f, path: p}, f)
}

// Type forwards to the wrapped File (see [TypedFile]).
func (f *readOnlyFile) Type() fs.FileMode { return f.File.(TypedFile).Type() }

// HostFd forwards to the wrapped File (see package hostfd) only when the
// descriptor is open for reading only: writes through it would bypass
// read_only. The wrapped File was opened without write flags (OpenFile
// refuses them; ResolveOpen opens for reading), but a backend may hold a
// descriptor open for more (the physical backend opens O_TRUNC with O_RDWR),
// so the descriptor's own access mode decides.
func (f *readOnlyFile) HostFd(t hostfd.Token) (int, bool) {
	fd, ok := f.File.(hostfd.Filer).HostFd(t)
	if !ok || !readOnlyFd(fd) {
		return -1, false
	}
	return fd, true
}

// readOnlyFile is a File opened through a ReadOnly backend: reads pass through,
// writes fail with read_only (or closed, once closed).
type readOnlyFile struct {
	File
	path   Path
	closed atomic.Bool
}

func (f *readOnlyFile) deny(op string) error {
	if f.closed.Load() {
		return &Error{Code: CodeClosed, Op: op, Path: f.path.String(), Err: fs.ErrClosed}
	}
	return denyRO(op, f.path)
}

func (f *readOnlyFile) Write(b []byte) (int, error) { return 0, f.deny("write") }

// OpenStat forwards to the wrapped File (see [OpenStater]).
func (f *readOnlyFile) OpenStat() (Info, bool) { return OpenStat(f.File) }

func (f *readOnlyFile) WriteAt(b []byte, off int64) (int, error) { return 0, f.deny("write") }

func (f *readOnlyFile) Truncate(size int64) error { return f.deny("truncate") }

func (f *readOnlyFile) Close() error {
	f.closed.Store(true)
	return f.File.Close()
}
