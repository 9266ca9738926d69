// Package memory is an in-memory vfs.Backend: an ephemeral tree of inodes with
// symlinks, hard links, permission bits and modification times, following the
// semantics of package os (and Linux) wherever they are defined.
//
// # Guarantees
//
//   - The tree is a real graph of nodes, not a map of path strings: directories hold
//     their entries, files may have several names (hard links), and an open File keeps
//     working on its inode after the name is removed or replaced, as on POSIX.
//   - Paths resolve with the shared resolver vfs.Resolve, beneath the root, with the
//     follow rules documented on vfs.Backend: a symlink can never lead outside the
//     root (path_outside_sandbox), and at most vfs.MaxSymlinks links are followed.
//   - Sub pins the directory node: the returned *FS shares storage, lock and quota,
//     but a later rename or removal of the path does not redirect it, and its symlinks
//     resolve beneath the new root.
//   - Every File has its own offset; O_APPEND writes land at the end of the file
//     atomically; writes and truncations past the end zero-fill; O_EXCL is atomic.
//   - With WithQuota, the bytes charged never exceed the quota, and they are what
//     the tree really holds (see WithQuota): file data by capacity, symlink targets,
//     and a fixed charge per node and per entry plus the entry's name. An
//     operation that would exceed it (a Write, WriteAt or Truncate, creating a
//     file, directory, symlink or hard link, or renaming to a longer name) fails
//     with quota_exceeded and changes nothing (no partial write). Names and
//     symlink targets are copied in, so a stored name never keeps a larger guest
//     string alive, and a directory left holding under a quarter of its peak
//     entries is rebuilt at its size, so emptied directories do not keep room
//     the quota no longer charges.
//   - All methods are safe for concurrent use. Tree operations share a
//     readers-writer lock (lookups run in parallel); file contents have a lock per
//     inode, so reads and writes of different files do not contend; Stat reads an
//     inode's metadata without locking it, yet always sees one consistent state.
//     StatFileInfo's answer is such a state, immutable once returned.
//   - A path with no symlink to follow resolves by a direct walk of the tree, to the
//     answer vfs.Resolve would give; lookups of deep paths are memoized (valid until
//     the next change to any directory's entries), and directory listings are
//     cached sorted until the directory changes: a listing costs one copy.
//
// # Policies pinned here
//
//   - Permission bits are recorded, not enforced: the backend behaves like a
//     filesystem used by root. Access control belongs to the capability layer.
//     Creation stores perm as given (no umask); Chmod keeps the type and sets the
//     permission, setuid, setgid and sticky bits.
//   - Write, WriteAt or Truncate through a handle not opened for writing, and Read
//     or ReadAt through one not opened for reading, fail with fs_permission_denied
//     ("file not open for writing"/"...reading"), where os reports EBADF.
//   - WriteAt on an O_APPEND handle fails with invalid_path, as in package os.
//   - Reading a directory handle, or opening a directory with a write mode, O_TRUNC
//     or O_CREATE, fails with is_a_directory. O_TRUNC on a file truncates it
//     whatever the access mode, as Linux does.
//   - Remove or Rename of the root (or of a Sub's root, through that Sub) fails with
//     invalid_path. Hard links to directories fail with fs_permission_denied (EPERM).
//   - O_CREATE through a dangling final symlink creates the link's target when it
//     resolves beneath the root (as package os does); O_CREATE|O_EXCL never follows
//     and fails with already_exists on any existing name, dangling symlinks included.
//   - Symlink targets are stored verbatim; an empty target, a target longer than
//     vfs.MaxPathLen or one containing NUL fails with invalid_path.
//   - Access times are not kept: Chtimes sets the modification time only.
//   - Info.Size of a directory is its number of entries; Info.Nlink of a directory
//     is 2 plus its number of subdirectories.
//   - Operations check their context on entry (and the resolver periodically).
//
// # Not guaranteed
//
// Nothing survives the process (Features.Persistent is false). Files are stored
// contiguously, so a sparse file (a write far past the end, a large Truncate) holds
// its whole size in memory. Without WithQuota and WithMaxFileSize a caller can grow
// a file until the process runs out of memory; hosts serving untrusted guests should
// set both. What the quota charges is the data structures' measured size, not the
// Go allocator's: an allocation is rounded up to its size class (at most an eighth
// more for a file up to 32 KiB, less than 8 KiB more for a larger one), a file
// being reallocated briefly holds its old and new copies, the store keeps a
// fixed-size cache of resolved paths (at most 1024 paths). A node once asked
// for its status through StatFileInfo keeps the last one when its name fits
// in 24 bytes (64 bytes, within NodeCharge and DirCharge; a longer name's
// status is made afresh each time). Handles, Subs and open listings are the
// caller's, not charged.
package memory

