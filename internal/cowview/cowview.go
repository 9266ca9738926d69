// Package cowview is the copy-on-write merged view shared by the writable
// overlays of the immutable-tree backends (gitree.Overlay over a git revision,
// cas.Overlay over a CAS tree): a tree of Nodes layered over a lower tree that
// is read, never written, with every change held in an upper layer in memory.
//
// Untouched parts of the lower tree are never copied: a directory the view has
// not changed is read straight from the lower tree. An upper ("up") directory
// records only its differences from the lower directory it overlays (Lo): Ents
// maps names it adds or replaces, White names lower entries it deleted
// (whiteouts). A lookup checks Ents, then White, then the lower directory. A
// directory becomes up when a mutating operation walks through it
// ("materialize", O(1): no entry is copied); a lower file is copied into the
// memory store only when it is first opened for writing, chmodded, given new
// times or (with Config.Links) hard-linked; a lower symlink only when given
// its own times (Lchtimes). A lower entry that is only moved is
// kept as a reference (not up) to itself, so renaming a lower directory is lazy.
//
// The package guarantees the semantics its View documents (rename(2) with
// renameat2's flags, whiteouts, the memory backend's semantics for up files,
// errors as *vfs.Error naming the guest's path), with the lower tree's own
// behaviour supplied by a Lower. It does not commit: each backend walks the
// Node tree (Root, under RLock) to build its own commit, reusing what the view
// left untouched.
//
// A lazy sandbox's copy-on-write layer, whose upper is a host directory, is
// [github.com/capfs/capfs/backends/overlay].
//
// All methods of a View are safe for concurrent use: the merged view is guarded
// by one readers-writer lock (lookups run in parallel; mutations are
// exclusive), file contents by the memory store's per-file locks.
package cowview

import (
	"context"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
)

// Lower is what a View needs of the lower tree whose entries are of type L (a
// small value: the lower entry itself, or for a directory what loads it). The
// zero L stands for no lower directory.
type Lower[L any] interface {
	// Entries returns the entries of lower directory lo, sorted by name
	// (names[i] is nodes[i]'s), or no entries for the zero L.
	Entries(ctx context.Context, lo L) (names []string, nodes []L, err error)
	// Type returns lo's type: fs.ModeDir, fs.ModeSymlink or 0.
	Type(lo L) fs.FileMode
	// Target returns the target text of lower symlink lo.
	Target(lo L) (string, error)
	// Info describes lower entry lo as name for operation op on p.
	Info(op string, p vfs.Path, lo L, name string) (vfs.Info, error)
	// Open opens lower file lo read-only for operation op on p; its errors name p.
	Open(ctx context.Context, op string, p vfs.Path, lo L, name string) (vfs.File, error)
	// CopyPerm is the permission a copied-up lower file gets.
	CopyPerm(lo L) fs.FileMode
	// CopyData writes lower file lo's contents into w (a copy-up without
	// O_TRUNC); its errors are re-addressed to op and p.
	CopyData(ctx context.Context, op string, p vfs.Path, lo L, w io.Writer) error
	// Materialized adjusts n right after it became an up directory overlaying
	// n.Lo (gitree: a submodule becomes an empty directory pinning its commit).
	Materialized(n *Node[L])
	// DirSys is the Info.Sys of up directory n while it has no changes of its
	// own, or nil.
	DirSys(n *Node[L]) any
	// LookupErr converts an error of Entries met while resolving a path.
	LookupErr(err error) error
	// ResolveErr converts an error of the shared resolver for op on p.
	ResolveErr(err error, op string, p vfs.Path) error
	// LowerErr converts an error of Entries met by op on p (listing, emptiness
	// and whiteout checks).
	LowerErr(op string, p vfs.Path, err error) error
}

// Config is what differs between the backends besides the Lower.
type Config struct {
	// Store holds the contents of up files (and with Links, up symlinks), one
	// flat entry each.
	Store *memory.FS
	// InoPrefix starts the names of entries in Store.
	InoPrefix string
	// BaseTime is the mtime of materialized directories and copied-up files.
	BaseTime time.Time
	// Links makes up symlinks entries of Store and supports hard links (a
	// second Store name for one file or symlink). Without it, up symlinks live
	// in their Node and Link fails with not_supported and NoLinks as message.
	Links   bool
	NoLinks string
}

// Node is one entry of a merged view.
type Node[L any] struct {
	Type fs.FileMode // fs.ModeDir, fs.ModeSymlink, or 0 for a regular file
	// Lo is, for a node that is not up, the lower entry itself; for an up
	// directory, the lower directory it overlays (zero: none).
	Lo L
	Up bool // the node lives in the upper layer

	// Up directories; guarded by the view's lock.
	Ents  map[string]*Node[L] // entries added or replaced in the upper layer
	White map[string]struct{} // lower entries deleted
	// Pin is what Lower.Materialized kept of a lower entry it replaced (gitree:
	// a submodule's gitlink, kept while the directory stays empty).
	Pin    L
	parent *Node[L] // nil for the top root and removed directories
	gone   bool     // removed: nothing can be created in it

	Ino    string // up files (and with Links, symlinks): the name in the store
	Target string // up symlinks

	// Up directories (and without Links, symlinks): a file's metadata lives in
	// the store.
	perm  fs.FileMode
	mtime time.Time
}

