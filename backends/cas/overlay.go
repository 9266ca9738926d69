package cas

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
)

// Overlay is a writable vfs.Backend over a tree of a Store: reads fall through
// to the base tree, writes go to an upper layer in memory, and Commit stores the
// merged view and returns its root digest. The base tree is never changed (it is
// immutable); the store gains only the blobs and directories that differ.
//
// Opening is O(1): nothing of the base tree is read (the root Directory's blob is
// only checked to exist). Copy-up is per path, as in the git overlay (package
// gitree): reading an untouched path reads the base tree, directory by directory
// and blob by blob, and copies nothing. The first write to a base file (an open
// for writing or with O_TRUNC, a Chmod, a Chtimes, a Link) copies that one file
// into the memory layer; the directories on its path become upper directories
// that record only their differences from the base Directory beneath them
// (entries added or replaced, and whiteouts for removed base entries), so the
// cost of a write is proportional to its path's length and the file's size, not
// to the tree's size. Removing a base entry records a whiteout: the path, and
// everything beneath a removed directory, disappears; creating it again shows
// only the new entry. Renaming a base directory is lazy: it keeps overlaying the
// same base Directory under its new name (nothing beneath it is read) and a
// whiteout hides the old name. ReadDir merges the upper entries with the base
// Directory's, minus whiteouts, sorted by name. Symlinks resolve with the shared
// resolver vfs.Resolve over the merged view, beneath the overlay's root.
//
// Semantics are the memory backend's (package memory, which holds the contents
// of written files and whose options, such as a quota, apply to them): hard
// links (a base file or symlink linked is copied up first), Chmod, Chtimes,
// O_APPEND, independent offsets, and an open file keeps working after its name
// is removed. A handle opened for reading on a base file reads the base blob: if
// the file is copied up later, that handle keeps reading the old content, as on
// Linux's overlayfs. Base entries report what the read-only FS reports (Info.Sys
// is an *Entry), with the time the overlay was opened as their ModTime.
//
// Commit records what a Directory can: names, contents, the owner-execute bit of
// files, link targets; other permission bits, times and hard-link identity are
// not kept. It builds the new tree from the base tree and the upper layer: a
// directory the overlay did not change keeps its digest without being read or
// hashed, and so does every untouched file and symlink of a changed directory;
// a changed directory whose entries end up equal to its base Directory's keeps
// that digest too; only the other directories are encoded and hashed. Every file
// in the memory layer is hashed at each Commit (base files never copied up are
// not read). Because unchanged digests are reused without being read, the base
// tree must stay in the store while the overlay is used: name it (SaveRoot), or
// keep within the grace period of the pin OpenOverlay and each Commit refresh.
//
// All methods are safe for concurrent use: the merged view is guarded by one
// readers-writer lock (lookups run in parallel; mutations are exclusive), file
// contents by the memory layer's per-file locks. Commit excludes the overlay's
// mutating methods while it walks the view; a write through a file already open
// for writing is in the result whole or not at all.
type Overlay struct {
	v *ovView

	commitMu sync.Mutex // serializes Commit
	encoded  int        // directories encoded by the last Commit, for tests; guarded by commitMu
	baseMu   sync.Mutex
	base     Digest // guarded by baseMu
}

var _ vfs.Backend = (*Overlay)(nil)

// OpenOverlay opens a writable overlay over the tree whose root Directory is
// root. opts configure the memory layer that holds written files (memory.WithQuota,
// memory.WithMaxFileSize), which hosts serving untrusted guests should set; a base
// file copied up counts against them with its whole size. Nothing of the tree is
// read: a root the store does not hold is not_found. The root is pinned for the
// grace period of later garbage collections (see GC).
func (s *Store) OpenOverlay(ctx context.Context, root Digest, opts ...memory.Option) (*Overlay, error) {
	if err := ctx.Err(); err != nil {
		return nil, &vfs.Error{Code: vfs.CodeCanceled, Op: "open", Path: ".", Err: err}
	}
	ok, err := s.Has(root)
	if err != nil {
		return nil, vfs.NewError(vfs.CodeIO, "open", vfs.Root, err.Error())
	}
	if !ok {
		return nil, vfs.NewError(vfs.CodeNotFound, "open", vfs.Root, "the store has no tree "+root.String())
	}
	if err := s.pin(root); err != nil {
		return nil, vfs.NewError(vfs.CodeIO, "open", vfs.Root, hostless(err).Error())
	}
	now := time.Now().Round(0)
	base := &FS{st: s, cache: &dirCache{m: map[Digest]*ents{}, max: 8192}, root: node{typ: fs.ModeDir, d: root}, modTime: now}
	st := &ovState{base: base, store: memory.New(opts...)}
	top := &unode{typ: fs.ModeDir, lo: base.root}
	st.materialize(top, nil)
	return &Overlay{v: &ovView{s: st, root: top}, base: root}, nil
}

