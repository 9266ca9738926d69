package memory

import (
	"io/fs"
	"math"
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
// Locking: mu guards the tree structure (every node's children, entries, parent and
// gone fields). Each node's own mu guards its metadata and data (perm, mtime, nlink,
// opens, data). The order is store.mu before node.mu, and a file handle's mu before
// node.mu; node.mu is never held while acquiring store.mu.
type store struct {
	mu sync.RWMutex

	quota   int64 // total bytes of file data allowed; 0 means unlimited
	maxFile int64 // largest single file; 0 means unlimited
	used    atomic.Int64
	nextID  atomic.Uint64
	clock   func() time.Time

	// listMu serializes building directory listing caches, which happens under a
	// shared tree lock.
	listMu sync.Mutex
}

func (s *store) now() time.Time { return s.clock().Round(0) }

// reserve accounts for delta more bytes of file data (delta may be negative). It
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

// node is an inode: a regular file, a directory or a symlink. Directory entries
// point at nodes; a file node may be named by several entries (hard links).
type node struct {
	// Immutable after creation.
	typ    fs.FileMode // fs.ModeDir, fs.ModeSymlink, or 0 for a regular file
	id     uint64
	target string // symlink target

	// Guarded by store.mu; directories only.
	children map[string]*node
	parent   *node // containing directory; nil for the top root and removed directories
	gone     bool  // removed from the tree: nothing can be created in it

	// Guarded by mu.
	mu      sync.RWMutex
	entries []vfs.DirEntry // directories: sorted listing cache; nil when stale
	perm    fs.FileMode
	mtime   time.Time
	nlink   int    // directory entries naming a file; 2 + subdirectories for a directory
	opens   int    // open handles on a regular file
	data    []byte // regular file contents
}

func (s *store) newNode(typ, perm fs.FileMode, now time.Time) *node {
	n := &node{typ: typ, id: s.nextID.Add(1), perm: perm & permBits, mtime: now, nlink: 1}
	if typ == fs.ModeDir {
		n.children = make(map[string]*node)
		n.nlink = 2
	}
	return n
}

// tree is the vfs.Tree view of the node graph. Callers hold store.mu.
type tree struct{}

func (tree) Lookup(dir *node, name string) (*node, bool, error) {
	c, ok := dir.children[name]
	return c, ok, nil
}

func (tree) Type(n *node) fs.FileMode { return n.typ }

func (tree) Target(n *node) (string, error) { return n.target, nil }

// info describes n under the name name. The caller holds store.mu (read or write)
// when n is a directory, since its size is its entry count.
func (n *node) info(name string) vfs.Info {
	n.mu.RLock()
	i := vfs.Info{Name: name, Mode: n.typ | n.perm, ModTime: n.mtime, Nlink: n.nlink, ID: n.id}
	switch n.typ {
	case 0:
		i.Size = int64(len(n.data))
	case fs.ModeSymlink:
		i.Size = int64(len(n.target))
	case fs.ModeDir:
		i.Size = int64(len(n.children))
	}
	n.mu.RUnlock()
	return i
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
	e := make([]vfs.DirEntry, 0, len(n.children))
	for name, c := range n.children {
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
	e := n.entries
	n.mu.RUnlock()
	return e
}

func (n *node) storeEntries(e []vfs.DirEntry) {
	n.mu.Lock()
	n.entries = e
	n.mu.Unlock()
}

// addEntry links c into directory d as name and updates d's mtime, link count and
// listing cache. The caller holds store.mu for writing.
func (d *node) addEntry(name string, c *node, now time.Time) {
	d.children[name] = c
	d.mu.Lock()
	d.entries = nil
	d.mtime = now
	if c.typ == fs.ModeDir {
		d.nlink++
	}
	d.mu.Unlock()
	if c.typ == fs.ModeDir {
		c.parent = d
	}
}

// delEntry unlinks name (naming c) from directory d. It does not change c's own
// link count. The caller holds store.mu for writing.
func (d *node) delEntry(name string, c *node, now time.Time) {
	delete(d.children, name)
	d.mu.Lock()
	d.entries = nil
	d.mtime = now
	if c.typ == fs.ModeDir {
		d.nlink--
	}
	d.mu.Unlock()
}

// unlinked records that one directory entry naming n is gone, after delEntry or
// when n is replaced by a rename. A directory is marked gone; a file whose last link
// and last handle are gone gives its bytes back to the quota. The caller holds
// store.mu for writing.
func (st *store) unlinked(n *node) {
	switch n.typ {
	case fs.ModeDir:
		n.gone = true
		n.parent = nil
		n.mu.Lock()
		n.nlink = 0
		n.mu.Unlock()
	default:
		n.mu.Lock()
		n.nlink--
		st.releaseIfUnused(n)
		n.mu.Unlock()
	}
}

// releaseIfUnused frees a regular file's data once no entry and no handle refers
// to it. The caller holds n.mu.
func (st *store) releaseIfUnused(n *node) {
	if n.typ == 0 && n.nlink <= 0 && n.opens == 0 && n.data != nil {
		st.reserve(-int64(len(n.data)))
		n.data = nil
	}
}

// isAncestor reports whether dir a is d or one of d's ancestors. The caller holds
// store.mu.
func isAncestor(a, d *node) bool {
	for ; d != nil; d = d.parent {
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
// quota. On error n is unchanged. The caller holds n.mu for writing.
func (st *store) resize(n *node, size int64) vfs.Code {
	old := int64(len(n.data))
	if size == old {
		return ""
	}
	if c := st.checkSize(size); c != "" {
		return c
	}
	if size > old {
		if !st.reserve(size - old) {
			return vfs.CodeQuota
		}
		n.data = grow(n.data, int(size))
		clear(n.data[old:])
		return ""
	}
	st.reserve(size - old)
	switch {
	case size == 0:
		n.data = nil
	case size < int64(cap(n.data))/4 && cap(n.data) > 64<<10:
		// Give back memory after a large shrink.
		n.data = append([]byte(nil), n.data[:size]...)
	default:
		n.data = n.data[:size]
	}
	return ""
}

// writeAt copies p into n's data at off, growing (zero-filled) as needed and
// charging the quota. On error n is unchanged. The caller holds n.mu for writing.
func (st *store) writeAt(n *node, p []byte, off int64) vfs.Code {
	if len(p) == 0 {
		return ""
	}
	end := off + int64(len(p))
	if end < off {
		return vfs.CodeTooLarge // overflow
	}
	old := int64(len(n.data))
	if end > old {
		if c := st.checkSize(end); c != "" {
			return c
		}
		if !st.reserve(end - old) {
			return vfs.CodeQuota
		}
		n.data = grow(n.data, int(end))
		if off > old {
			clear(n.data[old:off])
		}
	}
	copy(n.data[off:], p)
	return ""
}

// grow returns b extended to length n (n > len(b)), reallocating with doubling
// capacity so a file written by appends is copied O(log size) times, not once per
// append. Bytes between len(b) and n are not guaranteed to be zero.
func grow(b []byte, n int) []byte {
	if n <= cap(b) {
		return b[:n]
	}
	c := n
	if cap(b) > 0 && 2*cap(b) > n {
		c = 2 * cap(b)
	}
	nb := make([]byte, n, c)
	copy(nb, b)
	return nb
}
