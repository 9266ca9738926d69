package cas

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/capfs/capfs/internal/rofile"
	"github.com/capfs/capfs/vfs"
)

// Entry is the Info.Sys of every entry an FS reports: what it is in the tree.
type Entry struct {
	// Kind is "directory", "file", "executable" or "symlink".
	Kind string
	// Digest is the blob (file) or Directory message (directory) it names; zero for
	// a symlink.
	Digest Digest
}

// node is one entry of a tree.
type node struct {
	typ    fs.FileMode // fs.ModeDir, fs.ModeSymlink or 0
	d      Digest
	exec   bool
	target string
}

// ents is a decoded Directory as one list sorted by name.
type ents struct {
	names []string
	nodes []node
}

func (e *ents) lookup(name string) (node, bool) {
	i := sort.SearchStrings(e.names, name)
	if i < len(e.names) && e.names[i] == name {
		return e.nodes[i], true
	}
	return node{}, false
}

func entsOf(d *Directory) *ents {
	n := len(d.Files) + len(d.Dirs) + len(d.Symlinks)
	e := &ents{names: make([]string, 0, n), nodes: make([]node, 0, n)}
	for _, f := range d.Files {
		e.names = append(e.names, f.Name)
		e.nodes = append(e.nodes, node{d: f.Digest, exec: f.Executable})
	}
	for _, s := range d.Dirs {
		e.names = append(e.names, s.Name)
		e.nodes = append(e.nodes, node{typ: fs.ModeDir, d: s.Digest})
	}
	for _, l := range d.Symlinks {
		e.names = append(e.names, l.Name)
		e.nodes = append(e.nodes, node{typ: fs.ModeSymlink, target: l.Target})
	}
	sort.Sort(entSorter{e})
	return e
}

type entSorter struct{ e *ents }

func (s entSorter) Len() int           { return len(s.e.names) }
func (s entSorter) Less(i, j int) bool { return s.e.names[i] < s.e.names[j] }
func (s entSorter) Swap(i, j int) {
	s.e.names[i], s.e.names[j] = s.e.names[j], s.e.names[i]
	s.e.nodes[i], s.e.nodes[j] = s.e.nodes[j], s.e.nodes[i]
}

// maxDirMessage bounds the size of a Directory message the backend decodes.
const maxDirMessage = 64 << 20

// dirCache keeps decoded directories by digest, bounded by count.
type dirCache struct {
	mu  sync.Mutex
	m   map[Digest]*ents
	max int
}

func (c *dirCache) get(d Digest) (*ents, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[d]
	return e, ok
}

func (c *dirCache) put(d Digest, e *ents) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k := range c.m { // evict an arbitrary tenth
			delete(c.m, k)
			if len(c.m) < c.max*9/10 {
				break
			}
		}
	}
	c.m[d] = e
}

// loadDir reads, verifies and decodes Directory d, through the cache.
func loadDir(ctx context.Context, st *Store, c *dirCache, d Digest) (*ents, error) {
	if e, ok := c.get(d); ok {
		return e, nil
	}
	b, err := st.ReadBlob(ctx, d, maxDirMessage)
	if err != nil {
		return nil, err
	}
	dir, err := DecodeDirectory(b)
	if err != nil {
		return nil, err
	}
	e := entsOf(dir)
	c.put(d, e)
	return e, nil
}

// FS is one tree of a Store, mounted read-only: a vfs.Backend over a root
// Directory digest. Nothing is read at Open but the root directory; each
// directory is read, verified and decoded the first time a path crosses it (and
// kept in a bounded cache shared with the FS's Subs), each file's blob when it is
// opened. It is safe for concurrent use.
//
// Guarantees:
//   - Every mutation fails with read_only, as does OpenFile with a write flag.
//   - Modes: regular files 0644, executables (is_executable) 0755, directories
//     ModeDir|0755, symlinks ModeSymlink|0777 with the stored target. ModTime is
//     the time given to Open (zero by default). Info.ID is 0 (content addressing
//     makes equal files share blobs; they are not hard links); Info.Sys is an
//     *Entry naming the digest.
//   - Symlinks are followed by vfs.Resolve beneath the FS's root: absolute or
//     escaping targets fail with path_outside_sandbox.
//   - A blob that is missing or fails verification makes the call that needed it
//     fail with io_error; no call returns bytes that do not match their digest,
//     except that a file over 4 MiB is streamed and its last read (the one that
//     reaches the end) is the one that fails.
//   - Sub pins the subtree's digest.
type FS struct {
	rofile.Immutable[casMessage]
	st      *Store
	cache   *dirCache
	root    node
	modTime time.Time
}

var _ vfs.Backend = (*FS)(nil)

