package sqlite

import (
	"context"
	"io/fs"
	"os"
	"time"

	"github.com/capfs/capfs/vfs"
)

// FS is a directory tree in a capfs scratch file: the root Open returns, or a
// subtree Sub pinned. It is safe for concurrent use.
type FS struct {
	st     *store
	root   *node
	origin *node
}

var (
	_ vfs.Backend = (*FS)(nil)
	_ vfs.Locator = (*FS)(nil)
)

// Features reports symlinks, hard links, Chmod, Chtimes and persistence (and
// ReadOnly for a file opened WithReadOnly).
func (f *FS) Features() vfs.Features {
	return vfs.Features{ReadOnly: f.st.cfg.readOnly, Symlinks: true, HardLinks: true, Chmod: true, Chtimes: true, Persistent: true}
}

// Usage returns the bytes charged against the quota (see WithQuota).
func (f *FS) Usage() int64 { return f.st.used.Load() }

// Close commits what is pending, closes the file and releases its lock. Files
// and Subs of this FS fail with closed afterwards. Close of a Sub closes the
// whole file.
func (f *FS) Close() error {
	if !f.st.closed.CompareAndSwap(false, true) {
		return nil
	}
	return f.st.closeAll()
}

// Sync makes everything committed so far durable on stable storage (it survives
// a power loss), whatever the Synchronous setting but SyncOff.
func (f *FS) Sync() error {
	if err := f.st.usable("sync", vfs.Root, false); err != nil {
		return err
	}
	if f.st.w == nil {
		return nil
	}
	if err := f.st.w.flush(f.st.cfg.sync != SyncOff); err != nil {
		return storageError("sync", vfs.Root, err)
	}
	return nil
}

func canceled(op string, p vfs.Path, err error) error {
	return &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
}

// usable returns the error for a call on a closed or failed store, or a
// mutation of a read-only one.
func (s *store) usable(op string, p vfs.Path, mutation bool) error {
	switch {
	case s.closed.Load():
		return vfs.NewError(vfs.CodeClosed, op, p, "the scratch file is closed")
	case s.failed.Load():
		return vfs.NewError(vfs.CodeIO, op, p, "a commit failed; reopen the scratch file")
	case mutation && s.cfg.readOnly:
		return vfs.NewError(vfs.CodeReadOnly, op, p, "")
	}
	return nil
}

// mutate runs one mutating operation: fn checks and changes the tree under the
// locks it takes, executing its statements with writer.exec, and mutate waits
// for the group commit of its batch.
func (s *store) mutate(ctx context.Context, op string, p vfs.Path, fn func() (*batch, error)) error {
	_, err := s.mutateMaybeDeferred(ctx, op, p, func() (*batch, bool, error) {
		b, err := fn()
		return b, false, err
	})
	return err
}

// mutateMaybeDeferred is mutate for an operation whose fn may report that its
// batch need not be waited for (deferred): it is then returned instead, for
// writer.waitFor.
func (s *store) mutateMaybeDeferred(ctx context.Context, op string, p vfs.Path, fn func() (*batch, bool, error)) (*batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, canceled(op, p, err)
	}
	if err := s.usable(op, p, true); err != nil {
		return nil, err
	}
	s.w.enter()
	b, deferred, err := fn()
	if deferred && err == nil && b != nil {
		s.w.leaveDeferred(b)
		return b, nil
	}
	if lerr := s.w.leave(b); lerr != nil && err == nil {
		s.failed.Store(true)
		err = storageError(op, p, lerr)
	}
	return nil, err
}

// exec is writer.exec with the error turned into a vfs error for op on p.
func (s *store) exec(op string, p vfs.Path, fn func() error) (*batch, error) {
	b, err := s.w.exec(fn)
	if err != nil {
		return nil, storageError(op, p, err)
	}
	return b, nil
}

