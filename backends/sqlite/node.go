package sqlite

import (
	"database/sql"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/capfs/capfs/vfs"
)

// permBits are the mode bits kept besides the type.
const permBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// node is the in-memory image of one inode row (the dentry and attribute cache):
// every change is written to SQLite first (in the operation's transaction) and
// applied here under the same locks, so the image never disagrees with what the
// batch commits.
type node struct {
	ino    int64
	typ    fs.FileMode // immutable: fs.ModeDir, fs.ModeSymlink or 0
	target string      // immutable: symlink target

	mu    sync.RWMutex // guards the fields below, and serializes data writes
	perm  fs.FileMode
	nlink int // names of a file; for a directory see info
	size  int64
	mtime time.Time
	opens int    // open handles (regular files)
	dirty uint64 // writer.execSeq of the last data change (see readAt)
	freed bool   // the inode row is gone

	// Directories only, guarded by store.mu.
	children map[string]*node
	parent   *node
	name     string
	gone     bool
	nsub     int            // subdirectories
	listing  []vfs.DirEntry // sorted listing cache; nil when stale (guarded by listMu)
}

var listMu sync.Mutex // guards every node's listing cache (built under a shared tree lock)

func newNode(ino int64, typ, perm fs.FileMode, mtime time.Time) *node {
	n := &node{ino: ino, typ: typ, perm: perm & permBits, nlink: 1, mtime: mtime}
	if typ == fs.ModeDir {
		n.children = map[string]*node{}
	}
	return n
}

// info describes n under name. The caller holds the tree lock (at least shared).
func (n *node) info(name string) vfs.Info {
	n.mu.RLock()
	i := vfs.Info{Name: name, Size: n.size, Mode: n.typ | n.perm, ModTime: n.mtime, Nlink: n.nlink, ID: uint64(n.ino)}
	n.mu.RUnlock()
	if n.typ == fs.ModeDir {
		i.Size = int64(len(n.children))
		i.Nlink = 2 + n.nsub
		if n.gone {
			i.Nlink = 0
		}
	}
	return i
}

// entries returns n's sorted listing, shared (not to be modified). The caller
// holds the tree lock, at least shared.
func (n *node) entries() []vfs.DirEntry {
	listMu.Lock()
	defer listMu.Unlock()
	if n.listing == nil {
		e := make([]vfs.DirEntry, 0, len(n.children))
		for name, c := range n.children {
			e = append(e, vfs.DirEntry{Name: name, Type: c.typ})
		}
		slices.SortFunc(e, func(a, b vfs.DirEntry) int { return strings.Compare(a.Name, b.Name) })
		n.listing = e
	}
	return n.listing
}

// link and unlink change directory d's entries in memory. The caller holds the
// tree lock for writing.
func (d *node) link(name string, c *node) {
	d.children[name] = c
	listMu.Lock()
	d.listing = nil
	listMu.Unlock()
	if c.typ == fs.ModeDir {
		d.nsub++
		c.parent, c.name = d, name
	}
}

func (d *node) unlink(name string, c *node) {
	delete(d.children, name)
	listMu.Lock()
	d.listing = nil
	listMu.Unlock()
	if c.typ == fs.ModeDir {
		d.nsub--
	}
}

// tree is the vfs.Tree view of the node graph. Callers hold the tree lock.
type tree struct{}

func (tree) Lookup(dir *node, name string) (*node, bool, error) {
	c, ok := dir.children[name]
	return c, ok, nil
}

func (tree) Type(n *node) fs.FileMode { return n.typ }

func (tree) Target(n *node) (string, error) { return n.target, nil }

// walkMax is the most components walk handles; deeper paths go to vfs.Resolve.
const walkMax = 63

// walk answers the common case of a resolution (no symlink to follow, every
// intermediate an existing directory) directly, the way vfs.Resolve would; it
// reports false for anything else, and the caller runs vfs.Resolve.
func walk(root *node, p vfs.Path, follow bool) (vfs.Resolution[*node], bool) {
	rest := p.Raw()
	if rest == "" {
		return vfs.Resolution[*node]{Parent: root, Node: root, Found: true}, true
	}
	mustDir := p.MustBeDir()
	dir := root
	for depth := 1; depth <= walkMax; depth++ {
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			i = len(rest)
		}
		seg, more := rest[:i], i < len(rest)
		child, ok := dir.children[seg]
		if !more {
			switch {
			case !ok:
				return vfs.Resolution[*node]{Parent: dir, Name: seg}, true
			case child.typ == fs.ModeSymlink:
				if follow || mustDir {
					return vfs.Resolution[*node]{}, false
				}
			case child.typ != fs.ModeDir && mustDir:
				return vfs.Resolution[*node]{}, false
			}
			return vfs.Resolution[*node]{Parent: dir, Name: seg, Node: child, Found: true}, true
		}
		if !ok || child.typ != fs.ModeDir {
			return vfs.Resolution[*node]{}, false
		}
		dir, rest = child, rest[i+1:]
	}
	return vfs.Resolution[*node]{}, false
}

// unixMode converts a node's type and permission bits to st_mode, as stored
// in inode.mode.
func unixMode(typ, perm fs.FileMode) int64 { return int64(vfs.UnixMode(typ | perm&permBits)) }

// goMode converts st_mode to type and permission bits; ok is false for a type
// capfs does not store.
func goMode(m int64) (typ, perm fs.FileMode, ok bool) {
	fm := vfs.FileModeOf(uint32(m))
	switch typ = fm.Type(); typ {
	case 0, fs.ModeDir, fs.ModeSymlink:
		return typ, fm &^ fs.ModeType, true
	}
	return 0, 0, false
}

