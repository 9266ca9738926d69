package sqlite

import (
	"context"
	"io/fs"
	"time"

	"github.com/capfs/capfs/vfs"
)

// isAncestor reports whether directory a is d or one of d's ancestors.
func isAncestor(a, d *node) bool {
	for ; d != nil; d = d.parent {
		if d == a {
			return true
		}
	}
	return false
}

// Rename moves from to to; see vfs.Backend. It is one operation: the move, a
// replaced destination's removal and both directories' times commit together.
func (f *FS) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	const op = "rename"
	wrap := func(err error) error { return vfs.Readdress(err, op, from.String(), to.String()) }
	if err := vfs.CheckRenameFlags(from, to, flags); err != nil {
		return err
	}
	st := f.st
	return st.mutate(ctx, op, from, func() (*batch, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		src, err := f.lookupEntry(ctx, from, op)
		if err != nil {
			return nil, wrap(err)
		}
		dst, err := f.lookupEntry(ctx, to, op)
		if err != nil {
			return nil, wrap(err)
		}
		act, err := vfs.CheckRename(nodeOps.RenameEnds(from, to, flags, src, dst))
		if err != nil || act == vfs.RenameNone {
			return nil, err
		}
		b, err := f.renameAct(act, from, to, src, dst)
		if err != nil {
			return nil, wrap(err)
		}
		return b, nil
	})
}

// fullDir reports whether n is a directory that holds entries.
func fullDir(n *node) (bool, error) { return n.typ == fs.ModeDir && len(n.children) > 0, nil }

// nodeOps is what the shared rename check asks of nodes.
var nodeOps = vfs.NodeOps[*node]{
	IsDir: func(n *node) bool { return n.typ == fs.ModeDir },
	Above: isAncestor,
	Full:  fullDir,
}

// renameAct carries out a rename vfs.CheckRename allowed: the SQL and the
// in-memory tree change together, with both directories' times. Its errors
// are not yet addressed to the rename's two paths.
func (f *FS) renameAct(act vfs.RenameAction, from, to vfs.Path, src, dst vfs.Resolution[*node]) (*batch, error) {
	const op = "rename"
	st, w := f.st, f.st.w
	sn, dn, now := src.Node, dst.Node, st.now()
	var sql func() error
	switch act {
	case vfs.RenameSwap:
		sql = func() error {
			if err := w.x(w.setDentry, dn.ino, src.Parent.ino, src.Name); err != nil {
				return err
			}
			return w.x(w.setDentry, sn.ino, dst.Parent.ino, dst.Name)
		}
	case vfs.RenameReplace:
		dn.mu.Lock()
		defer dn.mu.Unlock()
		sql = func() error {
			if err := w.x(w.delDentry, src.Parent.ino, src.Name); err != nil {
				return err
			}
			if err := w.x(w.setDentry, sn.ino, dst.Parent.ino, dst.Name); err != nil {
				return err
			}
			return st.unlinkSQL(dn)
		}
	default:
		if err := canCreate(dst, op, to); err != nil {
			return nil, err
		}
		sql = func() error {
			if err := w.x(w.delDentry, src.Parent.ino, src.Name); err != nil {
				return err
			}
			return w.x(w.insDentry, dst.Parent.ino, dst.Name, sn.ino)
		}
	}
	delta := int64(0)
	if act == vfs.RenameMove {
		delta = entryCharge(dst.Name) - entryCharge(src.Name)
		if !st.reserve(delta) {
			return nil, quotaError(op, to)
		}
	}
	b, err := st.exec(op, from, func() error {
		if err := sql(); err != nil {
			return err
		}
		return renameTouch(w, now, src.Parent, dst.Parent)
	})
	if err != nil {
		st.reserve(-delta)
		return nil, err
	}
	renameTree(st, act, src, dst)
	src.Parent.link2mtime(now)
	dst.Parent.link2mtime(now)
	return b, nil
}

// renameTouch sets the modification time of a rename's one or two directories.
func renameTouch(w *writer, now time.Time, from, to *node) error {
	if err := w.x(w.setMtime, now.Unix(), now.Nanosecond(), from.ino); err != nil {
		return err
	}
	if to != from {
		return w.x(w.setMtime, now.Unix(), now.Nanosecond(), to.ino)
	}
	return nil
}

// renameTree applies a committed rename to the in-memory tree.
func renameTree(st *store, act vfs.RenameAction, src, dst vfs.Resolution[*node]) {
	sn, dn := src.Node, dst.Node
	src.Parent.unlink(src.Name, sn)
	switch act {
	case vfs.RenameSwap:
		dst.Parent.unlink(dst.Name, dn)
		src.Parent.link(src.Name, dn)
	case vfs.RenameReplace:
		dst.Parent.unlink(dst.Name, dn)
		st.unlinked(dn)
		st.reserve(-entryCharge(src.Name))
	}
	dst.Parent.link(dst.Name, sn)
}