// reserve charges delta bytes to the quota; false, changing nothing, if a
// positive delta would exceed it.
func (s *store) reserve(delta int64) bool {
	if delta <= 0 || s.cfg.quota <= 0 {
		s.used.Add(delta)
		return true
	}
	for {
		u := s.used.Load()
		if u+delta > s.cfg.quota || u+delta < u {
			return false
		}
		if s.used.CompareAndSwap(u, u+delta) {
			return true
		}
	}
}

func quotaError(op string, p vfs.Path) error {
	return vfs.NewError(vfs.CodeQuota, op, p, "storage quota exceeded")
}

// resolve is vfs.Resolve from f's root. The caller holds the tree lock.
func (f *FS) resolve(ctx context.Context, p vfs.Path, follow bool, op string) (vfs.Resolution[*node], error) {
	if r, ok := walk(f.root, p, follow); ok {
		return r, nil
	}
	return vfs.Resolve[*node](ctx, tree{}, f.root, p, follow, op)
}

// Stat returns information on p, following a final symlink.
func (f *FS) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return f.stat(ctx, p, true, "stat")
}

// Lstat returns information on p without following a final symlink.
func (f *FS) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return f.stat(ctx, p, false, "lstat")
}

func (f *FS) stat(ctx context.Context, p vfs.Path, follow bool, op string) (vfs.Info, error) {
	if err := ctx.Err(); err != nil {
		return vfs.Info{}, canceled(op, p, err)
	}
	if err := f.st.usable(op, p, false); err != nil {
		return vfs.Info{}, err
	}
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	r, err := f.resolve(ctx, p, follow, op)
	if err != nil {
		return vfs.Info{}, err
	}
	if !r.Found {
		return vfs.Info{}, vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	name := r.Name
	if r.Followed {
		name = p.Base()
	} else if name == "" {
		name = "."
	}
	return r.Node.info(name), nil
}

// ReadDir lists directory p sorted by name, from the in-memory cache.
func (f *FS) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	const op = "readdir"
	if err := ctx.Err(); err != nil {
		return nil, canceled(op, p, err)
	}
	if err := f.st.usable(op, p, false); err != nil {
		return nil, err
	}
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	n, err := f.dirLocked(ctx, p, op)
	if err != nil {
		return nil, err
	}
	e := n.entries()
	out := make([]vfs.DirEntry, len(e))
	copy(out, e)
	return out, nil
}

// dirLocked resolves p, following links, to a directory. The caller holds the
// tree lock.
func (f *FS) dirLocked(ctx context.Context, p vfs.Path, op string) (*node, error) {
	n, err := f.existing(ctx, p, op)
	if err != nil {
		return nil, err
	}
	if n.typ != fs.ModeDir {
		return nil, vfs.NewError(vfs.CodeNotDir, op, p, "")
	}
	return n, nil
}

