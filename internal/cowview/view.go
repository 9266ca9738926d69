package cowview

import (
	"context"
	"io/fs"
	"os"
	"time"

	"github.com/capfs/capfs/vfs"
)

func (s *state[L]) enter(ctx context.Context, op string, p vfs.Path) error {
	if err := ctx.Err(); err != nil {
		return &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
	}
	if s.closed.Load() {
		return vfs.NewError(vfs.CodeClosed, op, p, "overlay closed")
	}
	return nil
}

func (v *View[L]) resolve(ctx context.Context, p vfs.Path, follow bool, op string, mat bool) (vfs.Resolution[*Node[L]], error) {
	r, err := vfs.Resolve[*Node[L]](ctx, tree[L]{ctx, v.s, mat}, v.root, p, follow, op)
	if err != nil {
		return r, v.s.lo.ResolveErr(err, op, p)
	}
	return r, nil
}

// find is resolve that fails with not_found where nothing is found.
func (v *View[L]) find(ctx context.Context, p vfs.Path, follow bool, op string, mat bool) (vfs.Resolution[*Node[L]], error) {
	r, err := v.resolve(ctx, p, follow, op, mat)
	if err == nil && !r.Found {
		err = vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	return r, err
}

// lookupEntry resolves p without following a final symlink, materializing, for
// operations on an entry itself; p marked MustBeDir must name a directory.
func (v *View[L]) lookupEntry(ctx context.Context, p vfs.Path, op string) (vfs.Resolution[*Node[L]], error) {
	r, err := v.resolve(ctx, p.WithoutDirMark(), false, op, true)
	if err != nil {
		return r, err
	}
	if p.MustBeDir() && r.Found && r.Node.Type != fs.ModeDir {
		return r, vfs.NewError(vfs.CodeNotDir, op, p, "")
	}
	return r, nil
}

func canCreate[L any](r vfs.Resolution[*Node[L]], op string, p vfs.Path) error {
	return vfs.CheckCreate(op, p, r.Parent.gone, r.Name)
}

// info describes n as name. The caller holds s.mu.
func (v *View[L]) info(ctx context.Context, op string, p vfs.Path, n *Node[L], name string) (vfs.Info, error) {
	switch {
	case !n.Up:
		return v.s.lo.Info(op, p, n.Lo, name)
	case n.Type == fs.ModeDir:
		i := vfs.Info{Name: name, Mode: fs.ModeDir | n.perm, ModTime: n.mtime, Nlink: 1}
		if len(n.Ents) == 0 && len(n.White) == 0 {
			if sys := v.s.lo.DirSys(n); sys != nil {
				i.Sys = sys
			}
		}
		return i, nil
	case n.Type == fs.ModeSymlink && !v.s.cfg.Links:
		return vfs.Info{Name: name, Size: int64(len(n.Target)), Mode: fs.ModeSymlink | 0o777, ModTime: n.mtime, Nlink: 1}, nil
	}
	i, err := v.s.store.Lstat(ctx, InoPath(n.Ino))
	if err != nil {
		return vfs.Info{}, vfs.Readdress(err, op, p.String(), "")
	}
	i.Name = name
	return i, nil
}

func infoName[L any](r vfs.Resolution[*Node[L]], p vfs.Path) string {
	switch {
	case r.Followed:
		return p.Base()
	case r.Name == "":
		return "."
	}
	return r.Name
}

// Features reports a writable, non-persistent backend with symlinks, Chmod and
// Chtimes, and hard links with Config.Links.
func (v *View[L]) Features() vfs.Features {
	return vfs.Features{Symlinks: true, HardLinks: v.s.cfg.Links, Chmod: true, Chtimes: true}
}

func (v *View[L]) stat(ctx context.Context, p vfs.Path, follow bool, op string) (vfs.Info, error) {
	if err := v.s.enter(ctx, op, p); err != nil {
		return vfs.Info{}, err
	}
	v.s.mu.RLock()
	defer v.s.mu.RUnlock()
	r, err := v.find(ctx, p, follow, op, false)
	if err != nil {
		return vfs.Info{}, err
	}
	return v.info(ctx, op, p, r.Node, infoName(r, p))
}

// Stat returns information on p, following a final symlink.
func (v *View[L]) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return v.stat(ctx, p, true, "stat")
}

