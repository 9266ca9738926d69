package aferofs

import (
	"archive/tar"
	"archive/zip"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/capfs/capfs/vfs"
	"github.com/spf13/afero"
)

// Option configures New.
type Option func(*config)

type config struct {
	readOnly   bool
	persistent bool
}

// ReadOnly makes the backend refuse every mutation with read_only, whatever the
// afero filesystem would allow.
func ReadOnly() Option { return func(c *config) { c.readOnly = true } }

// Persistent declares that the filesystem's contents survive the process (an sftpfs
// connection, say); it only sets Features().Persistent.
func Persistent() Option { return func(c *config) { c.persistent = true } }

// shared is the state every Sub of one New shares.
type shared struct {
	fs    afero.Fs
	feat  vfs.Features
	mu    sync.RWMutex // namespace lock: see the package doc
	lst   afero.Lstater
	lrd   afero.LinkReader
	lnk   afero.Linker
	canLn bool // symlinks can be created
	appMu sync.Mutex
	tmpN  atomic.Uint64
}

// Backend is a vfs.Backend over an afero.Fs. It is safe for concurrent use.
type Backend struct {
	s    *shared
	root string // afero path of this backend's root: "/" or "/a/b"
}

var _ vfs.Backend = (*Backend)(nil)

// New returns a Backend serving fsys from its root "/". It fails with not_supported
// for a nil filesystem and for afero's OS filesystems (an *afero.OsFs, or any wrapper
// through which one is visible): host directories belong to backends/physical.
//
// Features are detected: ReadOnly for an *afero.ReadOnlyFs, the zipfs and tarfs
// archive views, or the ReadOnly option; Symlinks when the filesystem can read
// symlinks (afero.Lstater plus afero.LinkReader, or archive symlink entries) and can
// either create them (afero.Linker) or is read-only; Chmod and Chtimes always (the
// filesystem may still refuse); HardLinks never.
func New(fsys afero.Fs, opts ...Option) (*Backend, error) {
	if fsys == nil {
		return nil, vfs.NewError(vfs.CodeNotSupported, "new", vfs.Root, "nil afero.Fs")
	}
	if reachesOsFs(fsys) {
		return nil, vfs.NewError(vfs.CodeNotSupported, "new", vfs.Root,
			"afero's OS filesystems are not served by aferofs; use the physical backend for host directories")
	}
	var c config
	for _, o := range opts {
		o(&c)
	}
	s := &shared{fs: fsys}
	s.lst, _ = fsys.(afero.Lstater)
	s.lrd, _ = fsys.(afero.LinkReader)
	s.lnk, _ = fsys.(afero.Linker)
	canRead, canCreate := linkCaps(fsys)
	_, isRO := fsys.(*afero.ReadOnlyFs)
	ro := c.readOnly || isRO || isArchive(fsys)
	s.canLn = canCreate && !ro
	s.feat = vfs.Features{
		ReadOnly:   ro,
		Symlinks:   canRead && (canCreate || ro),
		Chmod:      true,
		Chtimes:    true,
		Persistent: c.persistent,
	}
	return &Backend{s: s, root: "/"}, nil
}

// Features implements vfs.Backend.
func (b *Backend) Features() vfs.Features { return b.s.feat }

// node is an entry as the resolver sees it: its afero path and its lstat information
// (nil for a backend root, which is a directory by construction).
type node struct {
	p  string
	fi fs.FileInfo
}

// tree implements vfs.Tree over the afero filesystem.
type tree struct{ s *shared }

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

func (s *shared) lstat(name string) (fs.FileInfo, error) {
	if s.lst != nil {
		fi, _, err := s.lst.LstatIfPossible(name)
		return fi, err
	}
	return s.fs.Stat(name)
}

func (t tree) Lookup(dir node, name string) (node, bool, error) {
	p := join(dir.p, name)
	fi, err := t.s.lstat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return node{}, false, nil
		}
		return node{}, false, err
	}
	return node{p: p, fi: fi}, true, nil
}

// typeOf returns the type bits of fi, with ModeDir set when IsDir says so.
func typeOf(fi fs.FileInfo) fs.FileMode {
	t := fi.Mode().Type()
	if fi.IsDir() {
		t |= fs.ModeDir
	}
	return t
}