// existing resolves p, following links, to what is there (not_found when
// nothing is). The caller holds the tree lock.
func (f *FS) existing(ctx context.Context, p vfs.Path, op string) (*node, error) {
	r, err := f.resolve(ctx, p, true, op)
	if err != nil {
		return nil, err
	}
	if !r.Found {
		return nil, vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	return r.Node, nil
}

// OpenFile opens p with os-style flags; see vfs.Backend. perm is used when
// O_CREATE creates the file. O_TRUNC's truncation is one committed operation.
// A creation is committed with the handle's first Write, Truncate, Sync or
// Close, with any other operation, or within 5 ms, whichever comes first
// (OpenFile does not wait for it): after a crash a created file is either
// there, empty, or absent, and one the handle wrote to or closed is there.
func (f *FS) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	const op = "open"
	if err := ctx.Err(); err != nil {
		return nil, canceled(op, p, err)
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	if acc != os.O_RDONLY && acc != os.O_WRONLY && acc != os.O_RDWR {
		return nil, vfs.NewError(vfs.CodeInvalidPath, op, p, "invalid access mode")
	}
	st := f.st
	create, trunc, write := flag&os.O_CREATE != 0, flag&os.O_TRUNC != 0, acc != os.O_RDONLY
	if !create && !trunc && !write {
		return f.openRead(ctx, p, acc, flag)
	}
	var h *handle
	pending, err := st.mutateMaybeDeferred(ctx, op, p, func() (*batch, bool, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		var b *batch
		var created bool
		var err error
		h, b, created, err = f.openLocked(ctx, p, acc, flag, perm)
		return b, created, err
	})
	if err != nil {
		if h != nil {
			h.Close()
		}
		return nil, err
	}
	h.pending = pending
	return h, nil
}

// openRead opens an existing p for reading only: nothing to commit.
func (f *FS) openRead(ctx context.Context, p vfs.Path, acc, flag int) (vfs.File, error) {
	const op = "open"
	st := f.st
	if err := st.usable(op, p, false); err != nil {
		return nil, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	n, err := f.existing(ctx, p, op)
	if err != nil {
		return nil, err
	}
	return st.newHandle(n, p, acc, flag), nil
}

// openLocked opens p for writing or creation, the tree lock held for
// writing: an existing file (truncated with O_TRUNC) or, with O_CREATE, a
// new one (created true). b is the operation to commit, if any.
func (f *FS) openLocked(ctx context.Context, p vfs.Path, acc, flag int, perm fs.FileMode) (h *handle, b *batch, created bool, err error) {
	const op = "open"
	st := f.st
	create := flag&os.O_CREATE != 0
	excl := create && flag&os.O_EXCL != 0
	r, err := f.resolve(ctx, p, !excl, op)
	if err != nil {
		return nil, nil, false, err
	}
	if r.Found {
		h, b, err := f.openFound(r.Node, p, acc, flag, excl)
		return h, b, false, err
	}
	if !create {
		return nil, nil, false, vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	if p.MustBeDir() {
		return nil, nil, false, vfs.NewError(vfs.CodeIsDir, op, p, "cannot create a file with a trailing slash")
	}
	if err := canCreate(r, op, p); err != nil {
		return nil, nil, false, err
	}
	n, b, err := st.create(r.Parent, r.Name, 0, perm, "", op, p)
	if err != nil {
		return nil, nil, false, err
	}
	return st.newHandle(n, p, acc, flag), b, true, nil
}

// openFound opens the existing file n at p for writing: refused with
// O_EXCL or for a directory, truncated with O_TRUNC.
func (f *FS) openFound(n *node, p vfs.Path, acc, flag int, excl bool) (*handle, *batch, error) {
	const op = "open"
	switch {
	case excl:
		return nil, nil, vfs.NewError(vfs.CodeExists, op, p, "")
	case n.typ == fs.ModeDir:
		return nil, nil, vfs.NewError(vfs.CodeIsDir, op, p, "")
	}
	var b *batch
	if flag&os.O_TRUNC != 0 {
		n.mu.Lock()
		var err error
		b, err = f.st.truncate(n, 0, op, p)
		n.mu.Unlock()
		if err != nil {
			return nil, nil, err
		}
	}
	return f.st.newHandle(n, p, acc, flag), b, nil
}

// canCreate checks that the missing entry r may be created.
func canCreate(r vfs.Resolution[*node], op string, p vfs.Path) error {
	return vfs.CheckCreate(op, p, r.Parent.gone, r.Name)
}

// create makes a new inode of type typ named name in directory d, as one
// operation. The caller holds the tree lock for writing.
func (s *store) create(d *node, name string, typ, perm fs.FileMode, target, op string, p vfs.Path) (*node, *batch, error) {
	charge := entryCharge(name) + NodeCharge + int64(len(target))
	if !s.reserve(charge) {
		return nil, nil, quotaError(op, p)
	}
	now := s.now()
	n := newNode(s.nextIno.Add(1), typ, perm, now)
	n.target = target
	if typ == fs.ModeSymlink {
		n.size = int64(len(target))
	}
	var tgt any
	if typ == fs.ModeSymlink {
		tgt = target
	}
	b, err := s.exec(op, p, func() error {
		w := s.w
		if err := w.x(w.insInode, n.ino, unixMode(typ, n.perm), 1, n.size, now.Unix(), now.Nanosecond(), tgt); err != nil {
			return err
		}
		if err := w.x(w.insDentry, d.ino, name, n.ino); err != nil {
			return err
		}
		return w.x(w.setMtime, now.Unix(), now.Nanosecond(), d.ino)
	})
	if err != nil {
		s.reserve(-charge)
		return nil, nil, err
	}
	d.link(name, n)
	d.mu.Lock()
	d.mtime = now
	d.mu.Unlock()
	return n, b, nil
}

// Mkdir creates directory p with permission perm; its parent must exist.
func (f *FS) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	const op = "mkdir"
	st := f.st
	return st.mutate(ctx, op, p, func() (*batch, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		r, err := f.resolve(ctx, p.WithoutDirMark(), false, op)
		if err != nil {
			return nil, err
		}
		if err := vfs.CheckMkdir(p, r.Found, r.Parent.gone, r.Name); err != nil {
			return nil, err
		}
		_, b, err := st.create(r.Parent, r.Name, fs.ModeDir, perm, "", op, p)
		return b, err
	})
}

// Symlink creates symlink p with the given target text, stored verbatim: data, one
// absolute or climbing above the root included, which no resolution follows
// (vfs.CheckSymlinkTarget).
func (f *FS) Symlink(ctx context.Context, target string, p vfs.Path) error {
	const op = "symlink"
	if err := vfs.CheckSymlinkTarget(op, p, target); err != nil {
		return err
	}
	st := f.st
	return st.mutate(ctx, op, p, func() (*batch, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		r, err := f.resolve(ctx, p.WithoutDirMark(), false, op)
		if err != nil {
			return nil, err
		}
		if r.Found {
			return nil, vfs.NewError(vfs.CodeExists, op, p, "")
		}
		if p.MustBeDir() {
			return nil, vfs.NewError(vfs.CodeNotDir, op, p, "a symlink is not a directory")
		}
		if err := canCreate(r, op, p); err != nil {
			return nil, err
		}
		_, b, err := st.create(r.Parent, r.Name, fs.ModeSymlink, fs.ModePerm, string([]byte(target)), op, p)
		return b, err
	})
}

// Readlink returns the target text of symlink p; invalid_path if p is not one.
func (f *FS) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	const op = "readlink"
	if err := ctx.Err(); err != nil {
		return "", canceled(op, p, err)
	}
	if err := f.st.usable(op, p, false); err != nil {
		return "", err
	}
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	r, err := f.resolve(ctx, p, false, op)
	if err != nil {
		return "", err
	}
	if !r.Found {
		return "", vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	if r.Node.typ != fs.ModeSymlink {
		return "", vfs.NewError(vfs.CodeInvalidPath, op, p, "not a symlink")
	}
	return r.Node.target, nil
}

// lookupEntry resolves p without following a final symlink, for operations on
// an entry itself; with MustBeDir the entry must be a directory.
func (f *FS) lookupEntry(ctx context.Context, p vfs.Path, op string) (vfs.Resolution[*node], error) {
	r, err := f.resolve(ctx, p.WithoutDirMark(), false, op)
	if err != nil {
		return r, err
	}
	if p.MustBeDir() && r.Found && r.Node.typ != fs.ModeDir {
		return r, vfs.NewError(vfs.CodeNotDir, op, p, "")
	}
	return r, nil
}

// Link creates newp as another name for oldp, neither end followed.
// Directories cannot be linked (fs_permission_denied).
func (f *FS) Link(ctx context.Context, oldp, newp vfs.Path) error {
	const op = "link"
	fail := func(code vfs.Code, msg string) error { return vfs.PairError(code, op, oldp, newp, msg) }
	wrap := func(err error) error { return vfs.Readdress(err, op, oldp.String(), newp.String()) }
	st := f.st
	return st.mutate(ctx, op, oldp, func() (*batch, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		src, err := f.lookupEntry(ctx, oldp, op)
		if err != nil {
			return nil, wrap(err)
		}
		if err := vfs.CheckLinkSource(oldp, newp, src.Found, src.Found && src.Node.typ == fs.ModeDir); err != nil {
			return nil, err
		}
		dst, err := f.resolve(ctx, newp.WithoutDirMark(), false, op)
		if err != nil {
			return nil, wrap(err)
		}
		if err := vfs.CheckLinkDest(oldp, newp, dst.Found, dst.Parent.gone, dst.Name); err != nil {
			return nil, err
		}
		if !st.reserve(entryCharge(dst.Name)) {
			return nil, fail(vfs.CodeQuota, "storage quota exceeded")
		}
		n := src.Node
		now := st.now()
		n.mu.Lock()
		defer n.mu.Unlock()
		w := st.w
		b, err := st.exec(op, oldp, func() error {
			if err := w.x(w.insDentry, dst.Parent.ino, dst.Name, n.ino); err != nil {
				return err
			}
			if err := w.x(w.setNlink, n.nlink+1, n.ino); err != nil {
				return err
			}
			return w.x(w.setMtime, now.Unix(), now.Nanosecond(), dst.Parent.ino)
		})
		if err != nil {
			st.reserve(-entryCharge(dst.Name))
			return nil, wrap(err)
		}
		n.nlink++
		dst.Parent.link(dst.Name, n)
		dst.Parent.link2mtime(now)
		return b, nil
	})
}

// Chmod sets the permission, setuid, setgid and sticky bits of p (following a
// final symlink).
func (f *FS) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	const op = "chmod"
	st := f.st
	return st.mutate(ctx, op, p, func() (*batch, error) {
		st.mu.RLock()
		defer st.mu.RUnlock()
		n, err := f.existing(ctx, p, op)
		if err != nil {
			return nil, err
		}
		return st.setPerm(n, mode, op, p)
	})
}

// Chtimes sets the modification time of p (following a final symlink) unless
// mtime is zero. Access times are not kept.
func (f *FS) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	const op = "chtimes"
	st := f.st
	return st.mutate(ctx, op, p, func() (*batch, error) {
		st.mu.RLock()
		defer st.mu.RUnlock()
		n, err := f.existing(ctx, p, op)
		if err != nil {
			return nil, err
		}
		return st.setMtime(n, mtime, op, p)
	})
}