// Lstat returns information on p without following a final symlink.
func (v *View[L]) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return v.stat(ctx, p, false, "lstat")
}

// ReadDir lists directory p, merged, sorted by name.
func (v *View[L]) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	const op = "readdir"
	if err := v.s.enter(ctx, op, p); err != nil {
		return nil, err
	}
	v.s.mu.RLock()
	defer v.s.mu.RUnlock()
	r, err := v.find(ctx, p, true, op, false)
	if err != nil {
		return nil, err
	}
	if r.Node.Type != fs.ModeDir {
		return nil, vfs.NewError(vfs.CodeNotDir, op, p, "")
	}
	out, err := v.s.list(ctx, r.Node)
	if err != nil {
		return nil, v.s.lo.LowerErr(op, p, err)
	}
	return out, nil
}

// OpenFile opens p with os-style flags. Opening a lower file for writing (or
// with O_TRUNC) copies that one file into the memory store first; reading it
// does not.
func (v *View[L]) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	const op = "open"
	if err := v.s.enter(ctx, op, p); err != nil {
		return nil, err
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	if acc != os.O_RDONLY && acc != os.O_WRONLY && acc != os.O_RDWR {
		return nil, vfs.NewError(vfs.CodeInvalidPath, op, p, "invalid access mode")
	}
	if flag&writeFlags == 0 {
		v.s.mu.RLock()
		defer v.s.mu.RUnlock()
		r, err := v.find(ctx, p, true, op, false)
		if err != nil {
			return nil, err
		}
		return v.open(ctx, p, r, flag)
	}
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	create := flag&os.O_CREATE != 0
	excl := create && flag&os.O_EXCL != 0
	trunc := flag&os.O_TRUNC != 0
	write := acc != os.O_RDONLY
	r, err := v.resolve(ctx, p, !excl, op, true)
	if err != nil {
		return nil, err
	}
	if r.Found {
		n := r.Node
		if excl {
			return nil, vfs.NewError(vfs.CodeExists, op, p, "")
		}
		if n.Type == fs.ModeDir {
			if write || trunc || create {
				return nil, vfs.NewError(vfs.CodeIsDir, op, p, "")
			}
			return v.open(ctx, p, r, flag)
		}
		if !n.Up && (write || trunc) {
			if n, err = v.copyUp(ctx, op, p, r.Parent, r.Name, n, trunc); err != nil {
				return nil, err
			}
			r.Node = n
		}
		return v.open(ctx, p, r, flag&^(os.O_CREATE|os.O_EXCL))
	}
	if !create {
		return nil, vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	if p.MustBeDir() {
		return nil, vfs.NewError(vfs.CodeIsDir, op, p, "cannot create a file with a trailing slash")
	}
	if err := canCreate(r, op, p); err != nil {
		return nil, err
	}
	ino, ip := v.s.newIno()
	f, err := v.s.store.OpenFile(ctx, ip, flag|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, vfs.Readdress(err, op, p.String(), "")
	}
	v.s.add(r.Parent, r.Name, &Node[L]{Up: true, Ino: ino}, v.s.now())
	return openFile(f, p, p.Base(), nil, false), nil
}

// open opens the found node r.Node. The caller holds s.mu.
func (v *View[L]) open(ctx context.Context, p vfs.Path, r vfs.Resolution[*Node[L]], flag int) (vfs.File, error) {
	const op = "open"
	n := r.Node
	name := p.Base()
	if p.IsRoot() {
		name = "."
	}
	switch {
	case n.Type == fs.ModeDir:
		info, err := v.info(ctx, op, p, n, infoName(r, p))
		if err != nil {
			return nil, err
		}
		// A read-only handle on the store's root has a directory handle's
		// semantics (reads fail with is_a_directory); Stat describes n.
		f, err := v.s.store.OpenFile(ctx, vfs.Root, os.O_RDONLY, 0)
		if err != nil {
			return nil, vfs.Readdress(err, op, p.String(), "")
		}
		return openFile(f, p, name, &info, false), nil
	case n.Up:
		f, err := v.s.store.OpenFile(ctx, InoPath(n.Ino), flag, 0)
		if err != nil {
			return nil, vfs.Readdress(err, op, p.String(), "")
		}
		return openFile(f, p, name, nil, false), nil
	}
	f, err := v.s.lo.Open(ctx, op, p, n.Lo, name)
	if err != nil {
		return nil, err
	}
	return openFile(f, p, name, nil, true), nil
}

// copyUp copies lower file (with Links, or symlink) n, named name in up
// directory parent, into the memory store (a file empty if trunc) and puts the
// copy in its place. The caller holds s.mu for writing.
func (v *View[L]) copyUp(ctx context.Context, op string, p vfs.Path, parent *Node[L], name string, n *Node[L], trunc bool) (*Node[L], error) {
	s := v.s
	ino, ip := s.newIno()
	if n.Type == fs.ModeSymlink {
		target, err := s.lo.Target(n.Lo)
		if err != nil {
			return nil, vfs.Errno(op, p, err)
		}
		if err := s.store.Symlink(ctx, target, ip); err != nil {
			return nil, vfs.Readdress(err, op, p.String(), "")
		}
		c := &Node[L]{Type: fs.ModeSymlink, Up: true, Ino: ino, Target: target}
		parent.Ents[name] = c
		return c, nil
	}
	f, err := s.store.OpenFile(ctx, ip, os.O_WRONLY|os.O_CREATE|os.O_EXCL, s.lo.CopyPerm(n.Lo))
	if err != nil {
		return nil, vfs.Readdress(err, op, p.String(), "")
	}
	if !trunc {
		err = s.lo.CopyData(ctx, op, p, n.Lo, f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !trunc {
		err = s.store.Chtimes(ctx, ip, time.Time{}, s.cfg.BaseTime)
	}
	if err != nil {
		// Without cancellation: a canceled call must not leave its partial
		// copy behind (charged to the store's quota).
		_ = s.store.Remove(context.WithoutCancel(ctx), ip)
		return nil, vfs.Readdress(err, op, p.String(), "")
	}
	c := &Node[L]{Up: true, Ino: ino}
	parent.Ents[name] = c
	return c, nil
}

// Mkdir creates directory p; its parent must exist.
func (v *View[L]) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	const op = "mkdir"
	if err := v.s.enter(ctx, op, p); err != nil {
		return err
	}
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	r, err := v.resolve(ctx, p.WithoutDirMark(), false, op, true)
	if err != nil {
		return err
	}
	if err := vfs.CheckMkdir(p, r.Found, r.Parent.gone, r.Name); err != nil {
		return err
	}
	now := v.s.now()
	v.s.add(r.Parent, r.Name, newUpDir(r.Parent, perm, now), now)
	return nil
}

// Remove removes a file, symlink or empty directory; a lower entry is hidden by
// a whiteout.
func (v *View[L]) Remove(ctx context.Context, p vfs.Path) error {
	const op = "remove"
	if err := v.s.enter(ctx, op, p); err != nil {
		return err
	}
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	r, err := v.lookupEntry(ctx, p, op)
	if err != nil {
		return err
	}
	if err := vfs.CheckRemove(op, p, r, v.fullDir(ctx, op, p)); err != nil {
		return err
	}
	n := r.Node
	had, err := v.s.lowerHas(ctx, r.Parent, r.Name)
	if err != nil {
		return v.s.lo.LowerErr(op, p, err)
	}
	v.s.del(r.Parent, r.Name, had, v.s.now())
	v.s.unlinked(ctx, n)
	return nil
}

// Rename moves from to to, with the semantics of rename(2) (and renameat2's
// flags). A lower directory moves lazily: its node keeps overlaying the same
// lower directory under the new name, nothing beneath it is copied, and a
// whiteout hides the old name.
func (v *View[L]) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	const op = "rename"
	if err := v.s.enter(ctx, op, from); err != nil {
		return err
	}
	wrap := func(err error) error { return vfs.Readdress(err, op, from.String(), to.String()) }
	if err := vfs.CheckRenameFlags(from, to, flags); err != nil {
		return err
	}
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	src, err := v.lookupEntry(ctx, from, op)
	if err != nil {
		return wrap(err)
	}
	dst, err := v.lookupEntry(ctx, to, op)
	if err != nil {
		return wrap(err)
	}
	var srcHad, dstHad bool
	ends := v.renameEnds(ctx, from, to, flags, src, dst)
	ends.Ready = func() (err error) {
		if srcHad, err = v.s.lowerHas(ctx, src.Parent, src.Name); err != nil {
			return wrap(v.s.lo.LowerErr(op, from, err))
		}
		if dstHad, err = v.s.lowerHas(ctx, dst.Parent, dst.Name); err != nil {
			return wrap(v.s.lo.LowerErr(op, to, err))
		}
		return nil
	}
	act, err := vfs.CheckRename(ends)
	if err != nil || act == vfs.RenameNone {
		return err
	}
	sn, dn, now := src.Node, dst.Node, v.s.now()
	switch act {
	case vfs.RenameSwap:
		v.s.del(src.Parent, src.Name, srcHad, now)
		v.s.del(dst.Parent, dst.Name, dstHad, now)
		v.s.add(src.Parent, src.Name, dn, now)
		v.s.add(dst.Parent, dst.Name, sn, now)
		return nil
	case vfs.RenameReplace:
		v.s.del(src.Parent, src.Name, srcHad, now)
		v.s.del(dst.Parent, dst.Name, dstHad, now)
		v.s.unlinked(ctx, dn)
		v.s.add(dst.Parent, dst.Name, sn, now)
		return nil
	}
	if err := canCreate(dst, op, to); err != nil {
		return wrap(err)
	}
	v.s.del(src.Parent, src.Name, srcHad, now)
	v.s.add(dst.Parent, dst.Name, sn, now)
	return nil
}

// fullDir returns a func that reports whether n is a directory that holds
// entries; a Lower's error is addressed to p.
func (v *View[L]) fullDir(ctx context.Context, op string, p vfs.Path) func(n *Node[L]) (bool, error) {
	return func(n *Node[L]) (bool, error) {
		if n.Type != fs.ModeDir {
			return false, nil
		}
		empty, err := v.s.empty(ctx, n)
		if err != nil {
			return false, v.s.lo.LowerErr(op, p, err)
		}
		return !empty, nil
	}
}

// renameEnds describes a rename's looked-up ends for vfs.CheckRename. Two
// entries are one file only through a hard link of the store.
func (v *View[L]) renameEnds(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags, src, dst vfs.Resolution[*Node[L]]) *vfs.RenameEnds {
	ops := vfs.NodeOps[*Node[L]]{
		IsDir: func(n *Node[L]) bool { return n.Type == fs.ModeDir },
		Above: isAncestor[L],
		Full:  v.fullDir(ctx, "rename", to),
	}
	e := ops.RenameEnds(from, to, flags, src, dst)
	e.SameFile = func() bool { return v.s.cfg.Links && v.s.sameFile(ctx, src.Node, dst.Node) }
	return e
}

// Symlink creates symlink p with target text target, stored verbatim: data, one
// absolute or climbing above the root included, which no resolution follows
// (vfs.CheckSymlinkTarget).
func (v *View[L]) Symlink(ctx context.Context, target string, p vfs.Path) error {
	const op = "symlink"
	if err := v.s.enter(ctx, op, p); err != nil {
		return err
	}
	if err := vfs.CheckSymlinkTarget(op, p, target); err != nil {
		return err
	}
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	r, err := v.resolve(ctx, p.WithoutDirMark(), false, op, true)
	if err != nil {
		return err
	}
	if r.Found {
		return vfs.NewError(vfs.CodeExists, op, p, "")
	}
	if p.MustBeDir() {
		return vfs.NewError(vfs.CodeNotDir, op, p, "a symlink is not a directory")
	}
	if err := canCreate(r, op, p); err != nil {
		return err
	}
	now := v.s.now()
	if !v.s.cfg.Links {
		v.s.add(r.Parent, r.Name, &Node[L]{Type: fs.ModeSymlink, Up: true, Target: target, perm: fs.ModePerm, mtime: now}, now)
		return nil
	}
	ino, ip := v.s.newIno()
	if err := v.s.store.Symlink(ctx, target, ip); err != nil {
		return vfs.Readdress(err, op, p.String(), "")
	}
	v.s.add(r.Parent, r.Name, &Node[L]{Type: fs.ModeSymlink, Up: true, Ino: ino, Target: target}, v.s.now())
	return nil
}

// Readlink returns the target text of symlink p; invalid_path if p is not one
// (or if the Lower cannot give a lower symlink's target).
func (v *View[L]) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	const op = "readlink"
	if err := v.s.enter(ctx, op, p); err != nil {
		return "", err
	}
	v.s.mu.RLock()
	defer v.s.mu.RUnlock()
	r, err := v.find(ctx, p, false, op, false)
	if err != nil {
		return "", err
	}
	if r.Node.Type != fs.ModeSymlink {
		return "", vfs.NewError(vfs.CodeInvalidPath, op, p, "not a symlink")
	}
	t, err := tree[L]{s: v.s}.Target(r.Node)
	if err != nil {
		return "", vfs.Errno(op, p, err)
	}
	return t, nil
}