import (
	"context"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/capfs/capfs/vfs"
)

// FS is an in-memory filesystem tree. The zero value is not usable; call New.
// An FS is safe for concurrent use.
type FS struct {
	st     *store
	root   *node
	origin *node // the root of the FS that New returned and Sub chains started from
	// located is Locate's last answer, kept while the tree's generation it
	// was found at is current (only a change of entries can move root).
	located atomic.Pointer[location]
}

// location is a Locate answer at a tree generation.
type location struct {
	gen uint64
	p   vfs.Path
}

var (
	_ vfs.Backend = (*FS)(nil)
	_ vfs.Locator = (*FS)(nil)
)

// Option configures New.
type Option func(*store)

// WithQuota limits the bytes charged for what the filesystem (and every FS Sub
// derives from it) holds to bytes. bytes <= 0 means no limit. Charged are:
//
//   - a regular file's data by its capacity, not its length, once per inode (hard
//     links share it), until its last name and last handle are gone. A file written
//     from empty in one call is allocated at exactly its size; a file that grows
//     past its capacity is reallocated with slack (twice the old capacity below
//     64 MiB, 1.25 times above, never past WithMaxFileSize), and the slack is
//     charged too, taken only as far as the quota allows: a file can always grow
//     to whatever the quota leaves, and slack held by one file can make a write
//     to another fail early (by at most the slack: less than the file's size
//     below 64 MiB, a fifth of its capacity above). A truncation that leaves
//     at least 4 KiB and more than half of the capacity unused reallocates the file
//     at its size and gives the rest back;
//   - NodeCharge per file or symlink, DirCharge per directory (the root aside);
//   - a symlink's target, byte for byte;
//   - EntryCharge plus the name's length per directory entry, hard links included.
//
// An operation that would exceed the quota fails with quota_exceeded, changing
// nothing: Write, WriteAt, Truncate, OpenFile with O_CREATE, Mkdir, Symlink, Link,
// and Rename to a longer name. Usage reports the total.
func WithQuota(bytes int64) Option {
	return func(s *store) {
		if bytes < 0 {
			bytes = 0
		}
		s.quota = bytes
	}
}

// WithMaxFileSize limits the size of any single file to bytes; growing a file past
// it fails with file_too_large. bytes <= 0 means no limit beyond the platform's.
func WithMaxFileSize(bytes int64) Option {
	return func(s *store) {
		if bytes < 0 {
			bytes = 0
		}
		s.maxFile = bytes
	}
}

// WithClock sets the clock used for modification times (time.Now by default). It
// lets tests pin times. now must be safe for concurrent use.
func WithClock(now func() time.Time) Option {
	return func(s *store) {
		if now != nil {
			s.clock = now
		}
	}
}

// New returns an empty filesystem whose root is a directory with mode 0755.
func New(opts ...Option) *FS {
	st := &store{clock: time.Now}
	for _, o := range opts {
		o(st)
	}
	root := st.newNode(fs.ModeDir, 0o755, st.now())
	return &FS{st: st, root: root, origin: root}
}

// Usage returns the bytes currently charged, across the whole store (shared with
// every Sub): what WithQuota limits (see there for what is charged). An empty FS
// uses 0.
func (f *FS) Usage() int64 { return f.st.used.Load() }

// DataUsage returns the part of Usage that is file data: the capacity held by
// files, counted once per inode, open but unlinked files included.
func (f *FS) DataUsage() int64 { return f.st.data.Load() }