// Base returns the root digest the overlay was opened on, or the last one Commit
// returned.
func (o *Overlay) Base() Digest {
	o.baseMu.Lock()
	defer o.baseMu.Unlock()
	return o.base
}

// Close discards the upper layer's bookkeeping: afterwards every method fails
// with closed (files already open stay usable). Closing again does nothing.
func (o *Overlay) Close() error {
	o.v.s.closed.Store(true)
	return nil
}

// Commit stores the overlay's merged view and returns its root digest, which
// becomes Base. The overlay stays open and writable, showing the same tree. The
// result is pinned for the store's grace period (see GC) and, with name, saved as
// that root before the store's ingest lock is released, so no collection comes
// between. A name or symlink target that is not UTF-8 cannot be held by a
// Directory: Commit then fails with invalid_path naming the entry, and stores no
// root.
func (o *Overlay) Commit(ctx context.Context, name string) (Digest, error) {
	const op = "commit"
	if name != "" && !ValidRootName(name) {
		return Digest{}, vfs.NewError(vfs.CodeInvalidPath, op, vfs.Root, fmt.Sprintf("invalid root name %q", trunc(name)))
	}
	if err := o.v.enter(ctx, op, vfs.Root); err != nil {
		return Digest{}, err
	}
	o.commitMu.Lock()
	defer o.commitMu.Unlock()
	s := o.v.s
	st := s.base.st
	defer st.ingest()()
	s.mu.RLock()
	o.encoded = 0
	d, err := o.writeDir(ctx, o.v.root, vfs.Root)
	s.mu.RUnlock()
	if err != nil {
		return Digest{}, err
	}
	if err := st.pin(d); err != nil {
		return Digest{}, vfs.NewError(vfs.CodeIO, op, vfs.Root, hostless(err).Error())
	}
	if name != "" {
		if err := st.SaveRoot(name, d); err != nil {
			return Digest{}, vfs.NewError(vfs.CodeIO, op, vfs.Root, hostless(err).Error())
		}
	}
	o.baseMu.Lock()
	o.base = d
	o.baseMu.Unlock()
	return d, nil
}