// Link makes newp another name of oldp (not following a final symlink, as
// link(2)); a lower file or symlink is copied up first. Without Config.Links it
// fails with not_supported.
func (v *View[L]) Link(ctx context.Context, oldp, newp vfs.Path) error {
	const op = "link"
	fail := func(code vfs.Code, msg string) error { return vfs.PairError(code, op, oldp, newp, msg) }
	if !v.s.cfg.Links {
		return fail(vfs.CodeNotSupported, v.s.cfg.NoLinks)
	}
	if err := v.s.enter(ctx, op, oldp); err != nil {
		return err
	}
	wrap := func(err error) error { return vfs.Readdress(err, op, oldp.String(), newp.String()) }
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	src, err := v.lookupEntry(ctx, oldp, op)
	if err != nil {
		return wrap(err)
	}
	if err := vfs.CheckLinkSource(oldp, newp, src.Found, src.Found && src.Node.Type == fs.ModeDir); err != nil {
		return err
	}
	dst, err := v.resolve(ctx, newp.WithoutDirMark(), false, op, true)
	if err != nil {
		return wrap(err)
	}
	if err := vfs.CheckLinkDest(oldp, newp, dst.Found, dst.Parent.gone, dst.Name); err != nil {
		return err
	}
	n := src.Node
	if !n.Up {
		if n, err = v.copyUp(ctx, op, oldp, src.Parent, src.Name, n, false); err != nil {
			return wrap(err)
		}
	}
	ino, ip := v.s.newIno()
	if err := v.s.store.Link(ctx, InoPath(n.Ino), ip); err != nil {
		return wrap(err)
	}
	v.s.add(dst.Parent, dst.Name, &Node[L]{Type: n.Type, Up: true, Ino: ino, Target: n.Target}, v.s.now())
	return nil
}