// Features reports symlinks, hard links, Chmod and Chtimes; the tree is not
// persistent.
func (f *FS) Features() vfs.Features {
	return vfs.Features{Symlinks: true, HardLinks: true, Chmod: true, Chtimes: true}
}

func canceled(op string, p vfs.Path, err error) error {
	return &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
}

// resolve is vfs.Resolve from f's root, answered by walk when the path has no
// symlink to follow. The caller holds store.mu.
func (f *FS) resolve(ctx context.Context, p vfs.Path, follow bool, op string) (vfs.Resolution[*node], error) {
	if r, ok := walk(f.root, p, follow); ok {
		return r, nil
	}
	return vfs.Resolve[*node](ctx, tree{}, f.root, p, follow, op)
}

// Stat returns information on p, following a final symlink.
func (f *FS) Stat(ctx context.Context, p vfs.Path) (i vfs.Info, err error) {
	err = f.stat(ctx, p, true, "stat", &i)
	return i, err
}

// Lstat returns information on p without following a final symlink.
func (f *FS) Lstat(ctx context.Context, p vfs.Path) (i vfs.Info, err error) {
	err = f.stat(ctx, p, false, "lstat", &i)
	return i, err
}

// stat fills *i for Stat (follow) or Lstat. It writes in place: an Info is large,
// and returned by value through two calls it was copied twice over.
func (f *FS) stat(ctx context.Context, p vfs.Path, follow bool, op string, i *vfs.Info) error {
	if err := ctx.Err(); err != nil {
		return canceled(op, p, err)
	}
	// No defer: nothing between the lock and the unlock can panic.
	f.st.mu.RLock()
	n, name, err := f.statNode(ctx, p, follow, op)
	if err != nil {
		f.st.mu.RUnlock()
		return err
	}
	n.infoTo(i, name)
	f.st.mu.RUnlock()
	return nil
}

// statNode finds the node a Stat (follow) or Lstat of p reports on, and the name
// its Info carries: p's last component, whether or not a final symlink was
// followed (Info is named by the path given, as os.Stat does), "." for the root.
// The caller holds store.mu for reading.
func (f *FS) statNode(ctx context.Context, p vfs.Path, follow bool, op string) (*node, string, error) {
	var r vfs.Resolution[*node]
	var err error
	if !deep(p.Raw()) {
		// The common case, answered in registers (lookup, without its cache).
		if _, n, name, ok := walkTo(f.root, p, follow); ok {
			switch {
			case n == nil:
				return nil, "", vfs.NewError(vfs.CodeNotFound, op, p, "")
			case name == "":
				name = "."
			}
			return n, name, nil
		}
		r, err = vfs.Resolve[*node](ctx, tree{}, f.root, p, follow, op)
	} else {
		r, err = f.lookup(ctx, p, follow, op)
	}
	if err != nil {
		return nil, "", err
	}
	if !r.Found {
		return nil, "", vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	name := r.Name
	if r.Followed {
		name = p.Base()
	} else if name == "" {
		name = "."
	}
	return r.Node, name, nil
}

// ReadDir lists directory p sorted by name. The listing is cached per directory
// until the directory changes, so repeated listings cost one copy.
func (f *FS) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	const op = "readdir"
	if err := ctx.Err(); err != nil {
		return nil, canceled(op, p, err)
	}
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	n, err := f.dirLocked(ctx, p, op)
	if err != nil {
		return nil, err
	}
	e := n.listing(f.st)
	out := make([]vfs.DirEntry, len(e))
	copy(out, e)
	return out, nil
}

// OpenFile opens p with os-style flags; see vfs.Backend. perm (its permission,
// setuid, setgid and sticky bits) is used when O_CREATE creates the file.
func (f *FS) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	const op = "open"
	if err := ctx.Err(); err != nil {
		return nil, canceled(op, p, err)
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	if acc != os.O_RDONLY && acc != os.O_WRONLY && acc != os.O_RDWR {
		return nil, vfs.NewError(vfs.CodeInvalidPath, op, p, "invalid access mode")
	}
	if flag&os.O_CREATE != 0 {
		f.st.mu.Lock()
		defer f.st.mu.Unlock()
		return f.openLocked(ctx, p, flag, acc, perm)
	}
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	return f.openLocked(ctx, p, flag, acc, perm)
}