// writeDir stores directory d (at p, for errors) and returns its digest. The
// caller holds s.mu for reading and the store's ingest lock.
func (o *Overlay) writeDir(ctx context.Context, d *unode, p vfs.Path) (Digest, error) {
	const op = "commit"
	if err := ctx.Err(); err != nil {
		return Digest{}, &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
	}
	if !d.up || (len(d.ents) == 0 && len(d.white) == 0 && !d.lo.d.IsZero()) {
		return d.lo.d, nil // unchanged: not read, not hashed
	}
	s := o.v.s
	ld, err := s.lower(ctx, d)
	if err != nil {
		return Digest{}, readdress(storeErr(err), op, p)
	}
	var out Directory
	addBase := func(name string, n node) {
		switch n.typ {
		case fs.ModeDir:
			out.Dirs = append(out.Dirs, DirNode{Name: name, Digest: n.d})
		case fs.ModeSymlink:
			out.Symlinks = append(out.Symlinks, SymlinkNode{Name: name, Target: n.target})
		default:
			out.Files = append(out.Files, FileNode{Name: name, Digest: n.d, Executable: n.exec})
		}
	}
	if ld != nil {
		for i, name := range ld.names {
			if _, ok := d.ents[name]; ok {
				continue
			}
			if _, ok := d.white[name]; ok {
				continue
			}
			addBase(name, ld.nodes[i])
		}
	}
	for name, c := range d.ents {
		cp, err := p.Child(name)
		if err != nil {
			return Digest{}, err
		}
		if !utf8.ValidString(name) {
			return Digest{}, vfs.NewError(vfs.CodeInvalidPath, op, cp, "a Directory holds UTF-8 names only")
		}
		switch {
		case !c.up:
			addBase(name, c.lo)
		case c.typ == fs.ModeDir:
			dg, err := o.writeDir(ctx, c, cp)
			if err != nil {
				return Digest{}, err
			}
			out.Dirs = append(out.Dirs, DirNode{Name: name, Digest: dg})
		case c.typ == fs.ModeSymlink:
			if !utf8.ValidString(c.target) {
				return Digest{}, vfs.NewError(vfs.CodeInvalidPath, op, cp, "a Directory holds UTF-8 symlink targets only")
			}
			out.Symlinks = append(out.Symlinks, SymlinkNode{Name: name, Target: c.target})
		default:
			dg, exec, err := o.writeFile(ctx, c, cp)
			if err != nil {
				return Digest{}, err
			}
			out.Files = append(out.Files, FileNode{Name: name, Digest: dg, Executable: exec})
		}
	}
	slices.SortFunc(out.Files, func(a, b FileNode) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(out.Dirs, func(a, b DirNode) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(out.Symlinks, func(a, b SymlinkNode) int { return strings.Compare(a.Name, b.Name) })
	if ld != nil && sameAs(&out, ld) {
		return d.lo.d, nil
	}
	b, err := out.Encode()
	if err != nil {
		return Digest{}, vfs.NewError(vfs.CodeInvalidPath, op, p, err.Error())
	}
	o.encoded++
	dg, err := s.base.st.putBytes(DigestOf(b), b)
	if err != nil {
		return Digest{}, ioErr(op, p, err)
	}
	return dg, nil
}

// sameAs reports whether d (each list sorted) holds exactly the entries of e.
func sameAs(d *Directory, e *ents) bool {
	if len(d.Files)+len(d.Dirs)+len(d.Symlinks) != len(e.names) {
		return false
	}
	for _, f := range d.Files {
		n, ok := e.lookup(f.Name)
		if !ok || n.typ != 0 || n.d != f.Digest || n.exec != f.Executable {
			return false
		}
	}
	for _, s := range d.Dirs {
		n, ok := e.lookup(s.Name)
		if !ok || n.typ != fs.ModeDir || n.d != s.Digest {
			return false
		}
	}
	for _, l := range d.Symlinks {
		n, ok := e.lookup(l.Name)
		if !ok || n.typ != fs.ModeSymlink || n.target != l.Target {
			return false
		}
	}
	return true
}

// writeFile stores the contents of up file c and returns its digest and
// executable bit. The contents are read with one ReadAt under the memory
// layer's file lock, so a concurrent write is in them whole or not at all.
func (o *Overlay) writeFile(ctx context.Context, c *unode, p vfs.Path) (Digest, bool, error) {
	const op = "commit"
	s := o.v.s
	f, err := s.store.OpenFile(ctx, inoPath(c.ino), os.O_RDONLY, 0)
	if err != nil {
		return Digest{}, false, vfs.Readdress(err, op, p.String(), "")
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return Digest{}, false, vfs.Readdress(err, op, p.String(), "")
	}
	size := info.Size
	var data []byte
	for {
		buf := make([]byte, size+1)
		n, err := f.ReadAt(buf, 0)
		if err != nil && err != io.EOF {
			return Digest{}, false, vfs.Readdress(err, op, p.String(), "")
		}
		if int64(n) <= size {
			data = buf[:n]
			break
		}
		size = 2*size + 4096 // grew since the Stat: read again, whole
	}
	var dg Digest
	if len(data) <= smallBlob {
		dg, err = s.base.st.putBytes(DigestOf(data), data)
	} else {
		dg, err = s.base.st.put(ctx, bytes.NewReader(data), nil, int64(len(data)))
	}
	if err != nil {
		return Digest{}, false, ioErr(op, p, err)
	}
	return dg, info.Mode&0o100 != 0, nil
}

// Features reports a writable, non-persistent backend with symlinks, hard links,
// Chmod and Chtimes (only the owner-execute bit of files survives a Commit).
func (o *Overlay) Features() vfs.Features { return o.v.Features() }

// Stat returns information on p in the merged view, following a final symlink.
func (o *Overlay) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) { return o.v.Stat(ctx, p) }

// Lstat returns information on p in the merged view.
func (o *Overlay) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return o.v.Lstat(ctx, p)
}