// modify resolves p (following a final symlink) for Chmod and Chtimes and runs
// fn on the node, a lower file copied up first if copy says so.
func (v *View[L]) modify(ctx context.Context, op string, p vfs.Path, copy bool, fn func(n *Node[L]) error) error {
	if err := v.s.enter(ctx, op, p); err != nil {
		return err
	}
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	r, err := v.find(ctx, p, true, op, true)
	if err != nil {
		return err
	}
	n := r.Node
	if n.Type == 0 && !n.Up {
		if !copy {
			return nil
		}
		if n, err = v.copyUp(ctx, op, p, r.Parent, r.Name, n, false); err != nil {
			return err
		}
	}
	return fn(n)
}

// Lchtimes sets the modification time of p's own entry, a symlink itself
// included, unless mtime is zero (vfs.LinkTimer); access times are not kept.
// A lower file or symlink is copied up first.
func (v *View[L]) Lchtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	const op = "lchtimes"
	if err := v.s.enter(ctx, op, p); err != nil {
		return err
	}
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	r, err := v.lookupEntry(ctx, p, op)
	if err == nil && !r.Found {
		err = vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	if err != nil || mtime.IsZero() {
		return err
	}
	n := r.Node
	if !n.Up && n.Type != fs.ModeDir {
		if n, err = v.copyUpEntry(ctx, op, p, r.Parent, r.Name, n); err != nil {
			return err
		}
	}
	if n.Type == fs.ModeDir || (n.Type == fs.ModeSymlink && !v.s.cfg.Links) {
		n.mtime = mtime
		return nil
	}
	return vfs.Readdress(vfs.Lchtimes(ctx, v.s.store, InoPath(n.Ino), atime, mtime), op, p.String(), "")
}

