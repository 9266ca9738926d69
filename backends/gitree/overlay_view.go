package gitree

import (
	"context"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
)

// This file holds the overlay's merged view: a tree of unodes layered over the
// base revision. Untouched parts of the base are never copied: a directory the
// overlay has not changed is read straight from the base tree.
//
// An upper ("up") directory records only its differences from the base tree it
// overlays (lo): ents maps names it adds or replaces, white names base entries it
// deleted (whiteouts). A lookup checks ents, then white, then the base tree. A
// directory becomes up when a mutating operation walks through it ("materialize",
// O(1): no entry is copied); a file is copied into the memory store only when it is
// first opened for writing, chmodded or given new times. A base file, symlink or
// submodule that is only moved is kept as a reference (not up) to its object.

// unode is one entry of an overlay's merged view.
type unode struct {
	typ fs.FileMode // fs.ModeDir, fs.ModeSymlink, or 0 for a regular file
	// lo is, for a node that is not up, the base object itself; for an up
	// directory, the base tree it overlays (zero hash: none).
	lo node
	up bool // the node lives in the upper layer

	// Up directories; guarded by ovState.mu.
	ents    map[string]*unode   // entries added or replaced in the upper layer
	white   map[string]struct{} // base entries deleted
	parent  *unode              // nil for the top root and removed directories
	gone    bool                // removed: nothing can be created in it
	gitlink plumbing.Hash       // a submodule's pinned commit, kept while the directory stays empty

	ino    string // up regular files: the file's name in the memory store
	target string // up symlinks

	// Up directories and symlinks (a file's metadata lives in the store).
	perm  fs.FileMode
	mtime time.Time
}

// ovPermBits are the mode bits Chmod and creation keep besides the type, as in
// the memory backend.
const ovPermBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// ovState is what an Overlay and every Sub of it share.
type ovState struct {
	base  *FS
	store *memory.FS // contents of up files, one flat entry each
	mu    sync.RWMutex
	// closed is set by Overlay.Close; every later call fails with closed.
	closed  atomic.Bool
	nextIno atomic.Uint64
}

func (s *ovState) now() time.Time { return time.Now().Round(0) }

func (s *ovState) newIno() (string, vfs.Path) {
	ino := "f" + strconv.FormatUint(s.nextIno.Add(1), 10)
	p, _ := vfs.Root.Child(ino)
	return ino, p
}

func inoPath(ino string) vfs.Path {
	p, _ := vfs.Root.Child(ino)
	return p
}

// materialize turns c, a base directory just looked up in up directory parent,
// into an up directory overlaying the same tree. A submodule becomes an empty
// directory remembering the commit it pins.
func (s *ovState) materialize(c, parent *unode) {
	c.up = true
	c.ents = map[string]*unode{}
	c.white = map[string]struct{}{}
	c.parent = parent
	c.perm = 0o755
	c.mtime = s.base.modTime
	if c.lo.mode == filemode.Submodule {
		c.gitlink = c.lo.hash
		c.lo = node{}
	}
}

func newUpDir(parent *unode, perm fs.FileMode, now time.Time) *unode {
	return &unode{typ: fs.ModeDir, up: true, ents: map[string]*unode{}, white: map[string]struct{}{},
		parent: parent, perm: perm & ovPermBits, mtime: now}
}

// lower returns the base tree directory d overlays (or is), or nil.
func (s *ovState) lower(d *unode) (*dir, error) {
	if d.lo.hash.IsZero() {
		return nil, nil
	}
	return s.base.r.loadDir(d.lo)
}

// child looks name up in directory d of the merged view. With mat, a base
// directory found in an up directory is materialized into it (the caller holds
// s.mu for writing); without, base entries come back as fresh references.
func (s *ovState) child(d *unode, name string, mat bool) (*unode, bool, error) {
	if d.up {
		if c, ok := d.ents[name]; ok {
			return c, true, nil
		}
		if _, ok := d.white[name]; ok {
			return nil, false, nil
		}
	}
	ld, err := s.lower(d)
	if err != nil || ld == nil {
		return nil, false, err
	}
	n, ok := ld.lookup(name)
	if !ok {
		return nil, false, nil
	}
	c := &unode{typ: typeOf(n), lo: n}
	if mat && d.up && c.typ == fs.ModeDir {
		s.materialize(c, d)
		d.ents[name] = c
	}
	return c, true, nil
}