// Mount returns the FS of the tree whose root Directory is root. The root directory is read
// and verified now: a missing or corrupt one is an error (io_error, or not_found
// for a root the store does not hold).
func (s *Store) Mount(ctx context.Context, root Digest, modTime time.Time) (*FS, error) {
	f := &FS{st: s, cache: &dirCache{m: map[Digest]*ents{}, max: 8192}, root: node{typ: fs.ModeDir, d: root}, modTime: modTime}
	if _, err := loadDir(ctx, s, f.cache, root); err != nil {
		code := vfs.CodeIO
		if errors.Is(err, ErrMissing) {
			code = vfs.CodeNotFound
		}
		return nil, vfs.NewError(code, "mount", vfs.Root, err.Error())
	}
	return f, nil
}

// Root returns the digest of the FS's root directory.
func (f *FS) Root() Digest { return f.root.d }

// Store returns the store the FS reads.
func (f *FS) Store() *Store { return f.st }

// Features reports a read-only backend with symlinks.
func (f *FS) Features() vfs.Features {
	return vfs.Features{ReadOnly: true, Symlinks: true, Persistent: true}
}

// treeView is the vfs.Tree the shared resolver walks.
type treeView struct {
	ctx context.Context
	f   *FS
}

func (t treeView) Lookup(dir node, name string) (node, bool, error) {
	e, err := loadDir(t.ctx, t.f.st, t.f.cache, dir.d)
	if err != nil {
		return node{}, false, storeErr(err)
	}
	n, ok := e.lookup(name)
	return n, ok, nil
}

func (treeView) Type(n node) fs.FileMode { return n.typ }

func (treeView) Target(n node) (string, error) { return n.target, nil }

// storeErr turns a store failure met during resolution into an io_error.
func storeErr(err error) error {
	return &vfs.Error{Code: vfs.CodeIO, Op: "read", Err: err}
}

func (f *FS) resolve(ctx context.Context, p vfs.Path, follow bool, op string) (node, string, error) {
	if err := ctx.Err(); err != nil {
		return node{}, "", &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
	}
	res, err := vfs.Resolve[node](ctx, treeView{ctx, f}, f.root, p, follow, op)
	if err != nil {
		return node{}, "", readdress(err, op, p)
	}
	if !res.Found {
		return node{}, "", vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	return res.Node, res.Name, nil
}

// readdress gives a store error met under the resolver (one with no path yet)
// the operation's name and path with [vfs.Readdress]; an error the resolver
// already addressed keeps its own.
func readdress(err error, op string, p vfs.Path) error {
	if ve, ok := errors.AsType[*vfs.Error](err); ok && ve.Path == "" {
		return vfs.Readdress(ve, op, p.String(), "")
	}
	return err
}

func ioErr(op string, p vfs.Path, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
	}
	return vfs.NewError(vfs.CodeIO, op, p, err.Error())
}

func (f *FS) info(n node, name string) vfs.Info {
	if name == "" {
		name = "."
	}
	i := vfs.Info{Name: name, ModTime: f.modTime, Nlink: 1}
	switch n.typ {
	case fs.ModeDir:
		i.Mode = fs.ModeDir | 0o755
		i.Sys = &Entry{Kind: "directory", Digest: n.d}
	case fs.ModeSymlink:
		i.Mode = fs.ModeSymlink | 0o777
		i.Size = int64(len(n.target))
		i.Sys = &Entry{Kind: "symlink"}
	default:
		i.Size = n.d.Size
		if n.exec {
			i.Mode = 0o755
			i.Sys = &Entry{Kind: "executable", Digest: n.d}
		} else {
			i.Mode = 0o644
			i.Sys = &Entry{Kind: "file", Digest: n.d}
		}
	}
	return i
}

// Stat returns information on p, following a final symlink.
func (f *FS) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	n, name, err := f.resolve(ctx, p, true, "stat")
	if err != nil {
		return vfs.Info{}, err
	}
	return f.info(n, name), nil
}

// Lstat returns information on p without following a final symlink.
func (f *FS) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	n, name, err := f.resolve(ctx, p, false, "lstat")
	if err != nil {
		return vfs.Info{}, err
	}
	return f.info(n, name), nil
}

// ReadDir lists directory p sorted by name.
func (f *FS) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	n, _, err := f.resolve(ctx, p, true, "readdir")
	if err != nil {
		return nil, err
	}
	if n.typ != fs.ModeDir {
		return nil, vfs.NewError(vfs.CodeNotDir, "readdir", p, "")
	}
	e, err := loadDir(ctx, f.st, f.cache, n.d)
	if err != nil {
		return nil, ioErr("readdir", p, err)
	}
	out := make([]vfs.DirEntry, len(e.names))
	for i, name := range e.names {
		out[i] = vfs.DirEntry{Name: name, Type: e.nodes[i].typ}
	}
	return out, nil
}

const writeFlags = os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_TRUNC | os.O_APPEND