// openLocked is OpenFile under the tree lock: held for writing if flag has
// O_CREATE, else for reading. It is separate so OpenFile's defers stay cheap.
func (f *FS) openLocked(ctx context.Context, p vfs.Path, flag, acc int, perm fs.FileMode) (vfs.File, error) {
	const op = "open"
	create := flag&os.O_CREATE != 0
	excl := create && flag&os.O_EXCL != 0
	trunc := flag&os.O_TRUNC != 0
	write := acc != os.O_RDONLY

	var r vfs.Resolution[*node]
	var err error
	if create {
		r, err = f.resolve(ctx, p, !excl, op)
	} else {
		r, err = f.lookup(ctx, p, true, op)
	}
	if err != nil {
		return nil, err
	}
	n := r.Node
	if r.Found {
		if excl {
			return nil, vfs.NewError(vfs.CodeExists, op, p, "")
		}
		if n.typ == fs.ModeDir {
			if write || trunc || create {
				return nil, vfs.NewError(vfs.CodeIsDir, op, p, "")
			}
			return newHandle(f.st, n, p, acc, flag), nil
		}
		if trunc {
			// O_TRUNC truncates whatever the access mode, as on Linux, and sets
			// the mtime even if the file was empty.
			n.mu.Lock()
			f.st.resizeData(n, 0)
			f.st.touchData(n)
			n.mu.Unlock()
		}
		// The node is reachable, so it has a name, and the tree lock excludes
		// Remove: no release can race with this increment.
		n.opens.Add(1)
		return newHandle(f.st, n, p, acc, flag), nil
	}
	if !create {
		return nil, vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	if p.MustBeDir() {
		return nil, vfs.NewError(vfs.CodeIsDir, op, p, "cannot create a file with a trailing slash")
	}
	if err := f.canCreate(r, op, p); err != nil {
		return nil, err
	}
	if !f.st.reserve(NodeCharge + entryCharge(r.Name)) {
		return nil, quotaError(op, p)
	}
	now := f.st.now()
	n = f.st.newNode(0, perm, now)
	n.opens.Store(1)
	f.st.addEntry(r.Parent, r.Name, n, now)
	return newHandle(f.st, n, p, acc, flag), nil
}

// canCreate checks that a missing entry r may be created. The caller holds the
// tree lock for writing.
func (f *FS) canCreate(r vfs.Resolution[*node], op string, p vfs.Path) error {
	return vfs.CheckCreate(op, p, r.Parent.dir.gone, r.Name)
}

// Mkdir creates directory p with permission perm; its parent must exist. An
// existing entry, a dangling symlink included, fails with already_exists.
func (f *FS) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	const op = "mkdir"
	if err := ctx.Err(); err != nil {
		return canceled(op, p, err)
	}
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	r, err := f.resolve(ctx, p.WithoutDirMark(), false, op)
	if err != nil {
		return err
	}
	if err := vfs.CheckMkdir(p, r.Found, r.Parent.dir.gone, r.Name); err != nil {
		return err
	}
	if !f.st.reserve(DirCharge + entryCharge(r.Name)) {
		return quotaError(op, p)
	}
	now := f.st.now()
	f.st.addEntry(r.Parent, r.Name, f.st.newNode(fs.ModeDir, perm, now), now)
	return nil
}

// lookupEntry resolves p without following a final symlink, for operations on a
// directory entry itself (Remove, Rename, Link). If p is marked MustBeDir the entry
// must be a directory (a symlink to one does not do), as rmdir and rename require.
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

// Remove removes a file, symlink or empty directory. Open handles on a removed
// file keep working on its data.
func (f *FS) Remove(ctx context.Context, p vfs.Path) error {
	const op = "remove"
	if err := ctx.Err(); err != nil {
		return canceled(op, p, err)
	}
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	r, err := f.lookupEntry(ctx, p, op)
	if err != nil {
		return err
	}
	if err := vfs.CheckRemove(op, p, r, fullDir); err != nil {
		return err
	}
	n := r.Node
	f.st.delEntry(r.Parent, r.Name, n, f.st.now())
	f.st.reserve(-entryCharge(r.Name))
	f.st.unlinked(n)
	return nil
}

