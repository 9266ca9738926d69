package memory

import (
	"io/fs"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capfs/capfs/vfs"
)

// permBits are the mode bits Chmod and creation keep besides the type.
const permBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// maxSize is the largest file size ever attempted: what a []byte can hold on this
// platform, and below the runtime's allocation limit (2^48 bytes on 64-bit
// platforms), so an absurd size fails with file_too_large instead of panicking.
const maxSize = int64(min(math.MaxInt, 1<<47))

// store is the storage shared by an FS and every FS Sub returns from it: the tree
// lock, the quota account and the inode counter.
//
// Locking: mu guards the tree structure (every directory's children, parent and
// gone fields, and gen). Each node's own mu guards its data and listing cache, and
// serializes writers of its metadata, which readers load lock-free (see node); it
// also guards the offsets of the node's handles (see handle). Open counts are
// atomics (see handle.Close). The order
// is store.mu before node.mu; node.mu is never held while acquiring store.mu.
type store struct {
	mu  sync.RWMutex
	gen uint64 // guarded by mu; advanced by every change to any directory's entries
	// links is set, for good, by the first symlink the store holds (under
	// mu, held for writing): until then no path has a symlink on the way, so
	// every path is its own canonical path (see FS.LinkFree).
	links atomic.Bool

	cache atomic.Pointer[resCache] // memoized resolutions of deep paths; allocated on first use

	quota   int64        // total bytes charged allowed (see WithQuota); 0 means unlimited
	maxFile int64        // largest single file; 0 means unlimited
	used    atomic.Int64 // bytes charged (see WithQuota)
	data    atomic.Int64 // of which file data capacity
	nextID  atomic.Uint64
	clock   func() time.Time

	// listMu serializes building directory listing caches, which happens under a
	// shared tree lock.
	listMu sync.Mutex
}

func (s *store) now() time.Time { return s.clock().Round(0) }

// Charges, in bytes, besides file capacity and symlink targets (see WithQuota).
// They are measured costs rounded up: a node is 128 bytes (a symlink's target
// string header adds 16) plus the 64-byte status it may keep (StatFileInfo),
// a directory adds its dirInfo and map header (about 110 bytes), and an entry
// costs its map slot at the worst load factor, its line in the listing cache
// and its name's allocation (about 60 + 24 + len(name) bytes).
const (
	// NodeCharge is charged for every file and symlink node.
	NodeCharge = 224
	// DirCharge is charged for every directory node.
	DirCharge = 384
	// EntryCharge is charged for every directory entry (every name, hard links
	// included), plus the length of the name.
	EntryCharge = 96
)

// entryCharge is what an entry named name costs.
func entryCharge(name string) int64 { return EntryCharge + int64(len(name)) }

// nodeCharge is what node n costs besides file data (a file's data is charged by
// its capacity, separately, as it changes).
func nodeCharge(n *node) int64 {
	switch n.typ {
	case fs.ModeDir:
		return DirCharge
	case fs.ModeSymlink:
		return NodeCharge + int64(len(n.target()))
	}
	return NodeCharge
}

// reserve accounts for delta more bytes charged (delta may be negative). It
// reports false, changing nothing, if a positive delta would exceed the quota.
func (s *store) reserve(delta int64) bool {
	if delta <= 0 || s.quota <= 0 {
		s.used.Add(delta)
		return true
	}
	for {
		u := s.used.Load()
		if u+delta > s.quota || u+delta < u {
			return false
		}
		if s.used.CompareAndSwap(u, u+delta) {
			return true
		}
	}
}

// reserveUpTo charges at least lo and at most hi bytes (0 <= lo <= hi), as much as
// the quota leaves, and returns the amount charged; false, changing nothing, if
// not even lo fits.
func (s *store) reserveUpTo(lo, hi int64) (int64, bool) {
	if s.quota <= 0 {
		s.used.Add(hi)
		return hi, true
	}
	for {
		u := s.used.Load()
		avail := s.quota - u
		if avail < lo {
			return 0, false
		}
		take := min(hi, avail)
		if s.used.CompareAndSwap(u, u+take) {
			return take, true
		}
	}
}

