package vfs

import (
	"context"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A Namespace is a host-only mount table that composes Backends into one tree.
// It is itself a [Backend], so namespaces nest. The zero Namespace is an empty
// namespace. [NewNamespace] also fixes the time its synthetic directories report.
//
// # Lookup
//
// A path is matched lexically, component by component, against the mount points.
// The longest match wins ("ab/x" never matches a mount at "a"). That mount's
// backend resolves the rest of the path. So a symlink inside a mount resolves
// beneath that mount's root. It can reach neither another mount nor a directory
// of the namespace above, and ".." at a backend's root is path_outside_sandbox.
// A link in a parent mount whose target lexically names a path under a child
// mount reaches the parent backend's own (shadowed) entry, not the child mount.
//
// # Namespace directories
//
// Every mount point, and every directory above a mount point, is a directory of the
// namespace, whatever the backend underneath holds at that name:
//
//   - A mount point is its backend's root (Stat reports the root with the mount's
//     base name). It shadows whatever lies at that path in the parent mount.
//   - A directory above a mount point that lies inside another mount is that
//     mount's directory (symlinks followed) when the mount has one there.
//     Otherwise (missing, a file, an escaping link) it is synthetic, as below.
//   - A directory above a mount point that no mount covers is synthetic. It reads
//     as a directory with mode fs.ModeDir|0555 and the namespace's creation time.
//     It lists only its children that lead to mount points. An empty namespace has
//     a synthetic, empty root. Paths under a synthetic directory that lead to no
//     mount do not exist.
//
// A listing of a namespace directory merges the backend's entries (if any) with
// the names of its mount-point and synthetic children. These shadow same-named
// backend entries. The result is sorted and has no duplicates.
//
// Mount points and namespace directories are fixed by the host. These fail with
// read_only: removing or renaming one, renaming onto one, and creating, removing
// or renaming anything inside a synthetic directory. Chmod and Chtimes on a
// synthetic directory fail with read_only too; on a mount point they reach the
// backend's root. Creating an entry (Mkdir, Symlink, Link, OpenFile with
// O_CREATE|O_EXCL) where a namespace directory already stands fails with
// already_exists, as creating any existing name does. So a MkdirAll through the
// namespace works.
//
// Rename and Link whose two paths resolve to different mounts fail with cross_mount
// (matching EXDEV) before either backend is touched.
//
// Sub inside a single mount returns that mount's own pinned Sub. At or above a
// mount point it returns a new Namespace holding a snapshot of the mount table as
// of the Sub call (see [Namespace.Sub]).
//
// # Errors
//
// Errors from a backend are re-addressed to the namespace's view. Their Path (and
// Dest) is the full path the namespace was called with, never the backend's.
// Files opened under a mount below the root are wrapped so their errors are
// re-addressed too.
//
// # Concurrency
//
// A Namespace is safe for concurrent use. The mount table is immutable and swapped
// atomically. Lookups take no lock and allocate nothing. An operation uses the
// table as it was when the operation began. Files opened before an Unmount keep
// working on the backend they were opened on.
//
// A Namespace must not contain itself. [Namespace.Mount] refuses, with
// invalid_path, a backend that reaches the namespace through namespaces and
// [ReadOnly] wrappers. A cycle hidden behind another wrapper type cannot be
// detected; with mounts at the root it would recurse without bound. Hosts must
// not build one.
type Namespace struct {
	created time.Time
	tab     atomic.Pointer[table]
}

// MountOptions are per-mount settings given to [Namespace.Mount].
type MountOptions struct {
	// ReadOnly mounts the backend through [ReadOnly]. Every mutation under the
	// mount fails with read_only.
	ReadOnly bool
}

// MountInfo describes one mount, as [Namespace.Mounts] reports it.
type MountInfo struct {
	Path     Path         // the mount point, relative to the namespace root
	Options  MountOptions // the options given to Mount
	Features Features     // the mounted backend's features (ReadOnly set for a read-only mount)
}

// mountMu serializes every Mount and Unmount of every Namespace, so that checking a
// new mount for a cycle and installing it are one step: two namespaces mounted into
// each other concurrently cannot both pass the check.
var mountMu sync.Mutex

// NewNamespace returns an empty namespace: a synthetic, empty, read-only root. Its
// synthetic directories report the time of this call as their ModTime.
func NewNamespace() *Namespace {
	n := &Namespace{created: time.Now()}
	n.tab.Store(emptyTable)
	return n
}

func (n *Namespace) table() *table {
	if t := n.tab.Load(); t != nil {
		return t
	}
	return emptyTable
}

// Mount attaches b at path at. A mount at the root is the base backend.
// Mounting where a mount already stands fails with already_exists. A nil
// backend, or one that would make the namespace contain itself, fails with
// invalid_path. With opts.ReadOnly the backend is mounted through [ReadOnly].
// The mount shadows whatever lies at at in a parent mount. The directories
// above at become namespace directories.
func (n *Namespace) Mount(at Path, b Backend, opts MountOptions) error {
	at = at.WithoutDirMark()
	if b == nil {
		return NewError(CodeInvalidPath, "mount", at, "nil backend")
	}
	mountMu.Lock()
	defer mountMu.Unlock()
	if reaches(b, n) {
		return NewError(CodeInvalidPath, "mount", at, "the namespace would contain itself")
	}
	t := n.table()
	if nd := t.nodes[at.p]; nd != nil && nd.mount != nil {
		return NewError(CodeExists, "mount", at, "already a mount point")
	}
	if opts.ReadOnly {
		b = ReadOnly(b)
	}
	ms := append(slices.Clone(t.sorted), &mount{path: at, b: b, opts: opts})
	n.tab.Store(newTable(ms))
	return nil
}

// Unmount removes the mount at path at; not_found if nothing is mounted there. Files
// already open under it keep working.
func (n *Namespace) Unmount(at Path) error {
	at = at.WithoutDirMark()
	mountMu.Lock()
	defer mountMu.Unlock()
	t := n.table()
	nd := t.nodes[at.p]
	if nd == nil || nd.mount == nil {
		return NewError(CodeNotFound, "unmount", at, "not a mount point")
	}
	ms := slices.DeleteFunc(slices.Clone(t.sorted), func(m *mount) bool { return m == nd.mount })
	n.tab.Store(newTable(ms))
	return nil
}

// Mounts lists the mounts, sorted by path component by component.
func (n *Namespace) Mounts() []MountInfo {
	t := n.table()
	out := make([]MountInfo, len(t.sorted))
	for i, m := range t.sorted {
		out[i] = MountInfo{Path: m.path, Options: m.opts, Features: m.b.Features()}
	}
	return out
}

// reaches reports whether b is target or contains it through namespaces and
// ReadOnly wrappers. Namespaces form a DAG (every Mount checks), so it terminates.
func reaches(b Backend, target *Namespace) bool {
	switch x := b.(type) {
	case wrapper:
		return reaches(x.wrapped(), target)
	case *Namespace:
		if x == target {
			return true
		}
		for _, m := range x.table().sorted {
			if reaches(m.b, target) {
				return true
			}
		}
	}
	return false
}

// Features reports what the namespace as a whole supports.
// ReadOnly is set only if every mount is read-only (an empty namespace is
// read-only). Persistent is set only if every mount is persistent. Symlinks,
// HardLinks, Chmod, Chtimes and CaseInsensitive are set if any mount has them.
// A feature reported here may still be refused under some mounts. HardLinks
// never works across mounts.
func (n *Namespace) Features() Features {
	t := n.table()
	f := Features{ReadOnly: true, Persistent: len(t.sorted) > 0}
	for _, m := range t.sorted {
		mf := m.b.Features()
		f.ReadOnly = f.ReadOnly && mf.ReadOnly
		f.Persistent = f.Persistent && mf.Persistent
		f.Symlinks = f.Symlinks || mf.Symlinks
		f.HardLinks = f.HardLinks || mf.HardLinks
		f.Chmod = f.Chmod || mf.Chmod
		f.Chtimes = f.Chtimes || mf.Chtimes
		f.CaseInsensitive = f.CaseInsensitive || mf.CaseInsensitive
		f.LinkWritesPrivate = f.LinkWritesPrivate || mf.LinkWritesPrivate
	}
	return f
}

func errReadOnly(op string, p Path) error {
	return NewError(CodeReadOnly, op, p, "mount points and synthetic directories are fixed by the host")
}

func errReadOnly2(op string, from, to Path) error {
	return &Error{Code: CodeReadOnly, Op: op, Path: from.String(), Dest: to.String(),
		msg: "mount points and synthetic directories are fixed by the host"}
}

func errExists(op string, p Path) error {
	return NewError(CodeExists, op, p, "a namespace directory")
}

// noDirCode reports whether err says a backend has no usable directory at a path, so
// a namespace directory there is synthetic.
func noDirCode(err error) bool {
	switch CodeOf(err) {
	case CodeNotFound, CodeNotDir, CodeOutside, CodeTooManyLinks:
		return true
	}
	return false
}

// coveredDir reports whether the mount covering a namespace directory (kindCovered)
// has a directory there, with its Info named after p.
func (n *Namespace) coveredDir(ctx context.Context, op string, p Path, l *loc) (Info, bool, error) {
	info, err := l.m.b.Stat(ctx, l.rel.WithoutDirMark())
	if err != nil {
		if noDirCode(err) {
			return Info{}, false, nil
		}
		return Info{}, false, ReaddressTo(err, op, p)
	}
	if !info.Mode.IsDir() {
		return Info{}, false, nil
	}
	info.Name = p.Base()
	return info, true, nil
}

// synthInfo is the Info of a synthetic directory.
func (n *Namespace) synthInfo(p Path) Info {
	name := p.Base()
	if name == "" {
		name = "."
	}
	return Info{Name: name, Mode: fs.ModeDir | 0o555, ModTime: n.created}
}

// inSynthetic reports whether a backend's err for a mutation at p (inside a mount)
// comes from p's parent being a namespace directory that the covering mount has no
// directory for: a synthetic directory, in which mutations are read_only.
func (n *Namespace) inSynthetic(ctx context.Context, t *table, p Path, err error) bool {
	if !noDirCode(err) || p.IsRoot() {
		return false
	}
	pl := t.locate(p.Dir())
	if pl.kind != kindCovered {
		return false
	}
	_, ok, serr := n.coveredDir(ctx, "", p.Dir(), &pl)
	return serr == nil && !ok
}

// mutateErr re-addresses the error of a mutation at p inside a mount, or reports
// read_only if p lies in a synthetic directory.
func (n *Namespace) mutateErr(ctx context.Context, t *table, op string, p Path, err error) error {
	if n.inSynthetic(ctx, t, p, err) {
		return errReadOnly(op, p)
	}
	return ReaddressTo(err, op, p)
}

// Stat returns information on p, following a final symlink.
func (n *Namespace) Stat(ctx context.Context, p Path) (Info, error) {
	return n.stat(ctx, "stat", p, true)
}

// Lstat returns information on p without following a final symlink. A namespace
// directory is always reported as a directory.
func (n *Namespace) Lstat(ctx context.Context, p Path) (Info, error) {
	return n.stat(ctx, "lstat", p, false)
}

func (n *Namespace) stat(ctx context.Context, op string, p Path, follow bool) (Info, error) {
	t := n.table()
	q, err := n.route(ctx, t, p, follow || p.mustDir, op)
	if err != nil {
		return Info{}, ReaddressTo(err, op, p)
	}
	l := t.locate(q)
	switch l.kind {
	case kindInMount, kindMountPoint:
		var info Info
		var err error
		if follow {
			info, err = l.m.b.Stat(ctx, l.rel)
		} else {
			info, err = l.m.b.Lstat(ctx, l.rel)
		}
		if err != nil {
			if r, ok := n.reroute(ctx, t, q, follow || p.mustDir, op, err); ok {
				info, err = n.stat(ctx, op, r, follow)
				if err != nil {
					return Info{}, ReaddressTo(err, op, p)
				}
				if !p.IsRoot() {
					info.Name = p.Base()
				}
				return info, nil
			}
			return Info{}, ReaddressTo(err, op, p)
		}
		if (l.kind == kindMountPoint || q.resolved) && !p.IsRoot() {
			info.Name = p.Base()
		}
		return info, nil
	case kindCovered:
		info, ok, err := n.coveredDir(ctx, op, p, &l)
		if err != nil || ok {
			return info, err
		}
		return n.synthInfo(p), nil
	case kindSynthetic:
		return n.synthInfo(p), nil
	}
	return Info{}, NewError(CodeNotFound, op, p, "")
}

// ReadDir lists directory p, sorted by name. A namespace directory's listing merges
// the backend's entries with its mount-point and synthetic children.
func (n *Namespace) ReadDir(ctx context.Context, p Path) ([]DirEntry, error) {
	t := n.table()
	q, err := n.route(ctx, t, p, true, "readdir")
	if err != nil {
		return nil, ReaddressTo(err, "readdir", p)
	}
	l := t.locate(q)
	switch l.kind {
	case kindInMount:
		ents, err := l.m.b.ReadDir(ctx, l.rel)
		if err != nil {
			if r, ok := n.reroute(ctx, t, q, true, "readdir", err); ok {
				ents, err = n.ReadDir(ctx, r)
			}
			if err != nil {
				return nil, ReaddressTo(err, "readdir", p)
			}
		}
		return ents, nil
	case kindMountPoint, kindCovered:
		ents, err := l.m.b.ReadDir(ctx, l.rel.WithoutDirMark())
		if err != nil {
			if l.kind == kindMountPoint || !noDirCode(err) {
				return nil, ReaddressTo(err, "readdir", p)
			}
			ents = nil
		}
		return mergeEntries(ents, l.nd.kids), nil
	case kindSynthetic:
		return slices.Clone(l.nd.kids), nil
	}
	return nil, NewError(CodeNotFound, "readdir", p, "")
}

// mergeEntries merges two sorted listings; an entry of kids replaces a same-named
// entry of ents.
func mergeEntries(ents, kids []DirEntry) []DirEntry {
	if len(kids) == 0 {
		return ents
	}
	out := make([]DirEntry, 0, len(ents)+len(kids))
	i, j := 0, 0
	for i < len(ents) && j < len(kids) {
		switch c := strings.Compare(ents[i].Name, kids[j].Name); {
		case c < 0:
			out = append(out, ents[i])
			i++
		case c > 0:
			out = append(out, kids[j])
			j++
		default:
			out = append(out, kids[j])
			i++
			j++
		}
	}
	out = append(out, ents[i:]...)
	return append(out, kids[j:]...)
}

// OpenFile opens p. A namespace directory opens read-only as a directory; opening a
// synthetic one with a write flag fails with read_only (already_exists with
// O_CREATE|O_EXCL).
func (n *Namespace) OpenFile(ctx context.Context, p Path, flag int, perm fs.FileMode) (File, error) {
	t := n.table()
	// O_CREATE|O_EXCL does not follow a final link (already_exists, as on POSIX).
	q, err := n.route(ctx, t, p, flag&(os.O_CREATE|os.O_EXCL) != os.O_CREATE|os.O_EXCL, "open")
	if err != nil {
		if flag&os.O_CREATE != 0 {
			return nil, n.mutateErr(ctx, t, "open", p, err)
		}
		return nil, ReaddressTo(err, "open", p)
	}
	l := t.locate(q)
	switch l.kind {
	case kindInMount, kindMountPoint:
		f, err := l.m.b.OpenFile(ctx, l.rel, flag, perm)
		if r, ok := n.reroute(ctx, t, q, flag&(os.O_CREATE|os.O_EXCL) != os.O_CREATE|os.O_EXCL, "open", err); ok {
			f, err = n.OpenFile(ctx, r, flag, perm)
			if err != nil {
				return nil, ReaddressTo(err, "open", p)
			}
			return addressFile(f, p, r), nil
		}
		if err != nil {
			if flag&os.O_CREATE != 0 && l.kind == kindInMount {
				return nil, n.mutateErr(ctx, t, "open", p, err)
			}
			return nil, ReaddressTo(err, "open", p)
		}
		return wrapFile(f, p, &l), nil
	case kindCovered:
		_, ok, err := n.coveredDir(ctx, "open", p, &l)
		if err != nil {
			return nil, err
		}
		if ok {
			f, err := l.m.b.OpenFile(ctx, l.rel, flag, perm)
			if err != nil {
				return nil, ReaddressTo(err, "open", p)
			}
			return wrapFile(f, p, &l), nil
		}
		return n.openSynthetic(p, flag)
	case kindSynthetic:
		return n.openSynthetic(p, flag)
	}
	if flag&os.O_CREATE != 0 {
		return nil, errReadOnly("open", p)
	}
	return nil, NewError(CodeNotFound, "open", p, "")
}

func (n *Namespace) openSynthetic(p Path, flag int) (File, error) {
	if flag&writeFlags != 0 {
		if flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL {
			return nil, errExists("open", p)
		}
		return nil, errReadOnly("open", p)
	}
	return &synthFile{info: n.synthInfo(p), path: p}, nil
}

// Sub returns a Backend rooted at directory p.
// If p lies inside a mount with no mount below p, that is the mount's own Sub,
// read-only for a read-only mount. It is pinned as the backend pins it.
// Otherwise it is a new Namespace holding a snapshot of the mount table re-based
// at p. The snapshot holds the mounts below p, and the covering mount's Sub at
// the new root if that mount has a directory at p. Mounts and unmounts made
// later in n are not seen by the result, nor the result's in n.
func (n *Namespace) Sub(ctx context.Context, p Path) (Backend, error) {
	p = p.WithoutDirMark()
	t := n.table()
	q, err := n.route(ctx, t, p, true, "sub")
	if err != nil {
		return nil, ReaddressTo(err, "sub", p)
	}
	p = q.WithoutDirMark().Unresolved()
	l := t.locate(q)
	switch l.kind {
	case kindNone:
		return nil, NewError(CodeNotFound, "sub", p, "")
	case kindInMount:
		return n.subInMount(ctx, t, q, p, l)
	}
	var ms []*mount
	if l.kind == kindMountPoint || l.kind == kindCovered {
		b, err := l.m.b.Sub(ctx, l.rel)
		switch {
		case err == nil:
			if l.kind == kindMountPoint && len(l.nd.kids) == 0 {
				return located(b, l.m.path), nil
			}
			ms = append(ms, &mount{path: Root, b: b, opts: l.m.opts})
		case l.kind == kindCovered && noDirCode(err):
			// No directory there in the covering mount: the new root is synthetic.
		default:
			return nil, ReaddressTo(err, "sub", p)
		}
	}
	for _, m := range t.sorted {
		if rel, ok := m.path.TrimPrefix(p); ok && !rel.IsRoot() {
			ms = append(ms, &mount{path: rel, b: m.b, opts: m.opts})
		}
	}
	sub := &Namespace{created: n.created}
	sub.tab.Store(newTable(ms))
	return sub, nil
}

// subInMount is Sub of q (p as the caller named it) inside one mount with no
// mount below it: the mount's own Sub, rerouted where the mount answers that
// the path leads elsewhere in the namespace.
func (n *Namespace) subInMount(ctx context.Context, t *table, q, p Path, l loc) (Backend, error) {
	b, err := l.m.b.Sub(ctx, l.rel)
	if err == nil {
		return located(b, l.m.path), nil
	}
	if r, ok := n.reroute(ctx, t, q, true, "sub", err); ok {
		b, err = n.Sub(ctx, r)
	}
	if err != nil {
		return nil, ReaddressTo(err, "sub", p)
	}
	return b, nil
}

// located is b, a mount's Sub, as a Locator names it from the namespace:
// wrapped with the mount's path where b is one.
func located(b Backend, at Path) Backend {
	if _, ok := b.(Locator); ok {
		return &locatedBackend{Backend: b, at: at}
	}
	return b
}