// Rename moves from to to; see vfs.Backend. Errors carry from as Path and to as
// Dest.
func (f *FS) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	const op = "rename"
	if err := ctx.Err(); err != nil {
		return canceled(op, from, err)
	}
	wrap := func(err error) error { return vfs.Readdress(err, op, from.String(), to.String()) }
	if err := vfs.CheckRenameFlags(from, to, flags); err != nil {
		return err
	}
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	src, err := f.lookupEntry(ctx, from, op)
	if err != nil {
		return wrap(err)
	}
	dst, err := f.lookupEntry(ctx, to, op)
	if err != nil {
		return wrap(err)
	}
	act, err := vfs.CheckRename(nodeOps.RenameEnds(from, to, flags, src, dst))
	if err != nil || act == vfs.RenameNone {
		return err
	}
	sn, dn, now := src.Node, dst.Node, f.st.now()
	switch act {
	case vfs.RenameSwap:
		f.st.delEntry(src.Parent, src.Name, sn, now)
		f.st.delEntry(dst.Parent, dst.Name, dn, now)
		f.st.addEntry(src.Parent, src.Name, dn, now)
		f.st.addEntry(dst.Parent, dst.Name, sn, now)
		return nil
	case vfs.RenameReplace:
		f.st.delEntry(src.Parent, src.Name, sn, now)
		f.st.delEntry(dst.Parent, dst.Name, dn, now)
		f.st.unlinked(dn)
		f.st.addEntry(dst.Parent, dst.Name, sn, now)
		// The destination's entry now names sn; the source's is gone.
		f.st.reserve(-entryCharge(src.Name))
		return nil
	}
	if err := f.canCreate(dst, op, to); err != nil {
		return wrap(err)
	}
	// The entry changes name: a longer one is charged the difference.
	if !f.st.reserve(entryCharge(dst.Name) - entryCharge(src.Name)) {
		return wrap(quotaError(op, to))
	}
	f.st.delEntry(src.Parent, src.Name, sn, now)
	f.st.addEntry(dst.Parent, dst.Name, sn, now)
	return nil
}

// fullDir reports whether n is a directory that holds entries.
func fullDir(n *node) (bool, error) { return n.typ == fs.ModeDir && len(n.dir.children) > 0, nil }

// nodeOps is what the shared rename check asks of nodes.
var nodeOps = vfs.NodeOps[*node]{
	IsDir: func(n *node) bool { return n.typ == fs.ModeDir },
	Above: isAncestor,
	Full:  fullDir,
}

// Symlink creates symlink p with the given target text, stored verbatim: data, one
// absolute or climbing above the root included, which no resolution follows
// (vfs.CheckSymlinkTarget).
func (f *FS) Symlink(ctx context.Context, target string, p vfs.Path) error {
	const op = "symlink"
	if err := ctx.Err(); err != nil {
		return canceled(op, p, err)
	}
	if err := vfs.CheckSymlinkTarget(op, p, target); err != nil {
		return err
	}
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	r, err := f.resolve(ctx, p.WithoutDirMark(), false, op)
	if err != nil {
		return err
	}
	if r.Found {
		return vfs.NewError(vfs.CodeExists, op, p, "")
	}
	if p.MustBeDir() {
		return vfs.NewError(vfs.CodeNotDir, op, p, "a symlink is not a directory")
	}
	if err := f.canCreate(r, op, p); err != nil {
		return err
	}
	if !f.st.reserve(NodeCharge + int64(len(target)) + entryCharge(r.Name)) {
		return quotaError(op, p)
	}
	now := f.st.now()
	n := f.st.newNode(fs.ModeSymlink, fs.ModePerm, now)
	// A copy: the target may share memory with a much larger string.
	t := strings.Clone(target)
	n.link = &t
	n.size.Store(int64(len(target)))
	f.st.addEntry(r.Parent, r.Name, n, now)
	return nil
}