// ReadDir lists directory p of the merged view, sorted by name.
func (o *Overlay) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	return o.v.ReadDir(ctx, p)
}

// OpenFile opens p. Opening a base file for writing (or with O_TRUNC) copies that
// file up first; opening it for reading does not.
func (o *Overlay) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	return o.v.OpenFile(ctx, p, flag, perm)
}

// Mkdir creates directory p.
func (o *Overlay) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	return o.v.Mkdir(ctx, p, perm)
}

// Remove removes a file, symlink or empty directory; a base entry is hidden by a
// whiteout.
func (o *Overlay) Remove(ctx context.Context, p vfs.Path) error { return o.v.Remove(ctx, p) }

// Rename moves from to to with rename(2)'s semantics and flags; a base directory
// moves lazily (see Overlay).
func (o *Overlay) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	return o.v.Rename(ctx, from, to, flags)
}

// Symlink creates symlink p with target text target.
func (o *Overlay) Symlink(ctx context.Context, target string, p vfs.Path) error {
	return o.v.Symlink(ctx, target, p)
}

// Readlink returns the target text of symlink p.
func (o *Overlay) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	return o.v.Readlink(ctx, p)
}

// Link makes newp another name of the file or symlink oldp (a base entry is
// copied up first). Commit stores each name as its own entry.
func (o *Overlay) Link(ctx context.Context, oldp, newp vfs.Path) error {
	return o.v.Link(ctx, oldp, newp)
}

// Chmod changes p's permission bits (a base file is copied up first).
func (o *Overlay) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	return o.v.Chmod(ctx, p, mode)
}

// Chtimes changes p's modification time (a base file is copied up first).
func (o *Overlay) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	return o.v.Chtimes(ctx, p, atime, mtime)
}

// Sub returns a writable Backend rooted at directory p, pinned to that
// directory: writes through it land in the overlay (and the next Commit), and a
// later rename of p does not redirect it. It has no Commit of its own.
func (o *Overlay) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) { return o.v.Sub(ctx, p) }

// Resolve returns the canonical location of p in the merged view, copying
// nothing up.
func (o *Overlay) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	return o.v.Resolve(ctx, p, follow)
}

// The merged view. An upper ("up") directory records only its differences from
// the base Directory it overlays (lo): ents maps names it adds or replaces, white
// names base entries it removed. A lookup checks ents, then white, then the base.
// A directory becomes up when a mutating operation walks through it
// (materialize: O(1), nothing copied). Up files and symlinks live in the memory
// store under a flat name (ino); a hard link is a second name there, with its own
// unode.

// unode is one entry of the merged view.
type unode struct {
	typ fs.FileMode // fs.ModeDir, fs.ModeSymlink, or 0 for a regular file
	// lo is, for a node that is not up, the base entry itself; for an up
	// directory, the base Directory it overlays (zero digest: none).
	lo node
	up bool

	// Up directories; guarded by ovState.mu.
	ents   map[string]*unode
	white  map[string]struct{}
	parent *unode // nil for the top root and removed directories
	gone   bool   // removed: nothing can be created in it
	perm   fs.FileMode
	mtime  time.Time

	// Up files and symlinks: the entry in the memory store (hard links are
	// links there, so Nlink and ID come from it).
	ino    string
	target string // up symlinks
}

// ovPermBits are the mode bits Chmod and creation keep besides the type.
const ovPermBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// ovState is what an Overlay and its Subs share.
type ovState struct {
	base    *FS        // the base tree (its root is the overlay's base)
	store   *memory.FS // up files and symlinks, one flat entry each
	mu      sync.RWMutex
	closed  atomic.Bool
	nextIno atomic.Uint64
}

