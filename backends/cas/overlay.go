package cas

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/internal/cowview"
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
// Overlay is a vfs.Backend (with Resolve) through the merged view it shares with
// the git overlay (package internal/cowview), and these are its methods'
// guarantees besides the Backend contract. ReadDir lists the base Directory's
// entries minus whiteouts, merged with the upper layer's. OpenFile copies a
// base file up when it opens it for writing or with O_TRUNC, not for reading.
// Remove hides a base entry with a whiteout. Chmod and Chtimes copy a base file
// up first. Link makes a second name of a file or symlink, not following a
// final symlink (a base entry is copied up first); Commit stores each name as
// its own entry. Features reports a writable, non-persistent backend with
// symlinks, hard links, Chmod and Chtimes (only the owner-execute bit of files
// survives a Commit). Sub returns a writable Backend rooted at a directory,
// pinned to that directory: writes through it land in the overlay (and the next
// Commit), a later rename of the directory does not redirect it, and it has no
// Commit of its own. Resolve returns the canonical location of a path in the
// merged view, copying nothing up.
//
// All methods are safe for concurrent use: the merged view is guarded by one
// readers-writer lock (lookups run in parallel; mutations are exclusive), file
// contents by the memory layer's per-file locks. Commit excludes the overlay's
// mutating methods while it walks the view; a write through a file already open
// for writing is in the result whole or not at all.
type Overlay struct {
	*view                     // the vfs.Backend methods and Resolve
	t     *cowview.Tree[node] // the merged view's nodes, store, lock and Close
	lo    *FS                 // the base tree (its root is the overlay's base)

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
	cfg := cowview.Config{Store: memory.New(opts...), InoPrefix: "i", BaseTime: now, Links: true}
	t, v := cowview.New[node](casLower{base}, cfg, base.root)
	return &Overlay{view: v, t: t, lo: base, base: root}, nil
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
	o.t.Close()
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
	if err := o.t.Enter(ctx, op, vfs.Root); err != nil {
		return Digest{}, err
	}
	o.commitMu.Lock()
	defer o.commitMu.Unlock()
	st := o.lo.st
	defer st.ingest()()
	o.t.RLock()
	o.encoded = 0
	d, err := o.writeDir(ctx, o.t.Root(), vfs.Root)
	o.t.RUnlock()
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
	if !d.Up || (len(d.Ents) == 0 && len(d.White) == 0 && !d.Lo.d.IsZero()) {
		return d.Lo.d, nil // unchanged: not read, not hashed
	}
	ld, err := o.lower(ctx, d)
	if err != nil {
		return Digest{}, readdress(storeErr(err), op, p)
	}
	var out Directory
	if ld != nil {
		addBase(&out, ld, d)
	}
	for name, c := range d.Ents {
		if err := o.addEntry(ctx, &out, name, c, p); err != nil {
			return Digest{}, err
		}
	}
	slices.SortFunc(out.Files, func(a, b FileNode) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(out.Dirs, func(a, b DirNode) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(out.Symlinks, func(a, b SymlinkNode) int { return strings.Compare(a.Name, b.Name) })
	if ld != nil && sameAs(&out, ld) {
		return d.Lo.d, nil
	}
	b, err := out.Encode()
	if err != nil {
		return Digest{}, vfs.NewError(vfs.CodeInvalidPath, op, p, err.Error())
	}
	o.encoded++
	dg, err := o.lo.st.putBytes(DigestOf(b), b)
	if err != nil {
		return Digest{}, ioErr(op, p, err)
	}
	return dg, nil
}

// addBase adds to out the entries of ld, the base directory d overlays,
// that d neither changes nor removes.
func addBase(out *Directory, ld *ents, d *unode) {
	for i, name := range ld.names {
		if _, ok := d.Ents[name]; ok {
			continue
		}
		if _, ok := d.White[name]; ok {
			continue
		}
		addNode(out, name, ld.nodes[i])
	}
}

// addNode adds base node n, named name, to out.
func addNode(out *Directory, name string, n node) {
	switch n.typ {
	case fs.ModeDir:
		out.Dirs = append(out.Dirs, DirNode{Name: name, Digest: n.d})
	case fs.ModeSymlink:
		out.Symlinks = append(out.Symlinks, SymlinkNode{Name: name, Target: n.target})
	default:
		out.Files = append(out.Files, FileNode{Name: name, Digest: n.d, Executable: n.exec})
	}
}

// addEntry adds entry c, named name, of the directory at p to out: its base
// node when unchanged, else a directory or file it stores, or a symlink.
func (o *Overlay) addEntry(ctx context.Context, out *Directory, name string, c *unode, p vfs.Path) error {
	const op = "commit"
	cp, err := p.Child(name)
	if err != nil {
		return err
	}
	if !utf8.ValidString(name) {
		return vfs.NewError(vfs.CodeInvalidPath, op, cp, "a Directory holds UTF-8 names only")
	}
	switch {
	case !c.Up:
		addNode(out, name, c.Lo)
	case c.Type == fs.ModeDir:
		dg, err := o.writeDir(ctx, c, cp)
		if err != nil {
			return err
		}
		out.Dirs = append(out.Dirs, DirNode{Name: name, Digest: dg})
	case c.Type == fs.ModeSymlink:
		if !utf8.ValidString(c.Target) {
			return vfs.NewError(vfs.CodeInvalidPath, op, cp, "a Directory holds UTF-8 symlink targets only")
		}
		out.Symlinks = append(out.Symlinks, SymlinkNode{Name: name, Target: c.Target})
	default:
		dg, exec, err := o.writeFile(ctx, c, cp)
		if err != nil {
			return err
		}
		out.Files = append(out.Files, FileNode{Name: name, Digest: dg, Executable: exec})
	}
	return nil
}

// lower returns the base Directory d overlays (or is), or nil.
func (o *Overlay) lower(ctx context.Context, d *unode) (*ents, error) {
	if d.Lo.d.IsZero() {
		return nil, nil
	}
	return loadDir(ctx, o.lo.st, o.lo.cache, d.Lo.d)
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
	f, err := o.t.Store().OpenFile(ctx, cowview.InoPath(c.Ino), os.O_RDONLY, 0)
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
		dg, err = o.lo.st.putBytes(DigestOf(data), data)
	} else {
		dg, err = o.lo.st.put(ctx, bytes.NewReader(data), nil, int64(len(data)))
	}
	if err != nil {
		return Digest{}, false, ioErr(op, p, err)
	}
	return dg, info.Mode&0o100 != 0, nil
}

// The merged view is package cowview's, over the base tree: what follows is what
// it needs of a CAS tree. A lower entry is a node (a decoded entry of a
// Directory); the zero node is no Directory. Up files and symlinks live in the
// memory store under a flat name (Ino); a hard link is a second name there, with
// its own Node (cowview.Config.Links).

// view is the merged view of an Overlay, or of a Sub of one.
type view = cowview.View[node]

// unode is one entry of the merged view.
type unode = cowview.Node[node]

// casLower is the base tree as the lower tree of the merged view.
type casLower struct{ base *FS }

var _ cowview.Lower[node] = casLower{}

func (l casLower) Entries(ctx context.Context, lo node) ([]string, []node, error) {
	if lo.d.IsZero() {
		return nil, nil, nil
	}
	e, err := loadDir(ctx, l.base.st, l.base.cache, lo.d)
	if err != nil {
		return nil, nil, err
	}
	return e.names, e.nodes, nil
}

func (casLower) Type(lo node) fs.FileMode { return lo.typ }

func (casLower) Target(lo node) (string, error) { return lo.target, nil }

func (l casLower) Info(_ string, _ vfs.Path, lo node, name string) (vfs.Info, error) {
	return l.base.info(lo, name), nil
}

func (l casLower) Open(ctx context.Context, _ string, p vfs.Path, lo node, name string) (vfs.File, error) {
	return l.base.openNode(ctx, p, lo, l.base.info(lo, name))
}

func (casLower) CopyPerm(lo node) fs.FileMode {
	if lo.exec {
		return 0o755
	}
	return 0o644
}

func (l casLower) CopyData(ctx context.Context, op string, p vfs.Path, lo node, w io.Writer) error {
	if lo.d.Size <= 0 {
		return nil
	}
	rc, err := l.base.st.OpenBlob(ctx, lo.d)
	if err != nil {
		return ioErr(op, p, err)
	}
	// The verifier fails the last read on a mismatch: nothing unverified is kept.
	_, err = copyCtx(ctx, w, rc)
	rc.Close()
	if err != nil && vfs.CodeOf(err) == "" {
		err = ioErr(op, p, err)
	}
	return err
}

func (casLower) Materialized(*unode) {}

func (casLower) DirSys(n *unode) any {
	if n.Lo.d.IsZero() {
		return nil
	}
	return &Entry{Kind: "directory", Digest: n.Lo.d}
}

func (casLower) LookupErr(err error) error { return storeErr(err) }

func (casLower) ResolveErr(err error, op string, p vfs.Path) error { return readdress(err, op, p) }

func (casLower) LowerErr(op string, p vfs.Path, err error) error { return ioErr(op, p, err) }