// copyUpEntry is copyUp of lower file or symlink n, a symlink without
// Config.Links becoming a Node of its own, as Symlink makes one. The caller
// holds s.mu for writing.
func (v *View[L]) copyUpEntry(ctx context.Context, op string, p vfs.Path, parent *Node[L], name string, n *Node[L]) (*Node[L], error) {
	if n.Type != fs.ModeSymlink || v.s.cfg.Links {
		return v.copyUp(ctx, op, p, parent, name, n, false)
	}
	target, err := v.s.lo.Target(n.Lo)
	if err != nil {
		return nil, vfs.Errno(op, p, err)
	}
	c := &Node[L]{Type: fs.ModeSymlink, Up: true, Target: target, perm: fs.ModePerm, mtime: v.s.cfg.BaseTime}
	parent.Ents[name] = c
	return c, nil
}

// Chmod sets p's permission bits (following a final symlink). A lower file is
// copied up first.
func (v *View[L]) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	const op = "chmod"
	return v.modify(ctx, op, p, true, func(n *Node[L]) error {
		if n.Type == fs.ModeDir {
			n.perm = mode & permBits
			return nil
		}
		return vfs.Readdress(v.s.store.Chmod(ctx, InoPath(n.Ino), mode), op, p.String(), "")
	})
}