func (s *ovState) now() time.Time { return time.Now().Round(0) }

func (s *ovState) newIno() (string, vfs.Path) {
	ino := "i" + strconv.FormatUint(s.nextIno.Add(1), 10)
	return ino, inoPath(ino)
}

func inoPath(ino string) vfs.Path {
	p, _ := vfs.Root.Child(ino)
	return p
}

// materialize makes c, a base directory, an up directory overlaying the same
// Directory, in parent.
func (s *ovState) materialize(c, parent *unode) {
	c.up = true
	c.ents = map[string]*unode{}
	c.white = map[string]struct{}{}
	c.parent = parent
	c.perm = 0o755
	c.mtime = s.base.modTime
}

func newUpDir(parent *unode, perm fs.FileMode, now time.Time) *unode {
	return &unode{typ: fs.ModeDir, up: true, ents: map[string]*unode{}, white: map[string]struct{}{},
		parent: parent, perm: perm & ovPermBits, mtime: now}
}

// lower returns the base Directory d overlays (or is), or nil.
func (s *ovState) lower(ctx context.Context, d *unode) (*ents, error) {
	if d.lo.d.IsZero() {
		return nil, nil
	}
	return loadDir(ctx, s.base.st, s.base.cache, d.lo.d)
}

// child looks name up in directory d. With mat, a base directory found in an up
// directory is materialized into it (the caller holds s.mu for writing).
func (s *ovState) child(ctx context.Context, d *unode, name string, mat bool) (*unode, bool, error) {
	if d.up {
		if c, ok := d.ents[name]; ok {
			return c, true, nil
		}
		if _, ok := d.white[name]; ok {
			return nil, false, nil
		}
	}
	ld, err := s.lower(ctx, d)
	if err != nil || ld == nil {
		return nil, false, err
	}
	n, ok := ld.lookup(name)
	if !ok {
		return nil, false, nil
	}
	c := &unode{typ: n.typ, lo: n}
	if mat && d.up && c.typ == fs.ModeDir {
		s.materialize(c, d)
		d.ents[name] = c
	}
	return c, true, nil
}

func (s *ovState) lowerHas(ctx context.Context, d *unode, name string) (bool, error) {
	ld, err := s.lower(ctx, d)
	if err != nil || ld == nil {
		return false, err
	}
	_, ok := ld.lookup(name)
	return ok, nil
}

