package authority

import (
	"context"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/capfs/capfs/vfs"
)

// quotaFS bounds the bytes a backend holds when every change to it comes
// through this wrapper (a temporary workspace on a host directory nobody else
// writes). It charges the size of every name of a regular file (a hard link
// counts again: the physical backend gives a written hard link its own copy)
// and the length of every symlink target: writes and truncations that grow a
// file, links and symlinks are charged before they are made, and fail with
// quota_exceeded past the limit; removals, truncations that shrink a file and
// renames over an existing file give the bytes back. Mutations are serialized,
// so concurrent writers cannot overshoot the limit together. Directories and
// metadata are not charged. Subs share the account.
//
// It keeps the optional interfaces of the backend it wraps ([vfs.Optionals]):
// the read-side ones, Chowner and LinkTimer (metadata, not charged) forward,
// through the vfs helpers that fall back where the backend lacks one;
// StatFSer asks the backend, then reports the account; Locator is there only
// over a Locator (quotaLocator). HostPather is withheld: a host directory
// bound into a sandbox would bypass the account.
type quotaFS struct {
	vfs.Backend
	q *quotaAccount
}

type quotaAccount struct {
	mu    sync.Mutex
	used  int64
	limit int64
}

// quotaBackend is what newQuotaFS returns: a *quotaFS, or a quotaLocator
// over a Locator.
type quotaBackend interface {
	vfs.Backend
	io.Closer
}

func newQuotaFS(b vfs.Backend, limit int64) quotaBackend {
	return wrapQuota(b, &quotaAccount{limit: limit})
}

// wrapQuota wraps b charging q: a quotaLocator when b is a vfs.Locator.
func wrapQuota(b vfs.Backend, q *quotaAccount) quotaBackend {
	f := &quotaFS{Backend: b, q: q}
	if _, ok := b.(vfs.Locator); ok {
		return quotaLocator{f}
	}
	return f
}

// quotaLocator is a quotaFS over a [vfs.Locator].
type quotaLocator struct{ *quotaFS }

// Locate forwards to the wrapped backend: it only reads.
func (f quotaLocator) Locate(ctx context.Context) (vfs.Path, error) {
	return f.Backend.(vfs.Locator).Locate(ctx)
}

func errQuota(op string, p vfs.Path) error {
	return vfs.NewError(vfs.CodeQuota, op, p, "the workspace's quota is used up")
}

// charge takes n more bytes (n may be negative) or fails with quota_exceeded.
// The caller holds q.mu.
func (q *quotaAccount) charge(op string, p vfs.Path, n int64) error {
	if n > 0 && q.used+n > q.limit {
		return errQuota(op, p)
	}
	q.used += n
	if q.used < 0 {
		q.used = 0
	}
	return nil
}

// held is what name p holds on the account: a regular file's size or a
// symlink's target length; 0 for anything else or nothing.
func (f *quotaFS) held(ctx context.Context, p vfs.Path) int64 {
	info, err := f.Backend.Lstat(ctx, p)
	if err != nil {
		return 0
	}
	if info.Mode.IsRegular() || info.Mode&fs.ModeSymlink != 0 {
		return info.Size
	}
	return 0
}

// OpenFile opens p; a file opened for writing is charged for its growth, and
// O_TRUNC gives the old contents back.
func (f *quotaFS) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return f.Backend.OpenFile(ctx, p, flag, perm)
	}
	f.q.mu.Lock()
	defer f.q.mu.Unlock()
	var old int64
	if flag&os.O_TRUNC != 0 {
		if info, err := f.Backend.Stat(ctx, p); err == nil && info.Mode.IsRegular() {
			old = info.Size
		}
	}
	h, err := f.Backend.OpenFile(ctx, p, flag, perm)
	if err != nil {
		return nil, err
	}
	f.q.charge("open", p, -old)
	return newQuotaFile(h, f.q, p, flag&os.O_APPEND != 0), nil
}

// Remove gives back what p held.
func (f *quotaFS) Remove(ctx context.Context, p vfs.Path) error {
	f.q.mu.Lock()
	defer f.q.mu.Unlock()
	n := f.held(ctx, p)
	if err := f.Backend.Remove(ctx, p); err != nil {
		return err
	}
	f.q.charge("remove", p, -n)
	return nil
}

// Rename gives back what a replaced destination held.
func (f *quotaFS) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	f.q.mu.Lock()
	defer f.q.mu.Unlock()
	var n int64
	if flags&vfs.RenameExchange == 0 {
		n = f.held(ctx, to)
	}
	if err := f.Backend.Rename(ctx, from, to, flags); err != nil {
		return err
	}
	f.q.charge("rename", to, -n)
	return nil
}

// Link charges the file's size again.
func (f *quotaFS) Link(ctx context.Context, oldp, newp vfs.Path) error {
	f.q.mu.Lock()
	defer f.q.mu.Unlock()
	n := f.held(ctx, oldp)
	if err := f.q.charge("link", newp, n); err != nil {
		return err
	}
	if err := f.Backend.Link(ctx, oldp, newp); err != nil {
		f.q.charge("link", newp, -n)
		return err
	}
	return nil
}

// Symlink charges the target's length.
func (f *quotaFS) Symlink(ctx context.Context, target string, p vfs.Path) error {
	f.q.mu.Lock()
	defer f.q.mu.Unlock()
	n := int64(len(target))
	if err := f.q.charge("symlink", p, n); err != nil {
		return err
	}
	if err := f.Backend.Symlink(ctx, target, p); err != nil {
		f.q.charge("symlink", p, -n)
		return err
	}
	return nil
}

