package memory

import (
	"context"
	"io/fs"
	"time"

	"github.com/capfs/capfs/vfs"
)

var (
	_ vfs.LinkTimer = (*FS)(nil)
	_ vfs.StatFSer  = (*FS)(nil)
	_ vfs.AttrFile  = (*handle)(nil)
)

// Lchtimes sets the modification time of p's own entry, a symlink itself
// included (vfs.LinkTimer), unless mtime is zero. Access times are not kept.
func (f *FS) Lchtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	return f.chtimes(ctx, "lchtimes", p, false, mtime)
}

// chtimes is Chtimes (follow) and Lchtimes: p's modification time set to
// mtime unless it is zero.
func (f *FS) chtimes(ctx context.Context, op string, p vfs.Path, follow bool, mtime time.Time) error {
	if err := ctx.Err(); err != nil {
		return canceled(op, p, err)
	}
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	r, err := f.lookup(ctx, p, follow, op)
	if err != nil {
		return err
	}
	if !r.Found {
		return vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	r.Node.touch(mtime)
	return nil
}

// touch sets n's modification time unless mtime is zero.
func (n *node) touch(mtime time.Time) {
	if mtime.IsZero() {
		return
	}
	n.mu.Lock()
	n.beginMeta()
	n.setMtime(mtime)
	n.endMeta()
	n.mu.Unlock()
}

// StatFS reports the quota (vfs.StatFSer): its size and what is left of it,
// for every path. Without a quota the store knows no capacity:
// not_supported.
func (f *FS) StatFS(ctx context.Context, p vfs.Path) (vfs.FSStat, error) {
	const op = "statfs"
	if err := ctx.Err(); err != nil {
		return vfs.FSStat{}, canceled(op, p, err)
	}
	if _, err := f.Stat(ctx, p); err != nil {
		return vfs.FSStat{}, vfs.Readdress(err, op, p.String(), "")
	}
	q := f.st.quota
	if q <= 0 {
		return vfs.FSStat{}, vfs.NewError(vfs.CodeNotSupported, op, p, "no quota: the memory backend knows no capacity")
	}
	return vfs.FSStat{Total: q, Free: max(q-f.st.used.Load(), 0)}, nil
}

// Chmod sets the permission, setuid, setgid and sticky bits of the node h
// opened, whatever names it has now (vfs.AttrFile, fchmod).
func (h *handle) Chmod(mode fs.FileMode) error {
	if h.closed.Load() {
		return h.fail(vfs.CodeClosed, "fchmod", "")
	}
	n := h.n
	n.mu.Lock()
	n.beginMeta()
	n.perm.Store(uint32(mode & permBits))
	n.endMeta()
	n.mu.Unlock()
	return nil
}

// Chtimes sets the modification time of the node h opened unless mtime is
// zero (vfs.AttrFile, futimens). Access times are not kept.
func (h *handle) Chtimes(atime, mtime time.Time) error {
	if h.closed.Load() {
		return h.fail(vfs.CodeClosed, "futimens", "")
	}
	h.n.touch(mtime)
	return nil
}