// permBits are the mode bits Chmod and creation keep besides the type, as in
// the memory backend.
const permBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// writeFlags are the open flags that make OpenFile a mutation.
const writeFlags = os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_TRUNC | os.O_APPEND

// state is what a View and every Sub of it share.
type state[L any] struct {
	lo    Lower[L]
	cfg   Config
	store *memory.FS
	mu    sync.RWMutex
	// closed is set by Close; every later call fails with closed.
	closed  atomic.Bool
	nextIno atomic.Uint64
}

// View is the merged view from one root: an overlay's, or a Sub's. It is a
// vfs.Backend with Resolve and Lchtimes (vfs.LinkTimer), meant to be embedded in the backend's overlay type,
// without a Close or Commit of its own (those are the overlay's, with Tree).
// The Backends its Sub returns are vfs.Locators too.
type View[L any] struct {
	s    *state[L]
	root *Node[L]
}

var _ vfs.Backend = (*View[int])(nil)

// Tree is the control side of one overlay's merged view, for the backend's
// overlay type alone: the Node tree to commit, the memory store, the lock and
// Close.
type Tree[L any] struct {
	s    *state[L]
	root *Node[L]
}

// New returns the view of an overlay over lower directory root, nothing of
// which is read, and its Tree.
func New[L any](lower Lower[L], cfg Config, root L) (*Tree[L], *View[L]) {
	s := &state[L]{lo: lower, cfg: cfg, store: cfg.Store}
	top := &Node[L]{Type: fs.ModeDir, Lo: root}
	s.materialize(top, nil)
	return &Tree[L]{s: s, root: top}, &View[L]{s: s, root: top}
}

// Root returns the overlay's root directory node. Read the tree under RLock.
func (t *Tree[L]) Root() *Node[L] { return t.root }

// Store returns the memory store of up files.
func (t *Tree[L]) Store() *memory.FS { return t.s.store }

// RLock excludes the view's mutations (not its readers, nor writes through
// files already open) until RUnlock, for a commit's walk of the Node tree.
func (t *Tree[L]) RLock() { t.s.mu.RLock() }

// RUnlock ends RLock.
func (t *Tree[L]) RUnlock() { t.s.mu.RUnlock() }

// Close makes every later call of the view and its Subs fail with closed.
func (t *Tree[L]) Close() { t.s.closed.Store(true) }

// Closed reports whether Close was called.
func (t *Tree[L]) Closed() bool { return t.s.closed.Load() }

// Enter fails with canceled if ctx is done and with closed after Close, as
// every operation of the view does first.
func (t *Tree[L]) Enter(ctx context.Context, op string, p vfs.Path) error {
	return t.s.enter(ctx, op, p)
}

// Lower returns the lower directory entries d overlays (or is).
func (t *Tree[L]) Lower(ctx context.Context, d *Node[L]) ([]string, []L, error) {
	return t.s.lo.Entries(ctx, d.Lo)
}

func (s *state[L]) now() time.Time { return time.Now().Round(0) }

func (s *state[L]) newIno() (string, vfs.Path) {
	ino := s.cfg.InoPrefix + strconv.FormatUint(s.nextIno.Add(1), 10)
	return ino, InoPath(ino)
}

// InoPath is the store path of the up entry named ino.
func InoPath(ino string) vfs.Path {
	p, _ := vfs.Root.Child(ino)
	return p
}

// materialize turns c, a lower directory just looked up in up directory
// parent, into an up directory overlaying the same lower directory.
func (s *state[L]) materialize(c, parent *Node[L]) {
	c.Up = true
	c.Ents = map[string]*Node[L]{}
	c.White = map[string]struct{}{}
	c.parent = parent
	c.perm = 0o755
	c.mtime = s.cfg.BaseTime
	s.lo.Materialized(c)
}

func newUpDir[L any](parent *Node[L], perm fs.FileMode, now time.Time) *Node[L] {
	return &Node[L]{Type: fs.ModeDir, Up: true, Ents: map[string]*Node[L]{}, White: map[string]struct{}{},
		parent: parent, perm: perm & permBits, mtime: now}
}

func lookup[L any](names []string, nodes []L, name string) (L, bool) {
	i := sort.SearchStrings(names, name)
	if i < len(names) && names[i] == name {
		return nodes[i], true
	}
	var zero L
	return zero, false
}

// child looks name up in directory d of the merged view. With mat, a lower
// directory found in an up directory is materialized into it (the caller holds
// s.mu for writing); without, lower entries come back as fresh references.
func (s *state[L]) child(ctx context.Context, d *Node[L], name string, mat bool) (*Node[L], bool, error) {
	if d.Up {
		if c, ok := d.Ents[name]; ok {
			return c, true, nil
		}
		if _, ok := d.White[name]; ok {
			return nil, false, nil
		}
	}
	names, nodes, err := s.lo.Entries(ctx, d.Lo)
	if err != nil {
		return nil, false, err
	}
	n, ok := lookup(names, nodes, name)
	if !ok {
		return nil, false, nil
	}
	c := &Node[L]{Type: s.lo.Type(n), Lo: n}
	if mat && d.Up && c.Type == fs.ModeDir {
		s.materialize(c, d)
		d.Ents[name] = c
	}
	return c, true, nil
}