// Chtimes sets p's modification time (following a final symlink) unless mtime
// is zero; access times are not kept. A lower file is copied up first.
func (v *View[L]) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	const op = "chtimes"
	return v.modify(ctx, op, p, !mtime.IsZero(), func(n *Node[L]) error {
		if mtime.IsZero() {
			return nil
		}
		if n.Type == fs.ModeDir {
			n.mtime = mtime
			return nil
		}
		return vfs.Readdress(v.s.store.Chtimes(ctx, InoPath(n.Ino), atime, mtime), op, p.String(), "")
	})
}

// Sub returns a view rooted at directory p (following symlinks), pinned to its
// node: a later rename of p does not redirect it, and writes through it land in
// the overlay.
func (v *View[L]) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	const op = "sub"
	if err := v.s.enter(ctx, op, p); err != nil {
		return nil, err
	}
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	r, err := v.find(ctx, p, true, op, true)
	if err != nil {
		return nil, err
	}
	n := r.Node
	if n.Type != fs.ModeDir {
		return nil, vfs.NewError(vfs.CodeNotDir, op, p, "")
	}
	if !n.Up { // every directory reached by a materializing walk is up
		return nil, vfs.NewError(vfs.CodeIO, op, p, "directory not materialized")
	}
	return &located[L]{&View[L]{s: v.s, root: n}}, nil
}

// Resolve returns the canonical location of p in the view, copying nothing up.
func (v *View[L]) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	const op = "resolve"
	if err := v.s.enter(ctx, op, p); err != nil {
		return vfs.Location{}, err
	}
	v.s.mu.RLock()
	defer v.s.mu.RUnlock()
	_, loc, err := vfs.ResolveLocation[*Node[L]](ctx, tree[L]{ctx, v.s, false}, v.root, p, follow, op)
	if err != nil {
		return vfs.Location{}, v.s.lo.ResolveErr(err, op, p)
	}
	return loc, nil
}

// located is the View a Sub returns: a vfs.Locator.
type located[L any] struct{ *View[L] }

var _ vfs.Locator = located[int]{}

// Locate returns the view's root's current path in the overlay, after renames
// made since Sub pinned it; not_found once the directory was removed.
func (v located[L]) Locate(ctx context.Context) (vfs.Path, error) {
	if err := v.s.enter(ctx, "locate", vfs.Root); err != nil {
		return vfs.Path{}, err
	}
	v.s.mu.RLock()
	defer v.s.mu.RUnlock()
	var names []string
	n := v.root
	for n.parent != nil {
		name, ok := "", false
		for k, c := range n.parent.Ents {
			if c == n {
				name, ok = k, true
				break
			}
		}
		if !ok {
			return vfs.Path{}, vfs.NewError(vfs.CodeNotFound, "locate", vfs.Root, "the directory was removed")
		}
		names = append(names, name)
		n = n.parent
	}
	if n.gone {
		return vfs.Path{}, vfs.NewError(vfs.CodeNotFound, "locate", vfs.Root, "the directory was removed")
	}
	p := vfs.Root
	for i := len(names) - 1; i >= 0; i-- {
		var err error
		if p, err = p.Child(names[i]); err != nil {
			return vfs.Path{}, err
		}
	}
	return p, nil
}
