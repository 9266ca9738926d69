package gitree

import (
	"bytes"
	"container/list"
	"io"
	"io/fs"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/capfs/capfs/backends/gitree/internal/pack"
	"github.com/capfs/capfs/vfs"
)

// node is one entry of a git tree: its mode and the object it names. The root of a
// backend is a node of mode Dir (or Submodule, for a Sub taken at a gitlink).
type node struct {
	mode filemode.FileMode
	hash plumbing.Hash
}

// typeOf returns n's fs type bits. A submodule is shown as a directory.
func typeOf(n node) fs.FileMode {
	switch n.mode {
	case filemode.Dir, filemode.Submodule:
		return fs.ModeDir
	case filemode.Symlink:
		return fs.ModeSymlink
	}
	return 0
}

// dir is a decoded tree, its entries sorted by name (git sorts directories as if
// their names ended in "/", which is not the order ReadDir promises).
type dir struct {
	names []string
	nodes []node
}

func (d *dir) lookup(name string) (node, bool) {
	i := sort.SearchStrings(d.names, name)
	if i < len(d.names) && d.names[i] == name {
		return d.nodes[i], true
	}
	return node{}, false
}

var emptyDir = &dir{}

// repoState is what every FS opened from one Open (and its Subs) shares: the object
// store, guarded by mu, and the tree cache.
type repoState struct {
	mu     sync.Mutex // serializes object-store access
	store  storer.EncodedObjectStorer
	packs  *pack.Store // the direct pack reader; nil when off or without packs
	closer io.Closer   // the storage, when Open built it; nil otherwise
	closed atomic.Bool // set under mu
	cache  *lru

	streamMin int64 // blobs larger than this are streamed; < 0: never
}

var errClosed = &vfs.Error{Code: vfs.CodeClosed, Op: "read"}

// close closes the storage once; later object reads fail with closed.
func (r *repoState) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return nil
	}
	r.closed.Store(true)
	var err error
	if r.packs != nil {
		err = r.packs.Close()
	}
	if r.closer != nil {
		if e := r.closer.Close(); err == nil {
			err = e
		}
	}
	return err
}

// lock takes mu, failing if the repository was closed.
func (r *repoState) lock() error {
	r.mu.Lock()
	if r.closed.Load() {
		r.mu.Unlock()
		return errClosed
	}
	return nil
}

// loadDir returns the decoded directory n, from the cache when possible.
func (r *repoState) loadDir(n node) (*dir, error) {
	if n.mode == filemode.Submodule {
		return emptyDir, nil
	}
	if d, ok := r.cache.get(n.hash); ok {
		return d, nil
	}
	var d *dir
	typ, data, err := r.packs.Read(n.hash, -1)
	switch {
	case err == nil && typ != plumbing.TreeObject:
		return nil, plumbing.ErrObjectNotFound
	case err == nil:
		if d, err = parseTree(data); err != nil {
			return nil, err
		}
	case err == pack.ErrNotPacked:
		if d, err = r.goGitTree(n.hash); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	r.cache.put(n.hash, d)
	return d, nil
}

// goGitTree reads tree h through go-git's storage.
func (r *repoState) goGitTree(h plumbing.Hash) (*dir, error) {
	if err := r.lock(); err != nil {
		return nil, err
	}
	t, err := object.GetTree(r.store, h)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	d := &dir{names: make([]string, len(t.Entries)), nodes: make([]node, len(t.Entries))}
	for i, e := range t.Entries {
		d.names[i] = e.Name
		d.nodes[i] = node{mode: e.Mode, hash: e.Hash}
	}
	d.sort()
	return d, nil
}

// parseTree decodes a raw tree object: entries of "<octal mode> <name>\0<20-byte id>".
func parseTree(data []byte) (*dir, error) {
	n := bytes.Count(data, []byte{0})
	d := &dir{names: make([]string, 0, n), nodes: make([]node, 0, n)}
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		nul := bytes.IndexByte(data, 0)
		if sp <= 0 || nul <= sp+1 || nul+21 > len(data) {
			return nil, pack.Corrupt("malformed tree entry")
		}
		mode, err := parseMode(data[:sp])
		if err != nil {
			return nil, err
		}
		var nd node
		nd.mode = mode
		copy(nd.hash[:], data[nul+1:nul+21])
		d.names = append(d.names, string(data[sp+1:nul]))
		d.nodes = append(d.nodes, nd)
		data = data[nul+21:]
	}
	d.sort()
	return d, nil
}

