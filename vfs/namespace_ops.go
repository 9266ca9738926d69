package vfs

import (
	"context"
	"io/fs"
	"time"
)

// Mkdir creates directory p. Where a namespace directory stands it fails with
// already_exists; inside a synthetic directory, with read_only.
func (n *Namespace) Mkdir(ctx context.Context, p Path, perm fs.FileMode) error {
	t := n.table()
	q, err := n.route(ctx, t, p, false, "mkdir")
	if err != nil {
		return n.mutateErr(ctx, t, "mkdir", p, err)
	}
	l := t.locate(q)
	switch {
	case l.kind == kindInMount:
		if err := l.m.b.Mkdir(ctx, l.rel, perm); err != nil {
			if r, ok := n.reroute(ctx, t, q, false, "mkdir", err); ok {
				err = n.Mkdir(ctx, r, perm)
				if err == nil {
					return nil
				}
				return ReaddressTo(err, "mkdir", p)
			}
			return n.mutateErr(ctx, t, "mkdir", p, err)
		}
		return nil
	case l.isNode():
		return errExists("mkdir", p)
	}
	return errReadOnly("mkdir", p)
}

// Remove removes p. Mount points and namespace directories cannot be removed:
// read_only.
func (n *Namespace) Remove(ctx context.Context, p Path) error {
	t := n.table()
	q, err := n.route(ctx, t, p, false, "remove")
	if err != nil {
		return n.mutateErr(ctx, t, "remove", p, err)
	}
	l := t.locate(q)
	if l.kind != kindInMount {
		return errReadOnly("remove", p)
	}
	if err := l.m.b.Remove(ctx, l.rel); err != nil {
		if r, ok := n.reroute(ctx, t, q, false, "remove", err); ok {
			if err := n.Remove(ctx, r); err != nil {
				return ReaddressTo(err, "remove", p)
			}
			return nil
		}
		return n.mutateErr(ctx, t, "remove", p, err)
	}
	return nil
}

// Rename moves from to to within one mount. It fails with read_only if either
// path is a mount point or namespace directory, or lies in a synthetic
// directory. It fails with cross_mount if the two paths lie in different mounts.
func (n *Namespace) Rename(ctx context.Context, from, to Path, flags RenameFlags) error {
	t := n.table()
	rf, err := n.route(ctx, t, from, false, "rename")
	var rt Path
	if err == nil {
		rt, err = n.route(ctx, t, to, false, "rename")
	}
	if err != nil {
		if n.inSynthetic(ctx, t, from, err) || n.inSynthetic(ctx, t, to, err) {
			return errReadOnly2("rename", from, to)
		}
		return ReaddressTo(err, "rename", from, to)
	}
	lf, lt := t.locate(rf), t.locate(rt)
	if lf.kind != kindInMount || lt.kind != kindInMount {
		return errReadOnly2("rename", from, to)
	}
	if lf.m != lt.m {
		return &Error{Code: CodeCrossMount, Op: "rename", Path: from.String(), Dest: to.String(),
			msg: "source and destination are in different mounts"}
	}
	if err := lf.m.b.Rename(ctx, lf.rel, lt.rel, flags); err != nil {
		rf2, okf := n.reroute(ctx, t, rf, false, "rename", err)
		rt2, okt := n.reroute(ctx, t, rt, false, "rename", err)
		if okf && okt {
			if err := n.Rename(ctx, rf2, rt2, flags); err != nil {
				return ReaddressTo(err, "rename", from, to)
			}
			return nil
		}
		if n.inSynthetic(ctx, t, from, err) || n.inSynthetic(ctx, t, to, err) {
			return errReadOnly2("rename", from, to)
		}
		return ReaddressTo(err, "rename", from, to)
	}
	return nil
}

// Symlink creates link p with the given target, which the backend of p's mount
// resolves beneath its own root.
func (n *Namespace) Symlink(ctx context.Context, target string, p Path) error {
	t := n.table()
	q, err := n.route(ctx, t, p, false, "symlink")
	if err != nil {
		return n.mutateErr(ctx, t, "symlink", p, err)
	}
	l := t.locate(q)
	switch {
	case l.kind == kindInMount:
		if err := l.m.b.Symlink(ctx, target, l.rel); err != nil {
			if r, ok := n.reroute(ctx, t, q, false, "symlink", err); ok {
				if err := n.Symlink(ctx, target, r); err != nil {
					return ReaddressTo(err, "symlink", p)
				}
				return nil
			}
			return n.mutateErr(ctx, t, "symlink", p, err)
		}
		return nil
	case l.isNode():
		return errExists("symlink", p)
	}
	return errReadOnly("symlink", p)
}