// lowerHas reports whether d's base tree has an entry name (that a deletion must
// hide with a whiteout).
func (s *ovState) lowerHas(d *unode, name string) (bool, error) {
	ld, err := s.lower(d)
	if err != nil || ld == nil {
		return false, err
	}
	_, ok := ld.lookup(name)
	return ok, nil
}

// list returns the merged entries of directory d, sorted by name.
func (s *ovState) list(d *unode) ([]vfs.DirEntry, error) {
	ld, err := s.lower(d)
	if err != nil {
		return nil, err
	}
	var out []vfs.DirEntry
	if ld != nil {
		out = make([]vfs.DirEntry, 0, len(ld.names)+len(d.ents))
		for i, name := range ld.names {
			if d.up {
				if _, ok := d.ents[name]; ok {
					continue
				}
				if _, ok := d.white[name]; ok {
					continue
				}
			}
			out = append(out, vfs.DirEntry{Name: name, Type: typeOf(ld.nodes[i])})
		}
	}
	if d.up && len(d.ents) > 0 {
		for name, c := range d.ents {
			out = append(out, vfs.DirEntry{Name: name, Type: c.typ})
		}
		slices.SortFunc(out, func(a, b vfs.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	}
	if out == nil {
		out = []vfs.DirEntry{}
	}
	return out, nil
}

// empty reports whether directory d of the merged view has no entries.
func (s *ovState) empty(d *unode) (bool, error) {
	if d.up && len(d.ents) > 0 {
		return false, nil
	}
	ld, err := s.lower(d)
	if err != nil || ld == nil {
		return true, err
	}
	for _, name := range ld.names {
		if _, ok := d.white[name]; !ok {
			return false, nil
		}
	}
	return true, nil
}

// add links c into up directory d as name. The caller holds s.mu for writing.
func (s *ovState) add(d *unode, name string, c *unode, now time.Time) {
	d.ents[name] = c
	if c.up && c.typ == fs.ModeDir {
		c.parent = d
	}
	d.mtime = now
}

// del unlinks name from up directory d, recording a whiteout if the base tree
// has that name (lowerHad, computed before any change).
func (s *ovState) del(d *unode, name string, lowerHad bool, now time.Time) {
	delete(d.ents, name)
	if lowerHad {
		d.white[name] = struct{}{}
	}
	d.mtime = now
}

// unlinked records that n lost its name: a directory is gone (creations in it fail,
// a Sub pinned to it sees it empty of new entries), an up file's contents are
// released once no handle has them open.
func (s *ovState) unlinked(ctx context.Context, n *unode) {
	switch {
	case n.typ == fs.ModeDir && n.up:
		n.gone = true
		n.parent = nil
	case n.typ == 0 && n.up:
		// The store keeps the data for handles still open, as POSIX does. The
		// name is gone already, so a canceled context must not keep the data.
		_ = s.store.Remove(context.WithoutCancel(ctx), inoPath(n.ino))
	}
}

func isAncestorU(a, d *unode) bool {
	for ; d != nil; d = d.parent {
		if d == a {
			return true
		}
	}
	return false
}

// ovTree is the vfs.Tree of the merged view for the shared resolver; mat
// materializes the directories it walks through (mutating operations, under the
// write lock).
type ovTree struct {
	s   *ovState
	mat bool
}

func (t ovTree) Lookup(d *unode, name string) (*unode, bool, error) { return t.s.child(d, name, t.mat) }

func (t ovTree) Type(n *unode) fs.FileMode { return n.typ }

func (t ovTree) Target(n *unode) (string, error) {
	if n.up {
		return n.target, nil
	}
	return treeView{t.s.base.r}.Target(n.lo)
}

// view is the merged view from one root: the Overlay's, or a Sub's.
type view struct {
	s    *ovState
	root *unode
}

var _ vfs.Backend = (*view)(nil)

func (v *view) enter(ctx context.Context, op string, p vfs.Path) error {
	if err := ctx.Err(); err != nil {
		return &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
	}
	if v.s.closed.Load() {
		return vfs.NewError(vfs.CodeClosed, op, p, "overlay closed")
	}
	return nil
}

func (v *view) resolve(ctx context.Context, p vfs.Path, follow bool, op string, mat bool) (vfs.Resolution[*unode], error) {
	return vfs.Resolve[*unode](ctx, ovTree{v.s, mat}, v.root, p, follow, op)
}

// lookupEntry resolves p without following a final symlink, materializing, for
// operations on an entry itself; p marked MustBeDir must name a directory.
func (v *view) lookupEntry(ctx context.Context, p vfs.Path, op string) (vfs.Resolution[*unode], error) {
	r, err := v.resolve(ctx, p.WithoutDirMark(), false, op, true)
	if err != nil {
		return r, err
	}
	if p.MustBeDir() && r.Found && r.Node.typ != fs.ModeDir {
		return r, vfs.NewError(vfs.CodeNotDir, op, p, "")
	}
	return r, nil
}

func canCreateU(r vfs.Resolution[*unode], op string, p vfs.Path) error {
	if r.Parent.gone {
		return vfs.NewError(vfs.CodeNotFound, op, p, "directory has been removed")
	}
	if !vfs.ValidName(r.Name) {
		return vfs.NewError(vfs.CodeInvalidPath, op, p, "invalid name in symlink target")
	}
	return nil
}

// info describes n as name. The caller holds s.mu.
func (v *view) info(ctx context.Context, op string, p vfs.Path, n *unode, name string) (vfs.Info, error) {
	switch {
	case !n.up:
		return v.s.base.info(op, p, n.lo, name)
	case n.typ == fs.ModeDir:
		i := vfs.Info{Name: name, Mode: fs.ModeDir | n.perm, ModTime: n.mtime, Nlink: 1}
		if len(n.ents) == 0 && len(n.white) == 0 {
			switch {
			case !n.lo.hash.IsZero():
				i.Sys = &Entry{Kind: "tree", ID: n.lo.hash.String()}
			case !n.gitlink.IsZero():
				i.Sys = &Entry{Kind: "submodule", ID: n.gitlink.String()}
			}
		}
		return i, nil
	case n.typ == fs.ModeSymlink:
		return vfs.Info{Name: name, Size: int64(len(n.target)), Mode: fs.ModeSymlink | 0o777, ModTime: n.mtime, Nlink: 1}, nil
	}
	i, err := v.s.store.Lstat(ctx, inoPath(n.ino))
	if err != nil {
		return vfs.Info{}, vfs.Readdress(err, op, p.String(), "")
	}
	i.Name = name
	return i, nil
}

func infoName(r vfs.Resolution[*unode], p vfs.Path) string {
	switch {
	case r.Followed:
		return p.Base()
	case r.Name == "":
		return "."
	}
	return r.Name
}

// Features reports a writable, non-persistent backend with symlinks, Chmod and
// Chtimes, without hard links.
func (v *view) Features() vfs.Features {
	return vfs.Features{Symlinks: true, Chmod: true, Chtimes: true}
}

func (v *view) stat(ctx context.Context, p vfs.Path, follow bool, op string) (vfs.Info, error) {
	if err := v.enter(ctx, op, p); err != nil {
		return vfs.Info{}, err
	}
	v.s.mu.RLock()
	defer v.s.mu.RUnlock()
	r, err := v.resolve(ctx, p, follow, op, false)
	if err != nil {
		return vfs.Info{}, err
	}
	if !r.Found {
		return vfs.Info{}, vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	return v.info(ctx, op, p, r.Node, infoName(r, p))
}

// Stat returns information on p, following a final symlink.
func (v *view) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return v.stat(ctx, p, true, "stat")
}

// Lstat returns information on p without following a final symlink.
func (v *view) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return v.stat(ctx, p, false, "lstat")
}

// ReadDir lists directory p, merged, sorted by name.
func (v *view) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	const op = "readdir"
	if err := v.enter(ctx, op, p); err != nil {
		return nil, err
	}
	v.s.mu.RLock()
	defer v.s.mu.RUnlock()
	r, err := v.resolve(ctx, p, true, op, false)
	if err != nil {
		return nil, err
	}
	if !r.Found {
		return nil, vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	if r.Node.typ != fs.ModeDir {
		return nil, vfs.NewError(vfs.CodeNotDir, op, p, "")
	}
	out, err := v.s.list(r.Node)
	if err != nil {
		return nil, vfs.Errno(op, p, err)
	}
	return out, nil
}

// OpenFile opens p with os-style flags. Opening a base file for writing (or with
// O_TRUNC) copies that one file into the memory layer first; reading it does not.
func (v *view) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	const op = "open"
	if err := v.enter(ctx, op, p); err != nil {
		return nil, err
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	if acc != os.O_RDONLY && acc != os.O_WRONLY && acc != os.O_RDWR {
		return nil, vfs.NewError(vfs.CodeInvalidPath, op, p, "invalid access mode")
	}
	if flag&writeFlags == 0 {
		v.s.mu.RLock()
		defer v.s.mu.RUnlock()
		r, err := v.resolve(ctx, p, true, op, false)
		if err != nil {
			return nil, err
		}
		if !r.Found {
			return nil, vfs.NewError(vfs.CodeNotFound, op, p, "")
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
		if n.typ == fs.ModeDir {
			if write || trunc || create {
				return nil, vfs.NewError(vfs.CodeIsDir, op, p, "")
			}
			return v.open(ctx, p, r, flag)
		}
		if !n.up && (write || trunc) {
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
	if err := canCreateU(r, op, p); err != nil {
		return nil, err
	}
	ino, ip := v.s.newIno()
	f, err := v.s.store.OpenFile(ctx, ip, flag|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, vfs.Readdress(err, op, p.String(), "")
	}
	v.s.add(r.Parent, r.Name, &unode{up: true, ino: ino}, v.s.now())
	return &ovFile{File: f, p: p, name: p.Base()}, nil
}

// open opens the found node r.Node. The caller holds s.mu.
func (v *view) open(ctx context.Context, p vfs.Path, r vfs.Resolution[*unode], flag int) (vfs.File, error) {
	const op = "open"
	n := r.Node
	name := p.Base()
	if p.IsRoot() {
		name = "."
	}
	switch {
	case n.typ == fs.ModeDir:
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
		return &ovFile{File: f, p: p, name: name, info: &info}, nil
	case n.up:
		f, err := v.s.store.OpenFile(ctx, inoPath(n.ino), flag, 0)
		if err != nil {
			return nil, vfs.Readdress(err, op, p.String(), "")
		}
		return &ovFile{File: f, p: p, name: name}, nil
	}
	lf := &FS{r: v.s.base.r, root: n.lo, modTime: v.s.base.modTime}
	f, err := lf.OpenFile(ctx, vfs.Root, os.O_RDONLY, 0)
	if err != nil {
		return nil, vfs.Readdress(err, op, p.String(), "")
	}
	return &ovFile{File: f, p: p, name: name, ro: true}, nil
}

// copyUp copies base file n, named name in up directory parent, into the memory
// store (empty if trunc) and puts the copy in its place. The caller holds s.mu
// for writing.
func (v *view) copyUp(ctx context.Context, op string, p vfs.Path, parent *unode, name string, n *unode, trunc bool) (*unode, error) {
	var data []byte
	if !trunc {
		var err error
		if data, err = v.s.base.r.readBlob(n.lo.hash); err != nil {
			return nil, vfs.Errno(op, p, err)
		}
	}
	perm := fs.FileMode(0o644)
	if n.lo.mode == filemode.Executable {
		perm = 0o755
	}
	ino, ip := v.s.newIno()
	f, err := v.s.store.OpenFile(ctx, ip, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, vfs.Readdress(err, op, p.String(), "")
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !trunc {
		err = v.s.store.Chtimes(ctx, ip, time.Time{}, v.s.base.modTime)
	}
	if err != nil {
		_ = v.s.store.Remove(ctx, ip)
		return nil, vfs.Readdress(err, op, p.String(), "")
	}
	c := &unode{up: true, ino: ino}
	parent.ents[name] = c
	return c, nil
}

// Mkdir creates directory p; its parent must exist.
func (v *view) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	const op = "mkdir"
	if err := v.enter(ctx, op, p); err != nil {
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
	if err := canCreateU(r, op, p); err != nil {
		return err
	}
	now := v.s.now()
	v.s.add(r.Parent, r.Name, newUpDir(r.Parent, perm, now), now)
	return nil
}

// Remove removes a file, symlink or empty directory; a base entry is hidden by a
// whiteout.
func (v *view) Remove(ctx context.Context, p vfs.Path) error {
	const op = "remove"
	if err := v.enter(ctx, op, p); err != nil {
		return err
	}
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	r, err := v.lookupEntry(ctx, p, op)
	if err != nil {
		return err
	}
	if !r.Found {
		return vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	if r.Name == "" {
		return vfs.NewError(vfs.CodeInvalidPath, op, p, "cannot remove the root")
	}
	n := r.Node
	if n.typ == fs.ModeDir {
		empty, err := v.s.empty(n)
		if err != nil {
			return vfs.Errno(op, p, err)
		}
		if !empty {
			return vfs.NewError(vfs.CodeNotEmpty, op, p, "")
		}
	}
	had, err := v.s.lowerHas(r.Parent, r.Name)
	if err != nil {
		return vfs.Errno(op, p, err)
	}
	v.s.del(r.Parent, r.Name, had, v.s.now())
	v.s.unlinked(ctx, n)
	return nil
}

// Rename moves from to to, with the semantics of rename(2) (and renameat2's
// flags). A base directory moves lazily: its node keeps overlaying the same base
// tree under the new name, nothing beneath it is copied, and a whiteout hides the
// old name.
func (v *view) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	const op = "rename"
	if err := v.enter(ctx, op, from); err != nil {
		return err
	}
	fail := func(code vfs.Code, msg string) error {
		e := vfs.NewError(code, op, from, msg)
		e.Dest = to.String()
		return e
	}
	wrap := func(err error) error { return vfs.Readdress(err, op, from.String(), to.String()) }
	if flags&^(vfs.RenameNoReplace|vfs.RenameExchange) != 0 ||
		flags == vfs.RenameNoReplace|vfs.RenameExchange {
		return fail(vfs.CodeInvalidPath, "invalid rename flags")
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
	if !src.Found {
		return fail(vfs.CodeNotFound, "")
	}
	if src.Name == "" || (dst.Found && dst.Name == "") {
		return fail(vfs.CodeInvalidPath, "cannot rename the root")
	}
	sn := src.Node
	if to.MustBeDir() && sn.typ != fs.ModeDir {
		return fail(vfs.CodeNotDir, "")
	}
	same := src.Parent == dst.Parent && src.Name == dst.Name
	srcHad, err := v.s.lowerHas(src.Parent, src.Name)
	if err != nil {
		return wrap(vfs.Errno(op, from, err))
	}
	dstHad, err := v.s.lowerHas(dst.Parent, dst.Name)
	if err != nil {
		return wrap(vfs.Errno(op, to, err))
	}
	now := v.s.now()

	if flags&vfs.RenameExchange != 0 {
		if !dst.Found {
			return fail(vfs.CodeNotFound, "exchange destination does not exist")
		}
		dn := dst.Node
		if same {
			return nil
		}
		if (sn.typ == fs.ModeDir && isAncestorU(sn, dst.Parent)) ||
			(dn.typ == fs.ModeDir && isAncestorU(dn, src.Parent)) {
			return fail(vfs.CodeInvalidPath, "cannot move a directory into its own subtree")
		}
		v.s.del(src.Parent, src.Name, srcHad, now)
		v.s.del(dst.Parent, dst.Name, dstHad, now)
		v.s.add(src.Parent, src.Name, dn, now)
		v.s.add(dst.Parent, dst.Name, sn, now)
		return nil
	}

	if dst.Found {
		dn := dst.Node
		if flags&vfs.RenameNoReplace != 0 {
			return fail(vfs.CodeExists, "")
		}
		if same {
			return nil
		}
		switch {
		case sn.typ == fs.ModeDir && dn.typ != fs.ModeDir:
			return fail(vfs.CodeNotDir, "cannot replace a non-directory with a directory")
		case sn.typ != fs.ModeDir && dn.typ == fs.ModeDir:
			return fail(vfs.CodeIsDir, "cannot replace a directory with a non-directory")
		}
		if sn.typ == fs.ModeDir && isAncestorU(sn, dst.Parent) {
			return fail(vfs.CodeInvalidPath, "cannot move a directory into its own subtree")
		}
		if dn.typ == fs.ModeDir {
			empty, err := v.s.empty(dn)
			if err != nil {
				return wrap(vfs.Errno(op, to, err))
			}
			if !empty {
				return fail(vfs.CodeNotEmpty, "")
			}
		}
		v.s.del(src.Parent, src.Name, srcHad, now)
		v.s.del(dst.Parent, dst.Name, dstHad, now)
		v.s.unlinked(ctx, dn)
		v.s.add(dst.Parent, dst.Name, sn, now)
		return nil
	}

	if sn.typ == fs.ModeDir && isAncestorU(sn, dst.Parent) {
		return fail(vfs.CodeInvalidPath, "cannot move a directory into its own subtree")
	}
	if err := canCreateU(dst, op, to); err != nil {
		return wrap(err)
	}
	v.s.del(src.Parent, src.Name, srcHad, now)
	v.s.add(dst.Parent, dst.Name, sn, now)
	return nil
}

// Symlink creates symlink p with target text target, stored verbatim.
func (v *view) Symlink(ctx context.Context, target string, p vfs.Path) error {
	const op = "symlink"
	if err := v.enter(ctx, op, p); err != nil {
		return err
	}
	switch {
	case target == "":
		return vfs.NewError(vfs.CodeInvalidPath, op, p, "empty symlink target")
	case len(target) > vfs.MaxPathLen:
		return vfs.NewError(vfs.CodeInvalidPath, op, p, "symlink target too long")
	case strings.IndexByte(target, 0) >= 0:
		return vfs.NewError(vfs.CodeInvalidPath, op, p, "NUL byte in symlink target")
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
	if err := canCreateU(r, op, p); err != nil {
		return err
	}
	now := v.s.now()
	v.s.add(r.Parent, r.Name, &unode{typ: fs.ModeSymlink, up: true, target: target, perm: fs.ModePerm, mtime: now}, now)
	return nil
}

// Readlink returns the target text of symlink p; invalid_path if p is not one
// (or, for a base symlink, if its target is longer than PATH_MAX).
func (v *view) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	const op = "readlink"
	if err := v.enter(ctx, op, p); err != nil {
		return "", err
	}
	v.s.mu.RLock()
	defer v.s.mu.RUnlock()
	r, err := v.resolve(ctx, p, false, op, false)
	if err != nil {
		return "", err
	}
	if !r.Found {
		return "", vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	if r.Node.typ != fs.ModeSymlink {
		return "", vfs.NewError(vfs.CodeInvalidPath, op, p, "not a symlink")
	}
	t, err := ovTree{s: v.s}.Target(r.Node)
	if err != nil {
		return "", vfs.Errno(op, p, err)
	}
	return t, nil
}

// Link fails with not_supported: git cannot record hard links.
func (v *view) Link(ctx context.Context, oldp, newp vfs.Path) error {
	e := vfs.NewError(vfs.CodeNotSupported, "link", oldp, "git overlays have no hard links")
	e.Dest = newp.String()
	return e
}

// modify resolves p (following a final symlink) for Chmod and Chtimes and runs fn
// on the node, a base file copied up first if copy says so.
func (v *view) modify(ctx context.Context, op string, p vfs.Path, copy bool, fn func(n *unode) error) error {
	if err := v.enter(ctx, op, p); err != nil {
		return err
	}
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	r, err := v.resolve(ctx, p, true, op, true)
	if err != nil {
		return err
	}
	if !r.Found {
		return vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	n := r.Node
	if n.typ == 0 && !n.up {
		if !copy {
			return nil
		}
		if n, err = v.copyUp(ctx, op, p, r.Parent, r.Name, n, false); err != nil {
			return err
		}
	}
	return fn(n)
}

// Chmod sets p's permission bits (following a final symlink). A base file is
// copied up first.
func (v *view) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	const op = "chmod"
	return v.modify(ctx, op, p, true, func(n *unode) error {
		if n.typ == fs.ModeDir {
			n.perm = mode & ovPermBits
			return nil
		}
		return vfs.Readdress(v.s.store.Chmod(ctx, inoPath(n.ino), mode), op, p.String(), "")
	})
}

// Chtimes sets p's modification time (following a final symlink) unless mtime is
// zero; access times are not kept. A base file is copied up first.
func (v *view) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	const op = "chtimes"
	return v.modify(ctx, op, p, !mtime.IsZero(), func(n *unode) error {
		if mtime.IsZero() {
			return nil
		}
		if n.typ == fs.ModeDir {
			n.mtime = mtime
			return nil
		}
		return vfs.Readdress(v.s.store.Chtimes(ctx, inoPath(n.ino), atime, mtime), op, p.String(), "")
	})
}

// Sub returns a view rooted at directory p (following symlinks), pinned to its
// node: a later rename of p does not redirect it, and writes through it land in
// the overlay.
func (v *view) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	const op = "sub"
	if err := v.enter(ctx, op, p); err != nil {
		return nil, err
	}
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	r, err := v.resolve(ctx, p, true, op, true)
	if err != nil {
		return nil, err
	}
	if !r.Found {
		return nil, vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	n := r.Node
	if n.typ != fs.ModeDir {
		return nil, vfs.NewError(vfs.CodeNotDir, op, p, "")
	}
	if !n.up { // only the root of a view can be a directory not yet up
		return nil, vfs.NewError(vfs.CodeIO, op, p, "directory not materialized")
	}
	return &view{s: v.s, root: n}, nil
}

// ovFile is an open file of the overlay: a handle of the memory store (up files,
// directories) or of the base tree (base files, read-only), answering with the
// guest's path and name.
type ovFile struct {
	vfs.File
	p    vfs.Path
	name string
	info *vfs.Info // directories: what Stat reports
	ro   bool      // a base file: writes fail as on a handle not open for writing
}

func (f *ovFile) fix(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return vfs.Readdress(err, "", f.p.String(), "")
}

func (f *ovFile) Read(b []byte) (int, error) {
	n, err := f.File.Read(b)
	return n, f.fix(err)
}

func (f *ovFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(b, off)
	return n, f.fix(err)
}

func (f *ovFile) roErr(err error, op string) error {
	if f.ro && vfs.CodeOf(err) == vfs.CodeReadOnly {
		return vfs.NewError(vfs.CodePermission, op, f.p, "file not open for writing")
	}
	return f.fix(err)
}

func (f *ovFile) Write(b []byte) (int, error) {
	n, err := f.File.Write(b)
	return n, f.roErr(err, "write")
}

func (f *ovFile) WriteAt(b []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(b, off)
	return n, f.roErr(err, "write")
}

func (f *ovFile) Truncate(size int64) error { return f.roErr(f.File.Truncate(size), "truncate") }

func (f *ovFile) Seek(off int64, whence int) (int64, error) {
	n, err := f.File.Seek(off, whence)
	return n, f.fix(err)
}

func (f *ovFile) Sync() error  { return f.fix(f.File.Sync()) }
func (f *ovFile) Close() error { return f.fix(f.File.Close()) }

func (f *ovFile) Stat() (vfs.Info, error) {
	i, err := f.File.Stat()
	if err != nil {
		return vfs.Info{}, f.fix(err)
	}
	if f.info != nil {
		return *f.info, nil
	}
	i.Name = f.name
	return i, nil
}

// Type returns fs.ModeDir for a directory and 0 for a file.
func (f *ovFile) Type() fs.FileMode {
	if f.info != nil {
		return fs.ModeDir
	}
	return 0
}