// parseMode parses a tree entry's octal mode, the common ones without allocating.
func parseMode(b []byte) (filemode.FileMode, error) {
	switch string(b) {
	case "100644":
		return filemode.Regular, nil
	case "40000":
		return filemode.Dir, nil
	case "100755":
		return filemode.Executable, nil
	case "120000":
		return filemode.Symlink, nil
	case "160000":
		return filemode.Submodule, nil
	}
	m, err := filemode.New(string(b))
	if err != nil {
		return 0, pack.Corrupt("malformed tree entry mode")
	}
	return m, nil
}

// sort orders d's entries by name, unless they already are (git orders a
// directory as if its name ended in "/").
func (d *dir) sort() {
	if sort.StringsAreSorted(d.names) {
		return
	}
	idx := make([]int, len(d.names))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return d.names[idx[a]] < d.names[idx[b]] })
	names, nodes := make([]string, len(idx)), make([]node, len(idx))
	for i, j := range idx {
		names[i], nodes[i] = d.names[j], d.nodes[j]
	}
	d.names, d.nodes = names, nodes
}

// readBlob returns the whole content of blob h.
func (r *repoState) readBlob(h plumbing.Hash) ([]byte, error) {
	return r.readBlobMax(h, -1)
}

// errLongTarget refuses a symlink blob longer than any target a host could hold.
var errLongTarget = &vfs.Error{Code: vfs.CodeInvalidPath, Op: "readlink"}

// maxTarget is the longest symlink target read (Linux's PATH_MAX).
const maxTarget = 4096

// readBlobMax is readBlob refusing, with invalid_path, a blob larger than max
// bytes (max < 0: no limit) before reading it.
func (r *repoState) readBlobMax(h plumbing.Hash, max int64) ([]byte, error) {
	typ, data, err := r.packs.Read(h, max)
	switch {
	case err == pack.ErrTooLarge:
		return nil, errLongTarget
	case err == nil && typ != plumbing.BlobObject:
		return nil, plumbing.ErrObjectNotFound
	case err != pack.ErrNotPacked:
		return data, err
	}
	if err := r.lock(); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	o, err := r.store.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, err
	}
	if max >= 0 && o.Size() > max {
		return nil, errLongTarget
	}
	rd, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	buf := make([]byte, o.Size())
	if _, err := io.ReadFull(rd, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// blobSize returns the size of blob h without decoding it where the store allows.
func (r *repoState) blobSize(h plumbing.Hash) (int64, error) {
	typ, size, err := r.packs.Info(h)
	switch {
	case err == nil && typ != plumbing.BlobObject:
		return 0, plumbing.ErrObjectNotFound
	case err != pack.ErrNotPacked:
		return size, err
	}
	if err := r.lock(); err != nil {
		return 0, err
	}
	defer r.mu.Unlock()
	if s, ok := r.store.(interface {
		EncodedObjectSize(plumbing.Hash) (int64, error)
	}); ok {
		return s.EncodedObjectSize(h)
	}
	o, err := r.store.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return 0, err
	}
	return o.Size(), nil
}

// treeView adapts a repoState to [vfs.Tree] for the shared resolver.
type treeView struct{ r *repoState }

func (t treeView) Lookup(d node, name string) (node, bool, error) {
	dd, err := t.r.loadDir(d)
	if err != nil {
		return node{}, false, err
	}
	n, ok := dd.lookup(name)
	return n, ok, nil
}

func (t treeView) Type(n node) fs.FileMode { return typeOf(n) }

// Target returns the symlink's blob; a blob over maxTarget bytes is invalid_path.
func (t treeView) Target(n node) (string, error) {
	b, err := t.r.readBlobMax(n.hash, maxTarget)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// lru is a small mutex-guarded least-recently-used cache of decoded trees.
type lru struct {
	mu    sync.Mutex
	max   int
	ll    *list.List // front = most recent; values are *lruItem
	items map[plumbing.Hash]*list.Element
}

type lruItem struct {
	key plumbing.Hash
	d   *dir
}

func newLRU(max int) *lru {
	if max < 1 {
		max = 1
	}
	return &lru{max: max, ll: list.New(), items: make(map[plumbing.Hash]*list.Element)}
}

func (c *lru) get(h plumbing.Hash) (*dir, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[h]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*lruItem).d, true
}

func (c *lru) put(h plumbing.Hash, d *dir) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[h]; ok {
		c.ll.MoveToFront(e)
		return
	}
	c.items[h] = c.ll.PushFront(&lruItem{key: h, d: d})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*lruItem).key)
	}
}

func (c *lru) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
