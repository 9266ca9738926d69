//go:build linux

package materialize

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/materialize/internal/hostfs"
)

// errGitBudget stops a history scan that has read its budget of tree objects.
var errGitBudget = errors.New("history larger than the scan budget")

// gitScan lists the paths a git directory can show: every path of every tree
// of every commit in its object store (reachable or not: branches, tags,
// reflogs, stashes and dangling commits alike), of trees that annotated tags
// name, and of its index; then the same for the repositories under its
// modules/ directory (submodules), whose paths are taken to lie under their
// module name. Each tree is read once per path it appears at.
//
// It also accounts for every object of each store: one that no commit, tag,
// tree or index of that store names (a blob added to the index and dropped
// from it, a tree no commit holds) has no path the policy can decide. Such
// loose objects are listed (unnamed, as paths relative to top), packed ones
// counted (unnamedPacked): a caller leaves the former out and the store out
// for the latter.
type gitScan struct {
	ctx    context.Context
	budget int                 // tree objects left to read
	paths  map[string]struct{} // every path found
	seen   map[string]struct{} // prefix + "\x00" + tree id
	trees  map[plumbing.Hash]*object.Tree

	top           string                     // the git directory scanned first
	named         map[plumbing.Hash]struct{} // objects the current store's history names
	loose, packed []plumbing.Hash            // the current store's objects
	unnamed       []string                   // unnamed loose objects: paths relative to top
	unnamedPacked int                        // unnamed packed objects (or, with alternates, any)
	// walked holds the entries beneath objects/ and modules/ (relative to
	// top) a fingerprint saw just before the scan; the loose objects are
	// taken from it instead of listing objects/ again. nil: list them.
	walked map[string]bool
}