// OpenFile opens p for reading; any write flag fails with read_only. A directory
// opens, but reading it fails with is_a_directory. A blob up to 4 MiB is read and
// verified whole at open; a larger one is streamed (see FS).
func (f *FS) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	if flag&writeFlags != 0 {
		return nil, denied("open", p)
	}
	n, name, err := f.resolve(ctx, p, true, "open")
	if err != nil {
		return nil, err
	}
	return f.openNode(ctx, p, n, f.info(n, name))
}

// openNode opens the file or directory n, found at p, described by info.
func (f *FS) openNode(ctx context.Context, p vfs.Path, n node, info vfs.Info) (vfs.File, error) {
	if n.typ == fs.ModeDir {
		return rofile.NewData(p, info, nil, readOnlyMsg), nil
	}
	if n.d.Size > smallBlob {
		return rofile.NewSource(p, info, &streamSource{st: f.st, d: n.d, path: p}, readOnlyMsg), nil
	}
	data, err := f.st.ReadBlob(ctx, n.d, smallBlob)
	if err != nil {
		return nil, ioErr("open", p, err)
	}
	return rofile.NewData(p, info, data, readOnlyMsg), nil
}

// Readlink returns the target text of symlink p; invalid_path if p is not one.
func (f *FS) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	n, _, err := f.resolve(ctx, p, false, "readlink")
	if err != nil {
		return "", err
	}
	if n.typ != fs.ModeSymlink {
		return "", vfs.NewError(vfs.CodeInvalidPath, "readlink", p, "not a symlink")
	}
	return n.target, nil
}

// Sub returns an FS rooted at directory p, pinned to its digest.
func (f *FS) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	n, _, err := f.resolve(ctx, p, true, "sub")
	if err != nil {
		return nil, err
	}
	if n.typ != fs.ModeDir {
		return nil, vfs.NewError(vfs.CodeNotDir, "sub", p, "")
	}
	return &FS{st: f.st, cache: f.cache, root: n, modTime: f.modTime}, nil
}

// Resolve returns the canonical location of p (see vfs.Backend.Resolve). A tree
// is immutable, so the location stays true.
func (f *FS) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	const op = "resolve"
	if err := ctx.Err(); err != nil {
		return vfs.Location{}, &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
	}
	_, loc, err := vfs.ResolveLocation[node](ctx, treeView{ctx, f}, f.root, p, follow, op)
	if err != nil {
		return vfs.Location{}, readdress(err, op, p)
	}
	return loc, nil
}

// casMessage names the backend in its read_only refusals (rofile.Immutable, which
// FS embeds for Mkdir, Remove, Rename, Symlink, Link, Chmod and Chtimes).
type casMessage struct{}

func (casMessage) ReadOnlyMessage() string { return readOnlyMsg }

func denied(op string, p vfs.Path) error {
	return rofile.Immutable[casMessage]{}.Refuse(op, p)
}

// readOnlyMsg is what writes to an open file fail with.
const readOnlyMsg = "content-addressed tree is read-only"

// streamSource reads a large blob of the store sequentially, verified: a read
// behind the stream reopens it, and reading to the end is where a mismatch
// shows (a CorruptError, never wrong bytes). Open files are rofile.Files.
type streamSource struct {
	st   *Store
	d    Digest
	path vfs.Path
	rc   io.ReadCloser // the blob's reader, at position pos
	pos  int64
}

func (s *streamSource) ReadAt(b []byte, off int64) (int, error) {
	size := s.d.Size
	if s.rc == nil || off < s.pos {
		if s.rc != nil {
			s.rc.Close()
		}
		rc, err := s.st.OpenBlob(context.Background(), s.d)
		if err != nil {
			s.rc = nil
			return 0, ioErr("read", s.path, err)
		}
		s.rc, s.pos = rc, 0
	}
	if off > s.pos {
		n, err := io.CopyN(io.Discard, s.rc, off-s.pos)
		s.pos += n
		if err != nil {
			return 0, s.streamErr(err)
		}
	}
	n, err := io.ReadFull(s.rc, b)
	s.pos += int64(n)
	if err != nil {
		return n, s.streamErr(err)
	}
	if s.pos == size {
		// Read to the end of the verified stream: this is where a mismatch shows.
		var one [1]byte
		if _, err := s.rc.Read(one[:]); err != io.EOF {
			if err == nil {
				err = &CorruptError{s.d, "holds more bytes than its size"}
			}
			return 0, ioErr("read", s.path, err)
		}
	}
	return n, nil
}

func (s *streamSource) streamErr(err error) error {
	s.rc.Close()
	s.rc = nil
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = &CorruptError{s.d, "shorter than its size"}
	}
	return ioErr("read", s.path, err)
}

func (s *streamSource) Close() error {
	if s.rc != nil {
		s.rc.Close()
		s.rc = nil
	}
	return nil
}