// Sub returns an FS rooted at directory p (following symlinks), sharing this
// one's file, cache and quota; the directory is pinned now.
func (f *FS) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	const op = "sub"
	if err := ctx.Err(); err != nil {
		return nil, canceled(op, p, err)
	}
	if err := f.st.usable(op, p, false); err != nil {
		return nil, err
	}
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	n, err := f.dirLocked(ctx, p, op)
	if err != nil {
		return nil, err
	}
	return &FS{st: f.st, root: n, origin: f.origin}, nil
}

// Resolve returns the canonical location of p (see vfs.Backend.Resolve).
func (f *FS) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	const op = "resolve"
	if err := ctx.Err(); err != nil {
		return vfs.Location{}, canceled(op, p, err)
	}
	if err := f.st.usable(op, p, false); err != nil {
		return vfs.Location{}, err
	}
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	if r, ok := walk(f.root, p, follow); ok {
		loc := vfs.Location{Path: p.Resolved(), Found: r.Found}
		if r.Found {
			loc.Type = r.Node.typ
		}
		return loc, nil
	}
	_, loc, err := vfs.ResolveLocation[*node](ctx, tree{}, f.root, p, follow, op)
	return loc, err
}

// Locate returns the current path of this FS's root from the root Open returned;
// not_found once the directory was removed.
func (f *FS) Locate(ctx context.Context) (vfs.Path, error) {
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	var names []string
	for n := f.root; n != f.origin; n = n.parent {
		if n == nil || n.gone {
			return vfs.Path{}, vfs.NewError(vfs.CodeNotFound, "locate", vfs.Root, "the directory was removed")
		}
		names = append(names, n.name)
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