func (t tree) Type(n node) fs.FileMode {
	if n.fi == nil {
		return fs.ModeDir
	}
	return typeOf(n.fi)
}

func (t tree) Target(n node) (string, error) { return t.s.readlink(n) }

// readlink returns the target of symlink n: from a tar header, from the content of a
// zip entry, or from the filesystem's LinkReader.
func (s *shared) readlink(n node) (string, error) {
	if n.fi != nil {
		switch h := n.fi.Sys().(type) {
		case *tar.Header:
			return h.Linkname, nil
		case *zip.FileHeader:
			f, err := s.fs.Open(n.p)
			if err != nil {
				return "", err
			}
			defer f.Close()
			b, err := io.ReadAll(io.LimitReader(f, vfs.MaxPathLen+1))
			if err != nil {
				return "", err
			}
			if len(b) > vfs.MaxPathLen {
				return "", syscall.ENAMETOOLONG
			}
			return string(b), nil
		}
	}
	if s.lrd == nil {
		return "", errors.ErrUnsupported
	}
	return s.lrd.ReadlinkIfPossible(n.p)
}

// errOf converts an afero error into a *vfs.Error for op on p.
func errOf(op string, p vfs.Path, err error) error {
	if err == nil {
		return nil
	}
	if isClosedErr(err) {
		return &vfs.Error{Code: vfs.CodeClosed, Op: op, Path: p.String(), Err: fs.ErrClosed}
	}
	if errors.Is(err, afero.ErrOutOfRange) {
		return &vfs.Error{Code: vfs.CodeInvalidPath, Op: op, Path: p.String(), Err: fs.ErrInvalid}
	}
	if errors.Is(err, afero.ErrNoSymlink) || errors.Is(err, afero.ErrNoReadlink) {
		return &vfs.Error{Code: vfs.CodeNotSupported, Op: op, Path: p.String(), Err: errors.ErrUnsupported}
	}
	return vfs.Errno(op, p, err)
}

func isClosedErr(err error) bool {
	// afero and afero/mem each define their own "File is closed" error value.
	return errors.Is(err, afero.ErrFileClosed) || errors.Is(err, fs.ErrClosed) ||
		err.Error() == afero.ErrFileClosed.Error()
}

func fail(code vfs.Code, op string, p vfs.Path, msg string) error {
	return vfs.NewError(code, op, p, msg)
}

func canceled(ctx context.Context, op string, p vfs.Path) error {
	if err := ctx.Err(); err != nil {
		return &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
	}
	return nil
}

func (b *Backend) resolve(ctx context.Context, p vfs.Path, follow bool, op string) (vfs.Resolution[node], error) {
	return vfs.Resolve[node](ctx, tree{b.s}, node{p: b.root}, p, follow, op)
}

// where returns the afero path a resolution names (existing or to be created).
func where(r vfs.Resolution[node]) string {
	if r.Found {
		return r.Node.p
	}
	return join(r.Parent.p, r.Name)
}

// infoOf converts afero file information; name is the guest-visible base name.
func infoOf(fi fs.FileInfo, name string) vfs.Info {
	typ := typeOf(fi)
	mode := typ | fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)
	size := fi.Size()
	if typ.IsDir() {
		size = 0
	}
	return vfs.Info{Name: name, Size: size, Mode: mode, ModTime: fi.ModTime()}
}

func baseName(p vfs.Path) string {
	if p.IsRoot() {
		return "."
	}
	return p.Base()
}

// statNode returns the information of a resolved node.
func (b *Backend) statNode(n node, op string, p vfs.Path) (vfs.Info, error) {
	fi := n.fi
	if fi == nil {
		var err error
		if fi, err = b.s.fs.Stat(n.p); err != nil {
			return vfs.Info{}, errOf(op, p, err)
		}
	}
	return infoOf(fi, baseName(p)), nil
}

// Stat implements vfs.Backend.
func (b *Backend) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return b.stat(ctx, p, true, "stat")
}

// Lstat implements vfs.Backend.
func (b *Backend) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return b.stat(ctx, p, false, "lstat")
}

