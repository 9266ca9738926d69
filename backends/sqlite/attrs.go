package sqlite

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
	const op = "lchtimes"
	st := f.st
	return st.mutate(ctx, op, p, func() (*batch, error) {
		st.mu.RLock()
		defer st.mu.RUnlock()
		r, err := f.resolve(ctx, p, false, op)
		if err != nil {
			return nil, err
		}
		if !r.Found {
			return nil, vfs.NewError(vfs.CodeNotFound, op, p, "")
		}
		return st.setMtime(r.Node, mtime, op, p)
	})
}

// setMtime sets n's modification time unless mtime is zero, as one
// operation's statement; inside mutate.
func (s *store) setMtime(n *node, mtime time.Time, op string, p vfs.Path) (*batch, error) {
	if mtime.IsZero() {
		return nil, nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	b, err := s.exec(op, p, func() error {
		return s.w.x(s.w.setMtime, mtime.Unix(), mtime.Nanosecond(), n.ino)
	})
	if err != nil {
		return nil, err
	}
	n.mtime = time.Unix(mtime.Unix(), int64(mtime.Nanosecond()))
	return b, nil
}

// StatFS reports the quota (vfs.StatFSer): its size and what is left of it,
// for every path. Without a quota the file knows no capacity: not_supported.
func (f *FS) StatFS(ctx context.Context, p vfs.Path) (vfs.FSStat, error) {
	const op = "statfs"
	if _, err := f.Stat(ctx, p); err != nil {
		return vfs.FSStat{}, vfs.Readdress(err, op, p.String(), "")
	}
	q := f.st.cfg.quota
	if q <= 0 {
		return vfs.FSStat{}, vfs.NewError(vfs.CodeNotSupported, op, p, "no quota: the sqlite backend knows no capacity")
	}
	return vfs.FSStat{Total: q, Free: max(q-f.st.used.Load(), 0)}, nil
}

// attr runs fn, one change of h's node, as one operation: on the open file,
// whatever names it has now.
func (h *handle) attr(op string, fn func() (*batch, error)) error {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return h.fail(vfs.CodeClosed, op, "")
	}
	return h.st.mutateNode(op, h.p(), fn)
}

// Chmod sets the permission, setuid, setgid and sticky bits of the file h
// opened (vfs.AttrFile, fchmod).
func (h *handle) Chmod(mode fs.FileMode) error {
	const op = "fchmod"
	return h.attr(op, func() (*batch, error) { return h.st.setPerm(h.n, mode, op, h.p()) })
}

// setPerm sets n's permission, setuid, setgid and sticky bits, as one
// operation's statement; inside mutate.
func (s *store) setPerm(n *node, mode fs.FileMode, op string, p vfs.Path) (*batch, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	perm := mode & permBits
	b, err := s.exec(op, p, func() error { return s.w.x(s.w.setMode, unixMode(n.typ, perm), n.ino) })
	if err != nil {
		return nil, err
	}
	n.perm = perm
	return b, nil
}

// Chtimes sets the modification time of the file h opened unless mtime is
// zero (vfs.AttrFile, futimens). Access times are not kept.
func (h *handle) Chtimes(atime, mtime time.Time) error {
	return h.attr("futimens", func() (*batch, error) { return h.st.setMtime(h.n, mtime, "futimens", h.p()) })
}