// quotaError is the error of an operation refused by the quota.
func quotaError(op string, p vfs.Path) error {
	return vfs.NewError(vfs.CodeQuota, op, p, "storage quota exceeded")
}

// Readlink returns the target text of symlink p; invalid_path if p is not a
// symlink.
func (f *FS) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	const op = "readlink"
	if err := ctx.Err(); err != nil {
		return "", canceled(op, p, err)
	}
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	r, err := f.lookup(ctx, p, false, op)
	if err != nil {
		return "", err
	}
	if !r.Found {
		return "", vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	if r.Node.typ != fs.ModeSymlink {
		return "", vfs.NewError(vfs.CodeInvalidPath, op, p, "not a symlink")
	}
	return r.Node.target(), nil
}

// Link creates newp as another name for oldp, neither end followed (linking a
// symlink links the symlink itself). Directories cannot be linked. Errors carry
// oldp as Path and newp as Dest.
func (f *FS) Link(ctx context.Context, oldp, newp vfs.Path) error {
	const op = "link"
	if err := ctx.Err(); err != nil {
		return canceled(op, oldp, err)
	}
	fail := func(code vfs.Code, msg string) error { return vfs.PairError(code, op, oldp, newp, msg) }
	wrap := func(err error) error { return vfs.Readdress(err, op, oldp.String(), newp.String()) }
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	src, err := f.lookupEntry(ctx, oldp, op)
	if err != nil {
		return wrap(err)
	}
	if err := vfs.CheckLinkSource(oldp, newp, src.Found, src.Found && src.Node.typ == fs.ModeDir); err != nil {
		return err
	}
	dst, err := f.resolve(ctx, newp.WithoutDirMark(), false, op)
	if err != nil {
		return wrap(err)
	}
	if err := vfs.CheckLinkDest(oldp, newp, dst.Found, dst.Parent.dir.gone, dst.Name); err != nil {
		return err
	}
	if !f.st.reserve(entryCharge(dst.Name)) {
		return fail(vfs.CodeQuota, "storage quota exceeded")
	}
	n := src.Node
	n.mu.Lock()
	n.beginMeta()
	n.nlink.Add(1)
	n.endMeta()
	n.mu.Unlock()
	f.st.addEntry(dst.Parent, dst.Name, n, f.st.now())
	return nil
}

// Chmod sets the permission, setuid, setgid and sticky bits of p (following a final
// symlink), keeping its type.
func (f *FS) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	const op = "chmod"
	if err := ctx.Err(); err != nil {
		return canceled(op, p, err)
	}
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	r, err := f.lookup(ctx, p, true, op)
	if err != nil {
		return err
	}
	if !r.Found {
		return vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	n := r.Node
	n.mu.Lock()
	n.beginMeta()
	n.perm.Store(uint32(mode & permBits))
	n.endMeta()
	n.mu.Unlock()
	return nil
}

// Chtimes sets the modification time of p (following a final symlink) unless mtime
// is zero. Access times are not kept, so atime is ignored.
func (f *FS) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	return f.chtimes(ctx, "chtimes", p, true, mtime)
}

// Sub returns an *FS rooted at directory p (following symlinks), sharing this one's
// storage, lock and quota. The directory node is pinned now: renaming or removing p
// later does not redirect the result, and symlinks in it resolve beneath it.
func (f *FS) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	const op = "sub"
	if err := ctx.Err(); err != nil {
		return nil, canceled(op, p, err)
	}
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	n, err := f.dirLocked(ctx, p, op)
	if err != nil {
		return nil, err
	}
	return &FS{st: f.st, root: n, origin: f.origin}, nil
}

// dirLocked resolves p, following links, to a directory node; the caller holds the
// tree lock.
func (f *FS) dirLocked(ctx context.Context, p vfs.Path, op string) (*node, error) {
	r, err := f.lookup(ctx, p, true, op)
	if err != nil {
		return nil, err
	}
	if !r.Found {
		return nil, vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	if r.Node.typ != fs.ModeDir {
		return nil, vfs.NewError(vfs.CodeNotDir, op, p, "")
	}
	return r.Node, nil
}