func (b *Backend) stat(ctx context.Context, p vfs.Path, follow bool, op string) (vfs.Info, error) {
	if err := canceled(ctx, op, p); err != nil {
		return vfs.Info{}, err
	}
	b.s.mu.RLock()
	defer b.s.mu.RUnlock()
	r, err := b.resolve(ctx, p, follow, op)
	if err != nil {
		return vfs.Info{}, err
	}
	if !r.Found {
		return vfs.Info{}, fail(vfs.CodeNotFound, op, p, "")
	}
	return b.statNode(r.Node, op, p)
}

// ReadDir implements vfs.Backend.
func (b *Backend) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	const op = "readdir"
	if err := canceled(ctx, op, p); err != nil {
		return nil, err
	}
	b.s.mu.RLock()
	defer b.s.mu.RUnlock()
	r, err := b.resolve(ctx, p, true, op)
	if err != nil {
		return nil, err
	}
	if !r.Found {
		return nil, fail(vfs.CodeNotFound, op, p, "")
	}
	if !(tree{b.s}).Type(r.Node).IsDir() {
		return nil, fail(vfs.CodeNotDir, op, p, "")
	}
	infos, err := b.s.list(r.Node.p)
	if err != nil {
		return nil, errOf(op, p, err)
	}
	out := make([]vfs.DirEntry, 0, len(infos))
	for _, fi := range infos {
		name := fi.Name()
		if !vfs.ValidName(name) {
			continue
		}
		out = append(out, vfs.DirEntry{Name: name, Type: typeOf(fi)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// list returns the entries of directory name, unsorted.
func (s *shared) list(name string) ([]fs.FileInfo, error) {
	f, err := s.fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	infos, err := f.Readdir(-1)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return infos, nil
}

// isEmptyDir reports whether directory name has no entries.
func (s *shared) isEmptyDir(name string) (bool, error) {
	infos, err := s.list(name)
	if err != nil {
		return false, err
	}
	return len(infos) == 0, nil
}

const (
	accMode    = os.O_RDONLY | os.O_WRONLY | os.O_RDWR
	writeFlags = os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_TRUNC | os.O_APPEND
	permBits   = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky
)

// OpenFile implements vfs.Backend.
func (b *Backend) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	const op = "open"
	if err := canceled(ctx, op, p); err != nil {
		return nil, err
	}
	if b.s.feat.ReadOnly && flag&writeFlags != 0 {
		return nil, fail(vfs.CodeReadOnly, op, p, "")
	}
	acc := flag & accMode
	if acc != os.O_RDONLY && acc != os.O_WRONLY && acc != os.O_RDWR {
		return nil, fail(vfs.CodeInvalidPath, op, p, "invalid access mode")
	}
	// Opening an existing file needs only the read lock; creating needs the write
	// lock, taken (and the path resolved again) only when the file is missing.
	b.s.mu.RLock()
	f, retry, err := b.open(ctx, p, flag, perm, false)
	b.s.mu.RUnlock()
	if !retry {
		return f, err
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	f, _, err = b.open(ctx, p, flag, perm, true)
	return f, err
}

// open does the work of OpenFile. Without mayCreate it reports retry=true where the
// file would have to be created.
func (b *Backend) open(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode, mayCreate bool) (vfs.File, bool, error) {
	const op = "open"
	acc := flag & accMode
	create := flag&os.O_CREATE != 0
	excl := create && flag&os.O_EXCL != 0
	r, err := b.resolve(ctx, p, !excl, op)
	if err != nil {
		return nil, false, err
	}
	if !r.Found {
		if !create {
			return nil, false, fail(vfs.CodeNotFound, op, p, "")
		}
		if p.MustBeDir() {
			return nil, false, fail(vfs.CodeIsDir, op, p, "")
		}
		if !mayCreate {
			return nil, true, nil
		}
		uf, err := b.s.fs.OpenFile(where(r), acc|os.O_CREATE|os.O_EXCL, perm&permBits)
		if err != nil {
			return nil, false, errOf(op, p, err)
		}
		return newFile(b.s, uf, p, flag, false), false, nil
	}
	if excl {
		return nil, false, fail(vfs.CodeExists, op, p, "")
	}
	typ := tree{b.s}.Type(r.Node)
	switch {
	case typ.IsDir():
		if acc != os.O_RDONLY || flag&(os.O_CREATE|os.O_TRUNC) != 0 {
			return nil, false, fail(vfs.CodeIsDir, op, p, "")
		}
	case typ != 0:
		return nil, false, fail(vfs.CodeNotRegular, op, p, "")
	}
	// O_TRUNC truncates whatever the access mode, as on Linux (and in the memory
	// backend); the afero file is then opened for writing, and the File returned
	// still refuses writes the caller's access mode does not allow.
	uflag := acc
	if flag&os.O_TRUNC != 0 {
		uflag = os.O_RDWR
	}
	uf, err := b.s.fs.OpenFile(r.Node.p, uflag, 0)
	if err != nil {
		return nil, false, errOf(op, p, err)
	}
	if flag&os.O_TRUNC != 0 {
		if err := uf.Truncate(0); err != nil {
			uf.Close()
			return nil, false, errOf(op, p, err)
		}
	}
	return newFile(b.s, uf, p, flag, typ.IsDir()), false, nil
}

// mutation starts a namespace mutation: it checks the context and read-only state and
// takes the write lock, which the caller releases.
func (b *Backend) mutation(ctx context.Context, op string, p vfs.Path) error {
	if err := canceled(ctx, op, p); err != nil {
		return err
	}
	if b.s.feat.ReadOnly {
		return fail(vfs.CodeReadOnly, op, p, "")
	}
	b.s.mu.Lock()
	return nil
}

// Mkdir implements vfs.Backend.
func (b *Backend) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	const op = "mkdir"
	if err := b.mutation(ctx, op, p); err != nil {
		return err
	}
	defer b.s.mu.Unlock()
	// A trailing slash does not make Mkdir follow a final (dangling) symlink: any
	// existing entry is already_exists, as with mkdir(2).
	r, err := b.resolve(ctx, p.WithoutDirMark(), false, op)
	if err != nil {
		return err
	}
	if r.Found {
		return fail(vfs.CodeExists, op, p, "")
	}
	return errOf(op, p, b.s.fs.Mkdir(where(r), perm&permBits))
}

// lookupEntry resolves p for an operation on the directory entry itself (Remove,
// Rename): a final symlink is not followed, and a trailing slash demands that the
// entry itself be a directory (a symlink to one does not do), as rmdir and rename
// require.
func (b *Backend) lookupEntry(ctx context.Context, p vfs.Path, op string) (vfs.Resolution[node], error) {
	r, err := b.resolve(ctx, p.WithoutDirMark(), false, op)
	if err != nil {
		return r, err
	}
	if p.MustBeDir() && r.Found && !(tree{b.s}).Type(r.Node).IsDir() {
		return r, fail(vfs.CodeNotDir, op, p, "")
	}
	return r, nil
}

// Remove implements vfs.Backend.
func (b *Backend) Remove(ctx context.Context, p vfs.Path) error {
	const op = "remove"
	if err := b.mutation(ctx, op, p); err != nil {
		return err
	}
	defer b.s.mu.Unlock()
	r, err := b.lookupEntry(ctx, p, op)
	if err != nil {
		return err
	}
	if !r.Found {
		return fail(vfs.CodeNotFound, op, p, "")
	}
	if r.Name == "" {
		return fail(vfs.CodeInvalidPath, op, p, "cannot remove the root")
	}
	if (tree{b.s}).Type(r.Node).IsDir() {
		empty, err := b.s.isEmptyDir(r.Node.p)
		if err != nil {
			return errOf(op, p, err)
		}
		if !empty {
			return fail(vfs.CodeNotEmpty, op, p, "")
		}
	}
	return errOf(op, p, b.s.fs.Remove(r.Node.p))
}

// Symlink implements vfs.Backend.
func (b *Backend) Symlink(ctx context.Context, target string, p vfs.Path) error {
	const op = "symlink"
	if err := b.mutation(ctx, op, p); err != nil {
		return err
	}
	defer b.s.mu.Unlock()
	if !b.s.canLn {
		return fail(vfs.CodeNotSupported, op, p, "the afero filesystem cannot create symlinks")
	}
	if target == "" {
		return fail(vfs.CodeInvalidPath, op, p, "empty symlink target")
	}
	for i := 0; i < len(target); i++ {
		if target[i] == 0 {
			return fail(vfs.CodeInvalidPath, op, p, "NUL byte in symlink target")
		}
	}
	if len(target) > vfs.MaxPathLen {
		return fail(vfs.CodeInvalidPath, op, p, "symlink target too long")
	}
	r, err := b.resolve(ctx, p, false, op)
	if err != nil {
		return err
	}
	if r.Found {
		return fail(vfs.CodeExists, op, p, "")
	}
	return errOf(op, p, b.s.lnk.SymlinkIfPossible(target, where(r)))
}

// Readlink implements vfs.Backend.
func (b *Backend) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	const op = "readlink"
	if err := canceled(ctx, op, p); err != nil {
		return "", err
	}
	b.s.mu.RLock()
	defer b.s.mu.RUnlock()
	r, err := b.resolve(ctx, p, false, op)
	if err != nil {
		return "", err
	}
	if !r.Found {
		return "", fail(vfs.CodeNotFound, op, p, "")
	}
	if (tree{b.s}).Type(r.Node)&fs.ModeSymlink == 0 {
		return "", fail(vfs.CodeInvalidPath, op, p, "not a symlink")
	}
	t, err := b.s.readlink(r.Node)
	if err != nil {
		return "", errOf(op, p, err)
	}
	return t, nil
}

// Link implements vfs.Backend: afero has no hard links, so it always fails
// (read_only on a read-only backend, not_supported otherwise).
func (b *Backend) Link(ctx context.Context, oldp, newp vfs.Path) error {
	const op = "link"
	if err := canceled(ctx, op, oldp); err != nil {
		return err
	}
	code := vfs.CodeNotSupported
	if b.s.feat.ReadOnly {
		code = vfs.CodeReadOnly
	}
	e := vfs.NewError(code, op, oldp, "")
	e.Dest = newp.String()
	return e
}

// attr runs fn on the followed resolution of p under the read lock.
func (b *Backend) attr(ctx context.Context, op string, p vfs.Path, fn func(n node) error) error {
	if err := canceled(ctx, op, p); err != nil {
		return err
	}
	if b.s.feat.ReadOnly {
		return fail(vfs.CodeReadOnly, op, p, "")
	}
	b.s.mu.RLock()
	defer b.s.mu.RUnlock()
	r, err := b.resolve(ctx, p, true, op)
	if err != nil {
		return err
	}
	if !r.Found {
		return fail(vfs.CodeNotFound, op, p, "")
	}
	return errOf(op, p, fn(r.Node))
}

// Chmod implements vfs.Backend.
func (b *Backend) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	return b.attr(ctx, "chmod", p, func(n node) error {
		return b.s.fs.Chmod(n.p, mode&permBits)
	})
}