// list returns the merged entries of directory d, sorted by name.
func (s *ovState) list(ctx context.Context, d *unode) ([]vfs.DirEntry, error) {
	ld, err := s.lower(ctx, d)
	if err != nil {
		return nil, err
	}
	out := []vfs.DirEntry{}
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
			out = append(out, vfs.DirEntry{Name: name, Type: ld.nodes[i].typ})
		}
	}
	if d.up && len(d.ents) > 0 {
		for name, c := range d.ents {
			out = append(out, vfs.DirEntry{Name: name, Type: c.typ})
		}
		slices.SortFunc(out, func(a, b vfs.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	}
	return out, nil
}

// empty reports whether directory d of the merged view has no entries.
func (s *ovState) empty(ctx context.Context, d *unode) (bool, error) {
	if d.up && len(d.ents) > 0 {
		return false, nil
	}
	ld, err := s.lower(ctx, d)
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

// del unlinks name from up directory d, recording a whiteout if the base
// Directory has that name.
func (s *ovState) del(d *unode, name string, lowerHad bool, now time.Time) {
	delete(d.ents, name)
	if lowerHad {
		d.white[name] = struct{}{}
	}
	d.mtime = now
}

// unlinked records that n lost its name: a directory is gone; an up file's or
// symlink's store entry is removed (the store keeps a file's data for its other
// links and for handles still open).
func (s *ovState) unlinked(ctx context.Context, n *unode) {
	switch {
	case n.typ == fs.ModeDir && n.up:
		n.gone = true
		n.parent = nil
	case n.up:
		// The name is gone already, so a canceled context must not keep the data.
		_ = s.store.Remove(context.WithoutCancel(ctx), inoPath(n.ino))
	}
}

// sameFile reports whether a and b are names of one up file or symlink (hard
// links).
func (s *ovState) sameFile(ctx context.Context, a, b *unode) bool {
	if a == b {
		return true
	}
	if !a.up || !b.up || a.typ == fs.ModeDir || b.typ == fs.ModeDir {
		return false
	}
	ia, err1 := s.store.Lstat(ctx, inoPath(a.ino))
	ib, err2 := s.store.Lstat(ctx, inoPath(b.ino))
	return err1 == nil && err2 == nil && ia.ID != 0 && ia.ID == ib.ID
}

func isAncestorU(a, d *unode) bool {
	for ; d != nil; d = d.parent {
		if d == a {
			return true
		}
	}
	return false
}

// ovTree is the vfs.Tree of the merged view for the shared resolver.
type ovTree struct {
	ctx context.Context
	s   *ovState
	mat bool
}

func (t ovTree) Lookup(d *unode, name string) (*unode, bool, error) {
	c, ok, err := t.s.child(t.ctx, d, name, t.mat)
	if err != nil {
		return nil, false, storeErr(err)
	}
	return c, ok, nil
}

func (ovTree) Type(n *unode) fs.FileMode { return n.typ }

func (ovTree) Target(n *unode) (string, error) {
	if n.up {
		return n.target, nil
	}
	return n.lo.target, nil
}

// ovView is the merged view from one root: the Overlay's, or a Sub's.
type ovView struct {
	s    *ovState
	root *unode
}

var _ vfs.Backend = (*ovView)(nil)

func (v *ovView) enter(ctx context.Context, op string, p vfs.Path) error {
	if err := ctx.Err(); err != nil {
		return &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
	}
	if v.s.closed.Load() {
		return vfs.NewError(vfs.CodeClosed, op, p, "overlay closed")
	}
	return nil
}

func (v *ovView) resolve(ctx context.Context, p vfs.Path, follow bool, op string, mat bool) (vfs.Resolution[*unode], error) {
	r, err := vfs.Resolve[*unode](ctx, ovTree{ctx, v.s, mat}, v.root, p, follow, op)
	if err != nil {
		return r, readdress(err, op, p)
	}
	return r, nil
}

// lookupEntry resolves p without following a final symlink, materializing;
// p marked MustBeDir must name a directory.
func (v *ovView) lookupEntry(ctx context.Context, p vfs.Path, op string) (vfs.Resolution[*unode], error) {
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
func (v *ovView) info(ctx context.Context, op string, p vfs.Path, n *unode, name string) (vfs.Info, error) {
	switch {
	case !n.up:
		return v.s.base.info(n.lo, name), nil
	case n.typ == fs.ModeDir:
		i := vfs.Info{Name: name, Mode: fs.ModeDir | n.perm, ModTime: n.mtime, Nlink: 1}
		if len(n.ents) == 0 && len(n.white) == 0 && !n.lo.d.IsZero() {
			i.Sys = &Entry{Kind: "directory", Digest: n.lo.d}
		}
		return i, nil
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

// Features reports a writable, non-persistent backend with symlinks, hard
// links, Chmod and Chtimes.
func (v *ovView) Features() vfs.Features {
	return vfs.Features{Symlinks: true, HardLinks: true, Chmod: true, Chtimes: true}
}

func (v *ovView) stat(ctx context.Context, p vfs.Path, follow bool, op string) (vfs.Info, error) {
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
func (v *ovView) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return v.stat(ctx, p, true, "stat")
}

// Lstat returns information on p without following a final symlink.
func (v *ovView) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return v.stat(ctx, p, false, "lstat")
}

// ReadDir lists directory p, merged, sorted by name.
func (v *ovView) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
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
	out, err := v.s.list(ctx, r.Node)
	if err != nil {
		return nil, ioErr(op, p, err)
	}
	return out, nil
}

// OpenFile opens p with os-style flags. Opening a base file for writing (or with
// O_TRUNC) copies that one file into the memory layer first.
func (v *ovView) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
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
func (v *ovView) open(ctx context.Context, p vfs.Path, r vfs.Resolution[*unode], flag int) (vfs.File, error) {
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
	f, err := v.s.base.openNode(ctx, p, n.lo, v.s.base.info(n.lo, name))
	if err != nil {
		return nil, err
	}
	return &ovFile{File: f, p: p, name: name, ro: true}, nil
}

// copyUp copies base file or symlink n, named name in up directory parent, into
// the memory store (a file empty if trunc) and puts the copy in its place. The
// caller holds s.mu for writing.
func (v *ovView) copyUp(ctx context.Context, op string, p vfs.Path, parent *unode, name string, n *unode, trunc bool) (*unode, error) {
	s := v.s
	ino, ip := s.newIno()
	if n.typ == fs.ModeSymlink {
		if err := s.store.Symlink(ctx, n.lo.target, ip); err != nil {
			return nil, vfs.Readdress(err, op, p.String(), "")
		}
		c := &unode{typ: fs.ModeSymlink, up: true, ino: ino, target: n.lo.target}
		parent.ents[name] = c
		return c, nil
	}
	perm := fs.FileMode(0o644)
	if n.lo.exec {
		perm = 0o755
	}
	f, err := s.store.OpenFile(ctx, ip, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, vfs.Readdress(err, op, p.String(), "")
	}
	if !trunc && n.lo.d.Size > 0 {
		var rc io.ReadCloser
		if rc, err = s.base.st.OpenBlob(ctx, n.lo.d); err == nil {
			// The verifier fails the last read on a mismatch: nothing unverified
			// is kept.
			_, err = copyCtx(ctx, f, rc)
			rc.Close()
			if err != nil && vfs.CodeOf(err) == "" {
				err = ioErr(op, p, err)
			}
		} else {
			err = ioErr(op, p, err)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !trunc {
		err = s.store.Chtimes(ctx, ip, time.Time{}, s.base.modTime)
	}
	if err != nil {
		_ = s.store.Remove(context.WithoutCancel(ctx), ip)
		return nil, vfs.Readdress(err, op, p.String(), "")
	}
	c := &unode{up: true, ino: ino}
	parent.ents[name] = c
	return c, nil
}

// Mkdir creates directory p; its parent must exist.
func (v *ovView) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
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
func (v *ovView) Remove(ctx context.Context, p vfs.Path) error {
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
		empty, err := v.s.empty(ctx, n)
		if err != nil {
			return ioErr(op, p, err)
		}
		if !empty {
			return vfs.NewError(vfs.CodeNotEmpty, op, p, "")
		}
	}
	had, err := v.s.lowerHas(ctx, r.Parent, r.Name)
	if err != nil {
		return ioErr(op, p, err)
	}
	v.s.del(r.Parent, r.Name, had, v.s.now())
	v.s.unlinked(ctx, n)
	return nil
}

// Rename moves from to to, with the semantics of rename(2) and renameat2's
// flags. A base directory moves lazily.
func (v *ovView) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
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
	srcHad, err := v.s.lowerHas(ctx, src.Parent, src.Name)
	if err != nil {
		return wrap(ioErr(op, from, err))
	}
	dstHad, err := v.s.lowerHas(ctx, dst.Parent, dst.Name)
	if err != nil {
		return wrap(ioErr(op, to, err))
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
		if same || v.s.sameFile(ctx, sn, dn) {
			// The same entry, or two hard links to one file: nothing to do, as
			// POSIX says.
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
			empty, err := v.s.empty(ctx, dn)
			if err != nil {
				return wrap(ioErr(op, to, err))
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
func (v *ovView) Symlink(ctx context.Context, target string, p vfs.Path) error {
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
	ino, ip := v.s.newIno()
	if err := v.s.store.Symlink(ctx, target, ip); err != nil {
		return vfs.Readdress(err, op, p.String(), "")
	}
	v.s.add(r.Parent, r.Name, &unode{typ: fs.ModeSymlink, up: true, ino: ino, target: target}, v.s.now())
	return nil
}

// Readlink returns the target text of symlink p; invalid_path if p is not one.
func (v *ovView) Readlink(ctx context.Context, p vfs.Path) (string, error) {
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
	return ovTree{}.Target(r.Node)
}

// Link makes newp another name of oldp (not following a final symlink, as
// link(2)); a base file or symlink is copied up first.
func (v *ovView) Link(ctx context.Context, oldp, newp vfs.Path) error {
	const op = "link"
	if err := v.enter(ctx, op, oldp); err != nil {
		return err
	}
	fail := func(code vfs.Code, msg string) error {
		e := vfs.NewError(code, op, oldp, msg)
		e.Dest = newp.String()
		return e
	}
	wrap := func(err error) error { return vfs.Readdress(err, op, oldp.String(), newp.String()) }
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	src, err := v.lookupEntry(ctx, oldp, op)
	if err != nil {
		return wrap(err)
	}
	if !src.Found {
		return fail(vfs.CodeNotFound, "")
	}
	if src.Node.typ == fs.ModeDir {
		return fail(vfs.CodePermission, "cannot hard-link a directory")
	}
	dst, err := v.resolve(ctx, newp.WithoutDirMark(), false, op, true)
	if err != nil {
		return wrap(err)
	}
	if dst.Found {
		return fail(vfs.CodeExists, "")
	}
	if newp.MustBeDir() {
		return fail(vfs.CodeNotDir, "")
	}
	if err := canCreateU(dst, op, newp); err != nil {
		return wrap(err)
	}
	n := src.Node
	if !n.up {
		if n, err = v.copyUp(ctx, op, oldp, src.Parent, src.Name, n, false); err != nil {
			return wrap(err)
		}
	}
	ino, ip := v.s.newIno()
	if err := v.s.store.Link(ctx, inoPath(n.ino), ip); err != nil {
		return wrap(err)
	}
	v.s.add(dst.Parent, dst.Name, &unode{typ: n.typ, up: true, ino: ino, target: n.target}, v.s.now())
	return nil
}

// modify resolves p (following a final symlink) for Chmod and Chtimes and runs
// fn on the node, a base file copied up first if copy says so.
func (v *ovView) modify(ctx context.Context, op string, p vfs.Path, copy bool, fn func(n *unode) error) error {
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
func (v *ovView) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	const op = "chmod"
	return v.modify(ctx, op, p, true, func(n *unode) error {
		if n.typ == fs.ModeDir {
			n.perm = mode & ovPermBits
			return nil
		}
		return vfs.Readdress(v.s.store.Chmod(ctx, inoPath(n.ino), mode), op, p.String(), "")
	})
}

// Chtimes sets p's modification time (following a final symlink) unless mtime
// is zero. A base file is copied up first.
func (v *ovView) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
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
// node.
func (v *ovView) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
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
	if !n.up { // every directory reached by a materializing walk is up
		return nil, vfs.NewError(vfs.CodeIO, op, p, "directory not materialized")
	}
	return &ovView{s: v.s, root: n}, nil
}

// Resolve returns the canonical location of p in the view, copying nothing up.
func (v *ovView) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	const op = "resolve"
	if err := v.enter(ctx, op, p); err != nil {
		return vfs.Location{}, err
	}
	v.s.mu.RLock()
	defer v.s.mu.RUnlock()
	_, loc, err := vfs.ResolveLocation[*unode](ctx, ovTree{ctx, v.s, false}, v.root, p, follow, op)
	if err != nil {
		return vfs.Location{}, readdress(err, op, p)
	}
	return loc, nil
}

// Locate returns the view's root's current path in the overlay, after renames
// made since Sub pinned it; not_found once the directory was removed.
func (v *ovView) Locate(ctx context.Context) (vfs.Path, error) {
	if err := v.enter(ctx, "locate", vfs.Root); err != nil {
		return vfs.Path{}, err
	}
	v.s.mu.RLock()
	defer v.s.mu.RUnlock()
	var names []string
	n := v.root
	for n.parent != nil {
		name, ok := "", false
		for k, c := range n.parent.ents {
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

// ovFile is an open file of the overlay: a handle of the memory store (up
// files, directories) or of the base tree (base files, read-only), answering
// with the guest's path and name.
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