// Sub shares the account.
func (f *quotaFS) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	b, err := f.Backend.Sub(ctx, p)
	if err != nil {
		return nil, err
	}
	return wrapQuota(b, f.q), nil
}

// quotaFile charges a writable file's growth. It keeps the optional File
// interfaces ([vfs.OptionalFiles]) the wrapped File has (see [vfs.WrapFile])
// but the host descriptor, which it withholds: a write through it would
// bypass the account. (A file opened for reading is not wrapped: it keeps
// its descriptor, which cannot write.)
type quotaFile struct {
	vfs.File
	q         *quotaAccount
	p         vfs.Path
	appending bool
}

// newQuotaFile wraps h, opened at p for writing, charging q.
func newQuotaFile(h vfs.File, q *quotaAccount, p vfs.Path, appending bool) vfs.File {
	return vfs.WrapFile(&quotaFile{File: h, q: q, p: p, appending: appending}, h)
}

// Type forwards to the wrapped File (see [vfs.TypedFile]).
func (h *quotaFile) Type() fs.FileMode { return h.File.(vfs.TypedFile).Type() }

// OpenStat forwards to the wrapped File (see [vfs.OpenStater]).
func (h *quotaFile) OpenStat() (vfs.Info, bool) { return h.File.(vfs.OpenStater).OpenStat() }

// grow charges for bytes written at off (or at the end when appending) and
// returns the charge, which the caller refunds for what was not written.
func (h *quotaFile) grow(op string, off int64, n int) (size, charged int64, err error) {
	info, err := h.File.Stat()
	if err != nil {
		return 0, 0, err
	}
	size = info.Size
	if h.appending || off < 0 {
		off = size
	}
	if end := off + int64(n); end > size {
		charged = end - size
	}
	return size, charged, h.q.charge(op, h.p, charged)
}

func (h *quotaFile) Write(b []byte) (int, error) {
	h.q.mu.Lock()
	defer h.q.mu.Unlock()
	off := int64(-1)
	if !h.appending {
		cur, err := h.File.Seek(0, io.SeekCurrent)
		if err != nil {
			return 0, err
		}
		off = cur
	}
	_, charged, err := h.grow("write", off, len(b))
	if err != nil {
		return 0, err
	}
	n, err := h.File.Write(b)
	if short := int64(len(b) - n); short > 0 {
		h.q.charge("write", h.p, -min(short, charged))
	}
	return n, err
}

func (h *quotaFile) WriteAt(b []byte, off int64) (int, error) {
	h.q.mu.Lock()
	defer h.q.mu.Unlock()
	if off < 0 {
		return h.File.WriteAt(b, off) // the backend's own error
	}
	_, charged, err := h.grow("write", off, len(b))
	if err != nil {
		return 0, err
	}
	n, err := h.File.WriteAt(b, off)
	if short := int64(len(b) - n); short > 0 {
		h.q.charge("write", h.p, -min(short, charged))
	}
	return n, err
}

func (h *quotaFile) Truncate(size int64) error {
	h.q.mu.Lock()
	defer h.q.mu.Unlock()
	info, err := h.File.Stat()
	if err != nil {
		return err
	}
	delta := size - info.Size
	if size < 0 {
		delta = 0
	}
	if err := h.q.charge("truncate", h.p, delta); err != nil {
		return err
	}
	if err := h.File.Truncate(size); err != nil {
		h.q.charge("truncate", h.p, -delta)
		return err
	}
	return nil
}

// ResolveStat, ResolveOpen, ResolveReadDir, ReadDirInfo and HostLinkTarget
// forward to the wrapped backend (reads only; see [vfs.StatResolver],
// [vfs.OpenResolver], [vfs.ListResolver], [vfs.DirInfoReader],
// [vfs.HostLinkResolver]). HostPath is deliberately not forwarded: a host
// directory bound into a sandbox would bypass the account.
func (f *quotaFS) ResolveStat(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, vfs.Info, error) {
	return vfs.ResolveStat(ctx, f.Backend, p, follow)
}

func (f *quotaFS) ResolveOpen(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) (vfs.File, vfs.Location, error) {
	return vfs.ResolveOpen(ctx, f.Backend, p, decide)
}

func (f *quotaFS) ResolveReadDir(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) ([]vfs.DirEntry, vfs.Location, error) {
	return vfs.ResolveReadDir(ctx, f.Backend, p, decide)
}

func (f *quotaFS) ReadDirInfo(ctx context.Context, p vfs.Path) ([]vfs.DirInfo, error) {
	return vfs.ReadDirInfo(ctx, f.Backend, p)
}

func (f *quotaFS) HostLinkTarget(ctx context.Context, p vfs.Path) (vfs.Path, bool, error) {
	if h, ok := f.Backend.(vfs.HostLinkResolver); ok {
		return h.HostLinkTarget(ctx, p)
	}
	return vfs.Path{}, false, nil
}

// Chown and Lchown forward to the wrapped backend (see [vfs.Chown]): ownership
// is metadata, which the account does not charge.
func (f *quotaFS) Chown(ctx context.Context, p vfs.Path, uid, gid int) error {
	return vfs.Chown(ctx, f.Backend, p, uid, gid, true)
}

func (f *quotaFS) Lchown(ctx context.Context, p vfs.Path, uid, gid int) error {
	return vfs.Chown(ctx, f.Backend, p, uid, gid, false)
}

// Close closes the wrapped backend when it has a Close method.
func (f *quotaFS) Close() error {
	if c, ok := f.Backend.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}