// Chtimes implements vfs.Backend. afero has no way to leave one time unchanged, so a
// zero mtime keeps the current modification time and a zero atime is passed as the
// resulting modification time.
func (b *Backend) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	return b.attr(ctx, "chtimes", p, func(n node) error {
		if mtime.IsZero() {
			fi := n.fi
			if fi == nil {
				var err error
				if fi, err = b.s.fs.Stat(n.p); err != nil {
					return err
				}
			}
			mtime = fi.ModTime()
		}
		if atime.IsZero() {
			atime = mtime
		}
		return b.s.fs.Chtimes(n.p, atime, mtime)
	})
}

// Sub implements vfs.Backend. The result shares the afero filesystem and its lock,
// and is rooted at the afero path p resolves to now. It is not pinned: see the
// package doc.
func (b *Backend) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	const op = "sub"
	if err := canceled(ctx, op, p); err != nil {
		return nil, err
	}
	b.s.mu.RLock()
	defer b.s.mu.RUnlock()
	r, err := b.resolve(ctx, p, true, op)
	if err != nil {
		return nil, err
	}
	if !r.Found {
		return nil, fail(vfs.CodeNotFound, op, p, "")
	}
	if !(tree{b.s}).Type(r.Node).IsDir() {
		return nil, fail(vfs.CodeNotDir, op, p, "")
	}
	return &Backend{s: b.s, root: r.Node.p}, nil
}