// lowerHas reports whether d's lower directory has an entry name (that a
// deletion must hide with a whiteout).
func (s *state[L]) lowerHas(ctx context.Context, d *Node[L], name string) (bool, error) {
	names, nodes, err := s.lo.Entries(ctx, d.Lo)
	if err != nil {
		return false, err
	}
	_, ok := lookup(names, nodes, name)
	return ok, nil
}

// list returns the merged entries of directory d, sorted by name.
func (s *state[L]) list(ctx context.Context, d *Node[L]) ([]vfs.DirEntry, error) {
	names, nodes, err := s.lo.Entries(ctx, d.Lo)
	if err != nil {
		return nil, err
	}
	out := make([]vfs.DirEntry, 0, len(names)+len(d.Ents))
	for i, name := range names {
		if d.Up {
			if _, ok := d.Ents[name]; ok {
				continue
			}
			if _, ok := d.White[name]; ok {
				continue
			}
		}
		out = append(out, vfs.DirEntry{Name: name, Type: s.lo.Type(nodes[i])})
	}
	if d.Up && len(d.Ents) > 0 {
		for name, c := range d.Ents {
			out = append(out, vfs.DirEntry{Name: name, Type: c.Type})
		}
		slices.SortFunc(out, func(a, b vfs.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	}
	return out, nil
}

// empty reports whether directory d of the merged view has no entries.
func (s *state[L]) empty(ctx context.Context, d *Node[L]) (bool, error) {
	if d.Up && len(d.Ents) > 0 {
		return false, nil
	}
	names, _, err := s.lo.Entries(ctx, d.Lo)
	if err != nil {
		return true, err
	}
	for _, name := range names {
		if _, ok := d.White[name]; !ok {
			return false, nil
		}
	}
	return true, nil
}

// add links c into up directory d as name. The caller holds s.mu for writing.
func (s *state[L]) add(d *Node[L], name string, c *Node[L], now time.Time) {
	d.Ents[name] = c
	if c.Up && c.Type == fs.ModeDir {
		c.parent = d
	}
	d.mtime = now
}

// del unlinks name from up directory d, recording a whiteout if the lower
// directory has that name (lowerHad, computed before any change).
func (s *state[L]) del(d *Node[L], name string, lowerHad bool, now time.Time) {
	delete(d.Ents, name)
	if lowerHad {
		d.White[name] = struct{}{}
	}
	d.mtime = now
}

// unlinked records that n lost its name: a directory is gone (creations in it
// fail, a Sub pinned to it sees it empty of new entries); an up file's (with
// Links, symlink's) store entry is removed (the store keeps a file's data for
// its other links and for handles still open, as POSIX does).
func (s *state[L]) unlinked(ctx context.Context, n *Node[L]) {
	switch {
	case n.Type == fs.ModeDir && n.Up:
		n.gone = true
		n.parent = nil
	case n.Up && (n.Type == 0 || s.cfg.Links):
		// The name is gone already, so a canceled context must not keep the data.
		_ = s.store.Remove(context.WithoutCancel(ctx), InoPath(n.Ino))
	}
}

// sameFile reports whether a and b are names of one up file or symlink (hard
// links).
func (s *state[L]) sameFile(ctx context.Context, a, b *Node[L]) bool {
	if a == b {
		return true
	}
	if !a.Up || !b.Up || a.Type == fs.ModeDir || b.Type == fs.ModeDir {
		return false
	}
	ia, err1 := s.store.Lstat(ctx, InoPath(a.Ino))
	ib, err2 := s.store.Lstat(ctx, InoPath(b.Ino))
	return err1 == nil && err2 == nil && ia.ID != 0 && ia.ID == ib.ID
}

func isAncestor[L any](a, d *Node[L]) bool {
	for ; d != nil; d = d.parent {
		if d == a {
			return true
		}
	}
	return false
}

// tree is the vfs.Tree of the merged view for the shared resolver; mat
// materializes the directories it walks through (mutating operations, under the
// write lock).
type tree[L any] struct {
	ctx context.Context
	s   *state[L]
	mat bool
}

func (t tree[L]) Lookup(d *Node[L], name string) (*Node[L], bool, error) {
	c, ok, err := t.s.child(t.ctx, d, name, t.mat)
	if err != nil {
		return nil, false, t.s.lo.LookupErr(err)
	}
	return c, ok, nil
}

func (tree[L]) Type(n *Node[L]) fs.FileMode { return n.Type }

func (t tree[L]) Target(n *Node[L]) (string, error) {
	if n.Up {
		return n.Target, nil
	}
	return t.s.lo.Target(n.Lo)
}