// entryCharge and nodeCharge are the quota charges (see WithQuota).
func entryCharge(name string) int64 { return EntryCharge + int64(len(name)) }

func nodeCharge(n *node) int64 {
	c := int64(NodeCharge)
	if n.typ == fs.ModeSymlink {
		c += int64(len(n.target))
	}
	return c
}

// load reads every inode and directory entry into memory, checks the graph, and
// removes the inodes no entry names (files unlinked while open when the process
// stopped).
func (s *store) load() error {
	nodes, maxIno, err := s.loadInodes()
	if err != nil {
		return err
	}
	root := nodes[1]
	if root == nil || root.typ != fs.ModeDir {
		return fmt.Errorf("%w: no root directory", ErrCorrupt)
	}
	named, err := s.loadEntries(nodes)
	if err != nil {
		return err
	}
	if err := checkReachable(nodes, root); err != nil {
		return err
	}
	var orphans []int64
	var used int64
	for ino, n := range nodes {
		if ino == 1 {
			continue
		}
		if named[ino] == 0 {
			orphans = append(orphans, ino)
			continue
		}
		n.nlink = named[ino]
		used += nodeCharge(n) + n.size*boolInt(n.typ == 0)
	}
	for _, d := range nodes {
		for name := range d.children {
			used += entryCharge(name)
		}
	}
	if len(orphans) > 0 && s.w != nil {
		if err := s.removeOrphans(orphans); err != nil {
			return classify(err)
		}
	}
	s.root = root
	s.nextIno.Store(maxIno)
	s.used.Store(used)
	return nil
}

// loadInodes reads every inode, and returns them by number with the
// highest number.
func (s *store) loadInodes() (map[int64]*node, int64, error) {
	rows, err := s.q.Query(`SELECT ino, mode, nlink, size, mtime, mtime_ns, target FROM inode`)
	if err != nil {
		return nil, 0, classify(err)
	}
	defer rows.Close()
	nodes := map[int64]*node{}
	var maxIno int64
	for rows.Next() {
		n, err := scanInode(rows)
		if err != nil {
			return nil, 0, err
		}
		nodes[n.ino] = n
		maxIno = max(maxIno, n.ino)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, classify(err)
	}
	return nodes, maxIno, nil
}

// scanInode reads the inode at the current row, refusing an unknown mode, a
// negative size, an inode number out of range and a symlink without a
// target.
func scanInode(rows *sql.Rows) (*node, error) {
	var ino, mode, nlink, size, sec, nsec int64
	var target *string
	if err := rows.Scan(&ino, &mode, &nlink, &size, &sec, &nsec, &target); err != nil {
		return nil, classify(err)
	}
	typ, perm, ok := goMode(mode)
	if !ok || size < 0 || ino <= 0 || ino >= 1<<(63-chunkBits) {
		return nil, fmt.Errorf("%w: inode %d: mode %o size %d", ErrCorrupt, ino, mode, size)
	}
	n := newNode(ino, typ, perm, time.Unix(sec, nsec))
	n.nlink = int(nlink)
	n.size = size
	if typ == fs.ModeSymlink {
		if target == nil {
			return nil, fmt.Errorf("%w: symlink %d has no target", ErrCorrupt, ino)
		}
		n.target = *target
		n.size = int64(len(n.target))
	}
	return n, nil
}

// loadEntries reads every directory entry into nodes and returns how many
// entries name each inode. An entry must name an inode of a directory, with
// a valid name, and not the root or a directory named elsewhere already.
func (s *store) loadEntries(nodes map[int64]*node) (map[int64]int, error) {
	rows, err := s.q.Query(`SELECT parent, name, ino FROM dentry`)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	named := map[int64]int{}
	for rows.Next() {
		var parent, ino int64
		var name string
		if err := rows.Scan(&parent, &name, &ino); err != nil {
			return nil, classify(err)
		}
		d, c := nodes[parent], nodes[ino]
		if d == nil || c == nil || d.typ != fs.ModeDir || !vfs.ValidName(name) || ino == 1 ||
			(c.typ == fs.ModeDir && c.parent != nil) {
			return nil, fmt.Errorf("%w: directory entry %d/%q -> %d", ErrCorrupt, parent, name, ino)
		}
		d.link(name, c)
		named[ino]++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	return named, nil
}

// checkReachable checks that every named directory hangs from root (no
// cycles).
func checkReachable(nodes map[int64]*node, root *node) error {
	for _, n := range nodes {
		if n.typ != fs.ModeDir || n == root || n.parent == nil {
			continue
		}
		depth := 0
		for d := n; d != root; d = d.parent {
			if d == nil || depth > len(nodes) {
				return fmt.Errorf("%w: directory %d is not reachable from the root", ErrCorrupt, n.ino)
			}
			depth++
		}
	}
	return nil
}

// removeOrphans deletes the inodes no entry names, with their chunks, in
// one write.
func (s *store) removeOrphans(orphans []int64) error {
	s.w.enter()
	b, err := s.w.exec(func() error {
		for _, ino := range orphans {
			if err := s.w.x(s.w.delInode, ino); err != nil {
				return err
			}
			if err := s.w.x(s.w.delChunks, ino<<chunkBits, (ino+1)<<chunkBits-1); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		return s.w.leave(b)
	}
	s.w.leave(nil)
	return err
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