// node is an inode: a regular file, a directory or a symlink. Directory entries
// point at nodes; a file node may be named by several entries (hard links).
//
// Metadata (perm, nlink, size, mtime) lives in atomics so Stat reads it without
// taking any lock: writers hold mu and bracket their updates with seq (odd while
// an update is in progress), and readers retry until they see the same even seq
// before and after (a seqlock), so an Info is always one consistent snapshot.
//
// The layout is deliberate: a node is exactly 128 bytes, so it is 128-byte aligned
// in its size class; the first 64-byte line holds what the resolver, Stat and
// OpenFile touch, the second what Read and Write touch. TestNodeLayout checks it.
type node struct {
	typ   fs.FileMode   // immutable: fs.ModeDir, fs.ModeSymlink, or 0 for a regular file
	opens atomic.Int32  // open handles on a regular file (see handle.Close)
	perm  atomic.Uint32 // fs.FileMode permission, setuid, setgid and sticky bits
	seq   atomic.Uint32
	nlink atomic.Int32 // entries naming a file; 2 + subdirectories for a directory
	mnsec atomic.Int32 // modification time: nanoseconds
	size  atomic.Int64 // bytes of a file, entries of a directory, target length of a symlink
	msec  atomic.Int64 // modification time: Unix seconds
	id    uint64       // immutable
	dir   *dirInfo     // immutable: directories only
	// status is the fs.FileInfo the node last reported (see fileInfo): any
	// snapshot of some past state, checked against the current one before use.
	status atomic.Pointer[fileInfo]

	mu    sync.RWMutex // guards data and dir.entries, and serializes metadata writers
	data  []byte       // regular file contents; cap(data) is charged to the quota
	link  *string      // immutable: symlinks only, the target (see target)
	freed bool         // guarded by mu: the node's charges were given back (see releaseIfUnused)
}

// dirInfo is the part of a node only directories have.
type dirInfo struct {
	children map[string]*node // guarded by store.mu
	parent   *node            // guarded by store.mu; nil for the top root and removed directories
	name     string           // guarded by store.mu; the directory's name in parent
	gone     bool             // guarded by store.mu; removed: nothing can be created in it
	peak     int              // guarded by store.mu; most entries children has held since it was made
	entries  []vfs.DirEntry   // guarded by the node's mu: sorted listing cache; nil when stale
}

func (s *store) newNode(typ, perm fs.FileMode, now time.Time) *node {
	n := &node{typ: typ, id: s.nextID.Add(1)}
	n.perm.Store(uint32(perm & permBits))
	n.msec.Store(now.Unix())
	n.mnsec.Store(int32(now.Nanosecond()))
	n.nlink.Store(1)
	switch typ {
	case fs.ModeDir:
		n.dir = &dirInfo{children: make(map[string]*node)}
		n.nlink.Store(2)
	case fs.ModeSymlink:
		s.links.Store(true) // the caller holds mu for writing
	}
	return n
}

// beginMeta and endMeta bracket a metadata update. The caller holds n.mu for
// writing, or owns n exclusively.
func (n *node) beginMeta() { n.seq.Add(1) }
func (n *node) endMeta()   { n.seq.Add(1) }

// setMtime records t as the modification time, inside beginMeta/endMeta.
func (n *node) setMtime(t time.Time) {
	n.msec.Store(t.Unix())
	n.mnsec.Store(int32(t.Nanosecond()))
}

// touchData records a change of a file's contents: its new size and the current
// time. The caller holds n.mu for writing.
func (st *store) touchData(n *node) {
	n.beginMeta()
	n.size.Store(int64(len(n.data)))
	n.setMtime(st.now())
	n.endMeta()
}

// tree is the vfs.Tree view of the node graph. Callers hold store.mu.
type tree struct{}

func (tree) Lookup(dir *node, name string) (*node, bool, error) {
	c, ok := dir.dir.children[name]
	return c, ok, nil
}

func (tree) Type(n *node) fs.FileMode { return n.typ }

func (tree) Target(n *node) (string, error) { return n.target(), nil }

// target returns a symlink's target ("" for other nodes). The target lives
// outside the node, so that the node's two cache lines hold what the hot paths
// touch; symlinks are rare.
func (n *node) target() string {
	if n.link == nil {
		return ""
	}
	return *n.link
}

// info describes n under the name name. It takes no lock.
func (n *node) info(name string) vfs.Info {
	var i vfs.Info
	n.infoTo(&i, name)
	return i
}

// infoTo is info, written to *i (whose other fields it leaves alone).
func (n *node) infoTo(i *vfs.Info, name string) {
	for spins := 0; ; spins++ {
		s := n.seq.Load()
		if s&1 == 0 {
			perm := fs.FileMode(n.perm.Load())
			nlink := n.nlink.Load()
			size := n.size.Load()
			sec, nsec := n.msec.Load(), n.mnsec.Load()
			if n.seq.Load() == s {
				i.Name, i.Size, i.Mode = name, size, n.typ|perm
				i.ModTime = time.Unix(sec, int64(nsec))
				i.Nlink, i.ID = int(nlink), n.id
				return
			}
		}
		if spins > 3 {
			runtime.Gosched() // a writer is mid-update; let it finish
		}
	}
}

