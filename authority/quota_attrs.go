package authority

import (
	"context"
	"io/fs"
	"time"

	"github.com/capfs/capfs/vfs"
)

// Lchtimes forwards to the wrapped backend (see [vfs.Lchtimes]): times are
// metadata, which the account does not charge.
func (f *quotaFS) Lchtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	return vfs.Lchtimes(ctx, f.Backend, p, atime, mtime)
}

// StatFS reports the account ([vfs.StatFSer]): the limit and what is left
// of it, for an existing p; entry counts are the wrapped backend's where it
// reports them.
func (f *quotaFS) StatFS(ctx context.Context, p vfs.Path) (vfs.FSStat, error) {
	inner, err := vfs.StatFS(ctx, f.Backend, p)
	switch {
	case err == nil:
	case vfs.CodeOf(err) != vfs.CodeNotSupported:
		return vfs.FSStat{}, err
	default:
		if _, err := f.Backend.Stat(ctx, p); err != nil {
			return vfs.FSStat{}, vfs.Readdress(err, "statfs", p.String(), "")
		}
	}
	f.q.mu.Lock()
	used, limit := f.q.used, f.q.limit
	f.q.mu.Unlock()
	return vfs.FSStat{Total: limit, Free: max(limit-used, 0), Files: inner.Files, FreeFiles: inner.FreeFiles}, nil
}

// Chmod forwards to the wrapped File ([vfs.AttrFile]): the mode is not
// charged.
func (h *quotaFile) Chmod(mode fs.FileMode) error { return h.File.(vfs.AttrFile).Chmod(mode) }

// Chtimes forwards to the wrapped File ([vfs.AttrFile]).
func (h *quotaFile) Chtimes(atime, mtime time.Time) error {
	return h.File.(vfs.AttrFile).Chtimes(atime, mtime)
}