// Readlink returns the target text of symlink p. A namespace directory is not a
// symlink: invalid_path.
func (n *Namespace) Readlink(ctx context.Context, p Path) (string, error) {
	t := n.table()
	q, err := n.route(ctx, t, p, p.mustDir, "readlink")
	if err != nil {
		return "", ReaddressTo(err, "readlink", p)
	}
	l := t.locate(q)
	switch l.kind {
	case kindInMount, kindMountPoint:
		s, err := l.m.b.Readlink(ctx, l.rel)
		if r, ok := n.reroute(ctx, t, q, p.mustDir, "readlink", err); ok {
			s, err = n.Readlink(ctx, r)
		}
		if err != nil {
			return "", ReaddressTo(err, "readlink", p)
		}
		return s, nil
	case kindCovered, kindSynthetic:
		return "", NewError(CodeInvalidPath, "readlink", p, "not a symbolic link")
	}
	return "", NewError(CodeNotFound, "readlink", p, "")
}

// Link creates a hard link at newp to oldp; both must lie in the same mount
// (cross_mount otherwise).
func (n *Namespace) Link(ctx context.Context, oldp, newp Path) error {
	t := n.table()
	ro, err := n.route(ctx, t, oldp, false, "link")
	var rn Path
	if err == nil {
		rn, err = n.route(ctx, t, newp, false, "link")
	}
	if err != nil {
		if n.inSynthetic(ctx, t, newp, err) {
			return errReadOnly2("link", oldp, newp)
		}
		return ReaddressTo(err, "link", oldp, newp)
	}
	lo, ln := t.locate(ro), t.locate(rn)
	switch {
	case ln.isNode():
		return &Error{Code: CodeExists, Op: "link", Path: oldp.String(), Dest: newp.String(), msg: "a namespace directory"}
	case ln.kind != kindInMount:
		return errReadOnly2("link", oldp, newp)
	case lo.kind == kindNone:
		return &Error{Code: CodeNotFound, Op: "link", Path: oldp.String(), Dest: newp.String()}
	case lo.kind != kindInMount:
		return errReadOnly2("link", oldp, newp)
	case lo.m != ln.m:
		return &Error{Code: CodeCrossMount, Op: "link", Path: oldp.String(), Dest: newp.String(),
			msg: "source and destination are in different mounts"}
	}
	if err := lo.m.b.Link(ctx, lo.rel, ln.rel); err != nil {
		ro2, oko := n.reroute(ctx, t, ro, false, "link", err)
		rn2, okn := n.reroute(ctx, t, rn, false, "link", err)
		if oko && okn {
			if err := n.Link(ctx, ro2, rn2); err != nil {
				return ReaddressTo(err, "link", oldp, newp)
			}
			return nil
		}
		if n.inSynthetic(ctx, t, newp, err) {
			return errReadOnly2("link", oldp, newp)
		}
		return ReaddressTo(err, "link", oldp, newp)
	}
	return nil
}

// Chmod changes p's permission bits. On a mount point it changes the mounted
// backend's root; on a synthetic directory it fails with read_only.
func (n *Namespace) Chmod(ctx context.Context, p Path, mode fs.FileMode) error {
	return n.setattr(ctx, "chmod", p, true, func(b Backend, rel Path) error { return b.Chmod(ctx, rel, mode) })
}

// Chtimes changes p's access and modification times. On a mount point it changes the
// mounted backend's root; on a synthetic directory it fails with read_only.
func (n *Namespace) Chtimes(ctx context.Context, p Path, atime, mtime time.Time) error {
	return n.setattr(ctx, "chtimes", p, true, func(b Backend, rel Path) error { return b.Chtimes(ctx, rel, atime, mtime) })
}

// setattr changes an attribute of p (of the entry itself when follow is false).
func (n *Namespace) setattr(ctx context.Context, op string, p Path, follow bool, do func(Backend, Path) error) error {
	t := n.table()
	q, err := n.route(ctx, t, p, follow, op)
	if err != nil {
		return ReaddressTo(err, op, p)
	}
	l := t.locate(q)
	switch l.kind {
	case kindCovered:
		_, ok, err := n.coveredDir(ctx, op, p, &l)
		if err != nil {
			return err
		}
		if !ok {
			return errReadOnly(op, p)
		}
		fallthrough
	case kindInMount, kindMountPoint:
		if err := do(l.m.b, l.rel); err != nil {
			if r, ok := n.reroute(ctx, t, q, follow, op, err); ok {
				err = n.setattr(ctx, op, r, follow, do)
				if err == nil {
					return nil
				}
			}
			return ReaddressTo(err, op, p)
		}
		return nil
	case kindSynthetic:
		return errReadOnly(op, p)
	}
	return NewError(CodeNotFound, op, p, "")
}