// listing returns the sorted entries of directory n, building the cache if stale.
// The caller holds store.mu, at least for reading; the returned slice is shared and
// must not be modified.
func (n *node) listing(st *store) []vfs.DirEntry {
	if e := n.loadEntries(); e != nil {
		return e
	}
	st.listMu.Lock()
	defer st.listMu.Unlock()
	if e := n.loadEntries(); e != nil {
		return e
	}
	e := make([]vfs.DirEntry, 0, len(n.dir.children))
	for name, c := range n.dir.children {
		e = append(e, vfs.DirEntry{Name: name, Type: c.typ})
	}
	slices.SortFunc(e, func(a, b vfs.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	n.storeEntries(e)
	return e
}

// The entries cache is written under a shared lock of store.mu (by listMu holders)
// and read by other shared holders, so it is accessed through the node's mu.
func (n *node) loadEntries() []vfs.DirEntry {
	n.mu.RLock()
	e := n.dir.entries
	n.mu.RUnlock()
	return e
}

func (n *node) storeEntries(e []vfs.DirEntry) {
	n.mu.Lock()
	n.dir.entries = e
	n.mu.Unlock()
}

// addEntry links c into directory d as name and updates d's mtime, link count and
// listing cache. It and delEntry are the only functions that change a directory's
// entries, so they advance the tree generation that validates cached resolutions.
// The caller holds store.mu for writing.
func (st *store) addEntry(d *node, name string, c *node, now time.Time) {
	st.gen++
	// The name is often a substring of a longer guest path (or request): keep
	// only its own bytes, which is what the entry is charged for.
	name = strings.Clone(name)
	d.dir.children[name] = c
	d.dir.peak = max(d.dir.peak, len(d.dir.children))
	d.mu.Lock()
	d.dir.entries = nil
	d.beginMeta()
	d.size.Store(int64(len(d.dir.children)))
	d.setMtime(now)
	if c.typ == fs.ModeDir {
		d.nlink.Add(1)
	}
	d.endMeta()
	d.mu.Unlock()
	if c.typ == fs.ModeDir {
		c.dir.parent = d
		c.dir.name = name
	}
}

// delEntry unlinks name (naming c) from directory d. It does not change c's own
// link count. The caller holds store.mu for writing.
func (st *store) delEntry(d *node, name string, c *node, now time.Time) {
	st.gen++
	delete(d.dir.children, name)
	// A Go map never gives back the room it grew to, so a directory emptied of
	// what it held would keep it uncharged: once it holds under a quarter of its
	// peak, its entries move to a map of their size (at most a third of a copy
	// per delete, amortized).
	if n := len(d.dir.children); d.dir.peak > shrinkEntries && n < d.dir.peak/4 {
		// Not maps.Clone, which may keep the old map's size.
		m := make(map[string]*node, n)
		maps.Copy(m, d.dir.children)
		d.dir.children = m
		d.dir.peak = n
	}
	d.mu.Lock()
	d.dir.entries = nil
	d.beginMeta()
	d.size.Store(int64(len(d.dir.children)))
	d.setMtime(now)
	if c.typ == fs.ModeDir {
		d.nlink.Add(-1)
	}
	d.endMeta()
	d.mu.Unlock()
}

// shrinkEntries is the peak number of entries below which a directory's map is
// never rebuilt smaller.
const shrinkEntries = 64

// unlinked records that one directory entry naming n is gone, after delEntry or
// when n is replaced by a rename. A directory is marked gone and its charge given
// back; a file or symlink whose last link and last handle are gone gives its
// charges (node, data capacity or target) back to the quota. The caller holds
// store.mu for writing.
func (st *store) unlinked(n *node) {
	switch n.typ {
	case fs.ModeDir:
		n.dir.gone = true
		n.dir.parent = nil
		n.mu.Lock()
		n.beginMeta()
		n.nlink.Store(0)
		n.endMeta()
		if !n.freed {
			n.freed = true
			st.reserve(-DirCharge)
		}
		n.mu.Unlock()
	default:
		n.mu.Lock()
		n.beginMeta()
		n.nlink.Add(-1)
		n.endMeta()
		st.releaseIfUnused(n)
		n.mu.Unlock()
	}
}

// releaseIfUnused frees a file's data and gives back a file's or symlink's
// charges once no entry and no handle refers to it. It runs at most once per node
// (whichever of the last unlink and the last Close comes second). The caller holds
// n.mu.
func (st *store) releaseIfUnused(n *node) {
	if n.typ != fs.ModeDir && !n.freed && n.nlink.Load() <= 0 && n.opens.Load() == 0 {
		n.freed = true
		st.reserve(-nodeCharge(n) - int64(cap(n.data)))
		st.data.Add(-int64(cap(n.data)))
		n.data = nil
	}
}

// isAncestor reports whether dir a is d or one of d's ancestors. The caller holds
// store.mu.
func isAncestor(a, d *node) bool {
	for ; d != nil; d = d.dir.parent {
		if d == a {
			return true
		}
	}
	return false
}

// checkSize reports the error code for a file growing to end bytes, or "" if the
// size is acceptable (quota aside).
func (st *store) checkSize(end int64) vfs.Code {
	if end < 0 || end > maxSize || (st.maxFile > 0 && end > st.maxFile) {
		return vfs.CodeTooLarge
	}
	return ""
}

// resize sets the length of n's data to size, zero-filling growth and charging the
// quota, and updates n's size and mtime. On error n is unchanged. The caller holds
// n.mu for writing.
func (st *store) resize(n *node, size int64) vfs.Code {
	code := st.resizeData(n, size)
	if code == "" {
		st.touchData(n)
	}
	return code
}

func (st *store) resizeData(n *node, size int64) vfs.Code {
	old := int64(len(n.data))
	if size == old {
		return ""
	}
	if c := st.checkSize(size); c != "" {
		return c
	}
	if size > old {
		if c := st.growData(n, size); c != "" {
			return c
		}
		clear(n.data[old:])
		return ""
	}
	c := int64(cap(n.data))
	switch {
	case size == 0:
		st.reserve(-c)
		st.data.Add(-c)
		n.data = nil
	case c-size >= shrinkSlack && c > 2*size:
		// Give back memory after a large shrink: the file is reallocated at its
		// size and the capacity it no longer holds returned to the quota.
		nb := make([]byte, size)
		copy(nb, n.data)
		n.data = nb
		st.reserve(size - c)
		st.data.Add(size - c)
	default:
		n.data = n.data[:size]
	}
	return ""
}

// shrinkSlack is the least spare capacity a truncation reallocates to give back.
const shrinkSlack = 4 << 10

// growData extends n's data to size bytes (size > len), charging the quota for
// any capacity added. Bytes past the old length are not guaranteed to be zero.
// On error n is unchanged. The caller holds n.mu for writing and has checked size
// with checkSize.
//
// Capacity is what is charged, so growth slack is bounded and paid for: a file
// written from empty in one call gets exactly its size; a file growing past its
// capacity gets twice it (below growDouble) or 1.25 times it (above), never past
// the maximum file size, and only as much beyond size as the quota has left.
// Appends therefore copy a file O(log size) times, and a store at its quota holds
// at most the quota in capacity.
func (st *store) growData(n *node, size int64) vfs.Code {
	c := int64(cap(n.data))
	if size <= c {
		n.data = n.data[:size]
		return ""
	}
	want := size
	if c > 0 {
		if c < growDouble {
			want = max(want, 2*c)
		} else {
			want = max(want, c+c/4)
		}
		want = min(want, maxSize)
		if st.maxFile > 0 {
			want = max(size, min(want, st.maxFile))
		}
	}
	got, ok := st.reserveUpTo(size-c, want-c)
	if !ok {
		return vfs.CodeQuota
	}
	st.data.Add(got)
	nb := make([]byte, size, c+got)
	copy(nb, n.data)
	n.data = nb
	return ""
}

// growDouble is the capacity below which a growing file's capacity doubles (a
// file appended to in chunks is copied about twice its size in all); above, it
// grows by a quarter (as Go's append does for large slices), bounding the slack
// a large file holds to a fifth of its capacity.
const growDouble = 64 << 20

// writeAt copies p into n's data at off, growing (zero-filled) as needed and
// charging the quota, and updates n's size and mtime. On error n is unchanged. The
// caller holds n.mu for writing.
func (st *store) writeAt(n *node, p []byte, off int64) vfs.Code {
	if len(p) == 0 {
		return ""
	}
	code := st.writeData(n, p, off)
	if code == "" {
		st.touchData(n)
	}
	return code
}

func (st *store) writeData(n *node, p []byte, off int64) vfs.Code {
	end := off + int64(len(p))
	if end < off {
		return vfs.CodeTooLarge // overflow
	}
	old := int64(len(n.data))
	if end > old {
		if c := st.checkSize(end); c != "" {
			return c
		}
		if c := st.growData(n, end); c != "" {
			return c
		}
		if off > old {
			clear(n.data[old:off])
		}
	}
	copy(n.data[off:], p)
	return ""
}