// scan scans the git directory gitdir (a host path) whose work tree is prefix
// ("" for the root) and, recursively, its modules.
func (s *gitScan) scan(gitdir, prefix string) error {
	// ExclusiveAccess: the checkout's copy does not change while it is scanned,
	// so go-git may cache its pack indexes and loose object list, and keep its
	// packs open (closed by Close).
	fst := filesystem.NewStorageWithOptions(osfs.New(gitdir, osfs.WithBoundOS()), cache.NewObjectLRU(16<<20),
		filesystem.Options{ExclusiveAccess: true, KeepDescriptors: true})
	defer fst.Close()
	st := newLooseFirst(fst, gitdir)
	defer st.close()
	if s.top == "" {
		s.top = gitdir
	}
	s.trees = map[plumbing.Hash]*object.Tree{}
	s.named, s.loose, s.packed = map[plumbing.Hash]struct{}{}, nil, nil
	if idx, err := st.Index(); err == nil {
		for _, e := range idx.Entries {
			s.named[e.Hash] = struct{}{}
			s.paths[join(prefix, e.Name)] = struct{}{}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := s.worktrees(gitdir, prefix); err != nil {
		return err
	}
	err := s.roots(gitdir, st, func(o plumbing.EncodedObject) error {
		s.named[o.Hash()] = struct{}{}
		switch o.Type() {
		case plumbing.CommitObject:
			c, err := object.DecodeCommit(st, o)
			if err != nil {
				return err
			}
			return s.tree(st, c.TreeHash, prefix)
		case plumbing.TagObject:
			tag, err := object.DecodeTag(st, o)
			if err != nil {
				return err
			}
			if tag.TargetType == plumbing.TreeObject {
				return s.tree(st, tag.Target, prefix)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.account(gitdir)
	return s.modules(filepath.Join(gitdir, "modules"), "", prefix)
}

// rel is the git directory gitdir relative to the top one, in slash form
// ("" for the top one).
func (s *gitScan) rel(gitdir string) string {
	rel, err := filepath.Rel(s.top, gitdir)
	if err != nil || rel == "." {
		return ""
	}
	return filepath.ToSlash(rel)
}

// account records the current store's objects that nothing it holds names.
func (s *gitScan) account(gitdir string) {
	rel := s.rel(gitdir)
	for _, h := range s.loose {
		if _, ok := s.named[h]; !ok {
			id := h.String()
			s.unnamed = append(s.unnamed, join(rel, "objects/"+id[:2]+"/"+id[2:]))
		}
	}
	for _, h := range s.packed {
		if _, ok := s.named[h]; !ok {
			s.unnamedPacked++
		}
	}
	s.named, s.loose, s.packed = nil, nil, nil
}

// tree visits tree h at prefix.
// roots calls fn with every commit and tag object of the store at gitdir.
// Loose objects are told apart by their header alone (a blob is never
// inflated past it), packed ones by each pack's own iteration by type. A
// store with alternates is read through st's iteration of every object.
func (s *gitScan) roots(gitdir string, st *looseFirst, fn func(o plumbing.EncodedObject) error) error {
	if _, err := os.Lstat(filepath.Join(gitdir, "objects", "info", "alternates")); err == nil {
		return s.allRoots(st, fn)
	}
	fsys := osfs.New(gitdir, osfs.WithBoundOS())
	dg := dotgit.New(fsys)
	err := looseObjects(s.ctx, gitdir, listedLoose(s.walked, s.rel(gitdir)), func(h plumbing.Hash, typ plumbing.ObjectType) error {
		s.loose = append(s.loose, h)
		if typ != plumbing.CommitObject && typ != plumbing.TagObject {
			return nil
		}
		o, err := st.EncodedObject(typ, h)
		if err != nil {
			return err
		}
		return fn(o)
	})
	if err != nil {
		return err
	}
	packs, err := dg.ObjectPacks()
	if err != nil {
		return err
	}
	for _, p := range packs {
		if err := s.packIDs(dg, p); err != nil {
			return err
		}
		for _, typ := range []plumbing.ObjectType{plumbing.CommitObject, plumbing.TagObject} {
			if err := packObjects(fsys, dg, p, typ, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// allRoots is roots for a store with alternates: st's iteration of every
// object, each recorded as packed (loose or not, it cannot be left out alone).
func (s *gitScan) allRoots(st *looseFirst, fn func(o plumbing.EncodedObject) error) error {
	all, err := st.IterEncodedObjects(plumbing.AnyObject)
	if err != nil {
		return err
	}
	return all.ForEach(func(o plumbing.EncodedObject) error {
		s.packed = append(s.packed, o.Hash()) // loose or not, it cannot be left out alone
		if o.Type() != plumbing.CommitObject && o.Type() != plumbing.TagObject {
			return nil
		}
		return fn(o)
	})
}

// packObjects calls fn with every object of type typ in pack p, by the
// pack's own iteration by type.
func packObjects(fsys billy.Filesystem, dg *dotgit.DotGit, p plumbing.Hash, typ plumbing.ObjectType, fn func(o plumbing.EncodedObject) error) error {
	pf, err := dg.ObjectPack(p)
	if err != nil {
		return err
	}
	idx, err := dg.ObjectPackIdx(p)
	if err != nil {
		pf.Close()
		return err
	}
	it, err := filesystem.NewPackfileIter(fsys, pf, idx, typ, false, 0)
	if err != nil {
		pf.Close()
		return err
	}
	return it.ForEach(fn)
}

// packIDs appends the ids of pack p's objects (from its index) to s.packed.
func (s *gitScan) packIDs(dg *dotgit.DotGit, p plumbing.Hash) error {
	f, err := dg.ObjectPackIdx(p)
	if err != nil {
		return err
	}
	defer f.Close()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(f).Decode(idx); err != nil {
		return err
	}
	it, err := idx.Entries()
	if err != nil {
		return err
	}
	defer it.Close()
	for {
		e, err := it.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		s.packed = append(s.packed, e.Hash)
	}
}

// looseObjects calls fn with the id and type of every loose object of the git
// directory gitdir (objects/XX/YYYY...), in id order, each typed by its
// header alone: only the first block of the object is read and inflated. The
// directories and files are opened relative to their parent's handle without
// following symlinks (a symlink where an object should be is an error, as an
// unreadable object is); names that are not object ids are ignored, as git
// does. The ids are listed, when not nil, sorted (those a fingerprint's walk
// saw: objects/ is then not listed again, and one removed since, packed by a
// git gc, is skipped); else read from the directories.
func looseObjects(ctx context.Context, gitdir string, listed []string, fn func(h plumbing.Hash, typ plumbing.ObjectType) error) error {
	ofd, err := unix.Open(filepath.Join(gitdir, "objects"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return &os.PathError{Op: "open", Path: "objects", Err: err}
	}
	od := os.NewFile(uintptr(ofd), "objects")
	defer od.Close()
	ids := listed
	if ids == nil {
		if ids, err = readLooseIDs(od, ofd); err != nil {
			return err
		}
	}
	var lr looseReader
	dirs := &fanDirs{ofd: ofd, fd: -1}
	defer dirs.close()
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		typ, err := dirs.typeAt(&lr, id)
		if listed != nil && errors.Is(err, unix.ENOENT) {
			continue // gone since the walk
		}
		if err != nil {
			return err
		}
		if err := fn(plumbing.NewHash(id), typ); err != nil {
			return err
		}
	}
	return nil
}

// fanDirs keeps one directory of objects/ (handle ofd) open at a time.
type fanDirs struct {
	ofd, fd int
	fan     string
	err     error
}

// typeAt returns the type of loose object id, from its header.
func (d *fanDirs) typeAt(lr *looseReader, id string) (plumbing.ObjectType, error) {
	if fan := id[:2]; fan != d.fan {
		d.close()
		d.fan = fan
		d.fd, d.err = unix.Openat(d.ofd, fan, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if d.err != nil {
			d.fd, d.err = -1, &os.PathError{Op: "open", Path: "objects/" + fan, Err: d.err}
		}
	}
	if d.err != nil {
		return plumbing.InvalidObject, d.err
	}
	typ, err := lr.typeAt(d.fd, id)
	if err != nil {
		return plumbing.InvalidObject, &os.PathError{Op: "read", Path: "objects/" + id[:2] + "/" + id[2:], Err: err}
	}
	return typ, nil
}

func (d *fanDirs) close() {
	if d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
}

// readLooseIDs lists the loose object ids beneath the objects directory od
// (handle ofd), sorted.
func readLooseIDs(od *os.File, ofd int) ([]string, error) {
	fans, err := od.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	ids := []string{}
	for _, fan := range fans {
		if len(fan) != 2 || !isHex(fan) {
			continue
		}
		dfd, err := unix.Openat(ofd, fan, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: "objects/" + fan, Err: err}
		}
		df := os.NewFile(uintptr(dfd), fan)
		names, err := df.Readdirnames(-1)
		df.Close()
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if len(n) == 38 && isHex(n) {
				ids = append(ids, fan+n)
			}
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// listedLoose returns the loose object ids of the store at rel (relative to
// the top git directory, "" for it) among the entries a fingerprint walked
// (see gitFingerprint), sorted; nil when there was no such walk.
func listedLoose(walked map[string]bool, rel string) []string {
	if walked == nil {
		return nil
	}
	prefix := join(rel, "objects") + "/"
	ids := []string{}
	for e := range walked {
		rest, ok := strings.CutPrefix(e, prefix)
		if ok && len(rest) == 41 && rest[2] == '/' && isHex(rest[:2]) && isHex(rest[3:]) {
			ids = append(ids, rest[:2]+rest[3:])
		}
	}
	sort.Strings(ids)
	return ids
}

// looseFirst is the store of a git directory that reads a loose object
// itself (one open beneath objects/, no symlink followed, and one inflate)
// before asking go-git's storage, which lists every loose object first to
// answer whether it has one.
type looseFirst struct {
	*filesystem.Storage
	objects int // handle of gitdir/objects, -1 when it cannot be opened
	lr      looseReader
}

func newLooseFirst(st *filesystem.Storage, gitdir string) *looseFirst {
	fd, err := unix.Open(filepath.Join(gitdir, "objects"), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		fd = -1
	}
	return &looseFirst{Storage: st, objects: fd}
}

func (l *looseFirst) close() {
	if l.objects >= 0 {
		unix.Close(l.objects)
		l.objects = -1
	}
}

// EncodedObject returns object h: the loose object when there is one, else
// what go-git's storage finds (packs, alternates). A loose object of
// another type than typ (unless AnyObject) is plumbing.ErrObjectNotFound, as
// go-git answers.
func (l *looseFirst) EncodedObject(typ plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	if l.objects >= 0 {
		o, err := l.loose(h, typ)
		switch {
		case err == nil:
			return o, nil
		case !errors.Is(err, unix.ENOENT):
			return nil, err
		}
	}
	return l.Storage.EncodedObject(typ, h)
}

// maxLooseObject bounds the loose object the scan inflates: the object store is
// the project's, an outside input, and a few kilobytes of zlib can declare and
// inflate to gigabytes. A larger object fails the scan (the .git is then kept
// out, as for any history that cannot be read).
const maxLooseObject = 64 << 20

// loose reads the loose object h whole when it is of type want (or want is
// AnyObject); another type answers ErrObjectNotFound without its body read.
func (l *looseFirst) loose(h plumbing.Hash, want plumbing.ObjectType) (plumbing.EncodedObject, error) {
	id := h.String()
	fd, err := hostfs.OpenBeneath(l.objects, id[:2]+"/"+id[2:], unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), id)
	defer f.Close()
	typ, size, err := l.lr.header(f, id)
	if err != nil {
		return nil, err
	}
	if want != plumbing.AnyObject && typ != want {
		return nil, plumbing.ErrObjectNotFound // its body is not read
	}
	if size > maxLooseObject {
		return nil, errors.New("loose object " + id + ": larger than the scan reads")
	}
	// One byte more than declared: the read then meets the end of the stream,
	// where zlib checks its checksum.
	data := make([]byte, size+1)
	n, err := io.ReadFull(l.lr.zr, data)
	switch {
	case int64(n) == size && (err == io.EOF || err == io.ErrUnexpectedEOF):
		data = data[:n]
	case err == nil || err == io.EOF || err == io.ErrUnexpectedEOF:
		return nil, errors.New("loose object " + id + ": size does not match its header")
	default:
		return nil, err
	}
	o := &plumbing.MemoryObject{}
	o.SetType(typ)
	o.SetSize(size)
	if _, err := o.Write(data); err != nil {
		return nil, err
	}
	return o, nil
}

// looseReader inflates loose objects one after another, reusing its buffer
// and inflater. header is the one parser of a loose object's header, for the
// listing (typeAt) and for the reads (looseFirst.loose) alike.
type looseReader struct {
	br *bufio.Reader
	zr io.ReadCloser
}

// header starts inflating the loose object in f (id names it in errors) and
// reads its "TYPE SIZE\x00" header; zr then reads its body.
func (r *looseReader) header(f *os.File, id string) (plumbing.ObjectType, int64, error) {
	if r.br == nil {
		r.br = bufio.NewReaderSize(f, 4096)
	} else {
		r.br.Reset(f)
	}
	if r.zr == nil {
		zr, err := zlib.NewReader(r.br)
		if err != nil {
			return plumbing.InvalidObject, 0, err
		}
		r.zr = zr
	} else if err := r.zr.(zlib.Resetter).Reset(r.br, nil); err != nil {
		return plumbing.InvalidObject, 0, err
	}
	return looseHeader(r.zr, id)
}

// typeAt returns the type in the header of the loose object id, the file
// id[2:] of the directory dfd (objects/id[:2]), no link followed; only the
// header is inflated.
func (r *looseReader) typeAt(dfd int, id string) (plumbing.ObjectType, error) {
	fd, err := unix.Openat(dfd, id[2:], unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return plumbing.InvalidObject, err
	}
	f := os.NewFile(uintptr(fd), id)
	defer f.Close()
	typ, _, err := r.header(f, id)
	return typ, err
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func (s *gitScan) tree(st *looseFirst, h plumbing.Hash, prefix string) error {
	key := prefix + "\x00" + h.String()
	if _, ok := s.seen[key]; ok {
		return nil
	}
	s.seen[key] = struct{}{}
	if err := s.ctx.Err(); err != nil {
		return err
	}
	s.budget--
	if s.budget < 0 {
		return errGitBudget
	}
	s.named[h] = struct{}{}
	t, ok := s.trees[h]
	if !ok {
		var err error
		if t, err = object.GetTree(st, h); err != nil {
			return err
		}
		if len(s.trees) < 4096 {
			s.trees[h] = t
		}
	}
	for _, e := range t.Entries {
		s.named[e.Hash] = struct{}{}
		p := join(prefix, e.Name)
		s.paths[p] = struct{}{}
		if e.Mode == filemode.Dir {
			if err := s.tree(st, e.Hash, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// worktrees records the paths of the indexes of the git directory's
// linked worktrees (worktrees/*/index): they name what was added there, and
// the blobs they name are in this object store.
func (s *gitScan) worktrees(gitdir, prefix string) error {
	idxs, err := filepath.Glob(filepath.Join(gitdir, "worktrees", "*", "index"))
	if err != nil {
		return err
	}
	for _, p := range idxs {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return &os.PathError{Op: "open", Path: "worktrees/" + filepath.Base(filepath.Dir(p)) + "/index", Err: err}
		}
		f := os.NewFile(uintptr(fd), p)
		var idx index.Index
		err = index.NewDecoder(bufio.NewReader(f)).Decode(&idx)
		f.Close()
		if err != nil {
			return err
		}
		for _, e := range idx.Entries {
			s.named[e.Hash] = struct{}{}
			s.paths[join(prefix, e.Name)] = struct{}{}
		}
	}
	return nil
}

// modules scans the git directories under dir (a .git/modules directory):
// rel is the module name so far.
func (s *gitScan) modules(dir, rel, prefix string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	isGit := false
	for _, e := range ents {
		if e.Name() == "objects" && e.IsDir() {
			isGit = true
		}
	}
	if isGit && rel != "" {
		return s.scan(dir, join(prefix, rel))
	}
	for _, e := range ents {
		if e.IsDir() && e.Type()&os.ModeSymlink == 0 {
			if err := s.modules(filepath.Join(dir, e.Name()), join(rel, e.Name()), prefix); err != nil {
				return err
			}
		}
	}
	return nil
}

// join appends name to prefix without cleaning: a name git should never hold
// ("..", one with a slash) yields a path the Dir refuses, which counts as hidden.
func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "/" + name
}

// looseHeader reads a loose object's "TYPE SIZE\x00" header from r.
func looseHeader(r io.Reader, id string) (plumbing.ObjectType, int64, error) {
	var hdr [32]byte
	for i := range hdr {
		if _, err := io.ReadFull(r, hdr[i:i+1]); err != nil {
			return 0, 0, errors.New("loose object " + id + ": no header")
		}
		if hdr[i] != 0 {
			continue
		}
		typStr, sizeStr, ok := bytes.Cut(hdr[:i], []byte{' '})
		if !ok {
			break
		}
		typ, err := plumbing.ParseObjectType(string(typStr))
		if err != nil {
			return 0, 0, err
		}
		size, err := strconv.ParseInt(string(sizeStr), 10, 64)
		if err != nil || size < 0 {
			break
		}
		return typ, size, nil
	}
	return 0, 0, errors.New("loose object " + id + ": no header")
}
