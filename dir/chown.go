package dir

import (
	"context"

	"github.com/capfs/capfs/vfs"
)

// Chown sets the numeric owner and group of path, following a symlink; -1
// leaves an id unchanged. It is a write (policy.OpChown), decided on the path
// it reaches like every write, refused by a read-only Dir (read_only), and
// audited. It works where the backend keeps ownership (vfs.Chowner: the
// physical backend) and fails with not_supported elsewhere; the host decides
// who may give a file away (fs_permission_denied for an unprivileged process).
// An id below -1 fails with invalid_path.
func (d *Dir) Chown(ctx context.Context, path string, uid, gid int) error {
	c := &call{sp: specChown, path: path}
	return d.do(ctx, c, func(ctx context.Context) error {
		return vfs.Chown(ctx, d.s.b, c.rp, uid, gid, true)
	})
}

// Lchown is Chown of path's own entry: a final symlink is changed itself, not
// followed (a trailing slash still follows it, as in POSIX). It is decided on
// the entry's canonical path.
func (d *Dir) Lchown(ctx context.Context, path string, uid, gid int) error {
	c := &call{sp: specLchown, path: path}
	return d.do(ctx, c, func(ctx context.Context) error {
		return vfs.Chown(ctx, d.s.b, c.rp, uid, gid, false)
	})
}

// Chown implements vfs.Chowner as Dir.Chown does.
func (v *backendView) Chown(ctx context.Context, p vfs.Path, uid, gid int) error {
	return v.do(ctx, specViewChown, p, func(ctx context.Context, rp vfs.Path) error {
		return vfs.Chown(ctx, v.d.s.b, rp, uid, gid, true)
	})
}

// Lchown implements vfs.Chowner as Dir.Lchown does.
func (v *backendView) Lchown(ctx context.Context, p vfs.Path, uid, gid int) error {
	return v.do(ctx, specViewLchown, p, func(ctx context.Context, rp vfs.Path) error {
		return vfs.Chown(ctx, v.d.s.b, rp, uid, gid, false)
	})
}
