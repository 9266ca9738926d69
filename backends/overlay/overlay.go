package overlay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/internal/hostfd"
	"github.com/capfs/capfs/vfs"
)

// Overlay is a copy-on-write [vfs.Backend] for lazy sandboxes. It shows a lower
// tree (a Dir's Backend view, which it never changes) with the changes a
// process makes kept in a private upper directory on the host.
//
// Nothing is read or copied ahead. Opening a lower file for reading reads it
// through the Dir. The first change to a lower file copies it up, whole, once.
// It also records what the lower file was when the process first saw it (its
// [Base], see [Overlay.Bases]). So a later sync-back can tell a change made in
// the sandbox from one made to the source meanwhile, before or after the
// change. Removing a lower entry leaves a whiteout. A directory made where a
// removed one stood is opaque: the lower's entries beneath it stay hidden.
//
// Mounting an Overlay (dir.New(overlay), then Mount) costs the same whatever the
// lower tree's size.
//
// The Overlay follows no symlink inside a path. It is meant to be served through
// Mount, where the kernel resolves links itself and every path the server
// derives names real directories. A final symlink is followed by Stat and
// OpenFile, within the overlay, at most [vfs.MaxSymlinks]. Renaming (or
// exchanging) a lower directory copies its whole subtree up first. The upper
// directory is written through the physical backend. So a write to a file with
// several hard links gives that name a private copy
// ([physical.HardLinksReplace]). It keeps no ownership, as a checkout made by
// the running user keeps none. Its entries report no owner (a mount shows them
// as the mount's own), and it is no [vfs.Chowner]. An Overlay is safe for
// concurrent use.
type Overlay struct {
	lower vfs.Backend
	upper *physical.FS
	dir   string

	mu       sync.Mutex // orders structural changes (copy-up, whiteouts, renames)
	whiteout map[string]bool
	opaque   map[string]bool
	base     map[string]Base
	// unread holds, by path, the sight of each removed lower entry whose
	// Base still lacks its contents (a file's digest, a symlink's target):
	// read when the Bases are asked for (see deferBase).
	unread map[string]unreadBase
	// seen holds a *sight for each lower path the process looked up, by
	// path: what the lower held there then, or that it held nothing (see
	// sight.go). Written once per path, read at each lookup and change:
	// a sync.Map, read without a lock.
	seen sync.Map
	// The root is the upper directory itself, which stays private (mode
	// 0700): it shows the lower root's permission bits (rootPerm, which a
	// Chmod of the root changes) and starts with its modification time
	// (rootTime), so a process sees its working directory as in a checkout.
	rootPerm atomic.Uint32 // fs.FileMode permission bits
	// lastLower is the last path resolveLower found in the lower only, with
	// its status: the change a Dir call decides on it then (a removal) takes
	// it from there instead of looking it up again (see lowerHit).
	lastLower atomic.Pointer[lowerHit]
	rootTime  time.Time
}

// Base is what a lower entry was when the process first saw it: looked it up,
// listed or opened it. It is recorded when the overlay first changes the entry.
type Base struct {
	Type    fs.FileMode // type bits
	Mode    fs.FileMode // permission bits
	Size    int64
	ModTime time.Time
	// Digest is the hex SHA-256 of a regular file's contents; empty when
	// they are unknown (the file changed in the lower between the process's
	// first sight and the change, and was not hashed at sight; or, for a
	// removed file, before the Bases were asked for: see deferBase): it
	// matches no file, so a sync-back finds the source changed.
	Digest string
	// Target is a symlink's target; empty when unknown (as Digest).
	Target string
}

// Change is one path the overlay changed, as Changes lists it.
type Change struct {
	Path string
	// Kind: "added" (no lower entry), "modified" (upper replaces a lower entry),
	// "deleted" (a lower entry removed).
	Kind string
	// Base is the lower entry as it was before the first change (nil for added).
	Base *Base
	// Type is the new entry's type bits (added, modified).
	Type fs.FileMode
}

// NewOverlay returns an [Overlay] of lower with its changes in upperDir.
// upperDir is an existing empty directory private to the caller (mode 0700).
// Close releases it. The directory and its contents stay for the caller to sync
// back.
//
// The root shows the lower root's permission bits, although the upper directory
// keeps its own private mode. Until an entry is created or removed in it, the
// root shows the lower root's modification time ([Overlay.RootTime]).
func NewOverlay(lower vfs.Backend, upperDir string) (*Overlay, error) {
	up, err := physical.New(upperDir)
	if err != nil {
		return nil, err
	}
	o := &Overlay{lower: lower, upper: up, dir: upperDir,
		whiteout: map[string]bool{}, opaque: map[string]bool{}, base: map[string]Base{}, unread: map[string]unreadBase{}}
	o.rootPerm.Store(0o755)
	ctx := context.Background()
	if info, err := lower.Lstat(ctx, vfs.Root); err == nil && info.Mode.IsDir() {
		o.rootPerm.Store(uint32(info.Mode.Perm()))
		o.rootTime = info.ModTime
		_ = up.Chtimes(ctx, vfs.Root, time.Time{}, info.ModTime)
	}
	return o, nil
}

// RootTime returns the lower root's modification time when the overlay was made,
// or zero if it could not be read. It is the root's time in the upper directory
// until the process creates or removes an entry in it.
func (o *Overlay) RootTime() time.Time { return o.rootTime }

// UpperDir returns the host directory holding the changes.
func (o *Overlay) UpperDir() string { return o.dir }

// Close releases the upper directory's handle.
func (o *Overlay) Close() error { return o.upper.Close() }

// hidden reports whether the lower entry at p is hidden: p or an ancestor is
// whited out, or an ancestor is opaque. Callers hold o.mu or accept a racy
// answer for a read.
func (o *Overlay) hidden(p vfs.Path) bool {
	s := p.Raw()
	if o.whiteout[s] {
		return true
	}
	for i := len(s) - 1; i > 0; i-- {
		if s[i] == '/' {
			if o.whiteout[s[:i]] || o.opaque[s[:i]] {
				return true
			}
		}
	}
	return false
}

func (o *Overlay) isHidden(p vfs.Path) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hidden(p)
}

func notFound(op string, p vfs.Path) error { return vfs.NewError(vfs.CodeNotFound, op, p, "") }

// Features reports symlinks, hard links, chmod and chtimes.
func (o *Overlay) Features() vfs.Features {
	return vfs.Features{Symlinks: true, HardLinks: true, Chmod: true, Chtimes: true}
}

// layer says where p is served from: the upper (true) or the lower (false),
// with its Lstat.
func (o *Overlay) layer(ctx context.Context, op string, p vfs.Path) (bool, vfs.Info, error) {
	return o.layerIn(ctx, op, p, true)
}

// layerIn is layer; with upper false the caller knows the upper holds no
// parent of p (a resolution whose previous step found the parent in the
// lower only), so only the lower is asked.
func (o *Overlay) layerIn(ctx context.Context, op string, p vfs.Path, upper bool) (bool, vfs.Info, error) {
	p = p.WithoutDirMark()
	if upper {
		info, err := o.upper.Lstat(ctx, p)
		if err == nil {
			info.ID = upperID(info.ID)
			if p.IsRoot() {
				info.Mode = info.Mode&^fs.ModePerm | fs.FileMode(o.rootPerm.Load())
			}
			return true, ownerless(info), nil
		}
		if vfs.CodeOf(err) != vfs.CodeNotFound {
			return false, vfs.Info{}, vfs.Readdress(err, op, p.String(), "")
		}
	}
	if o.isHidden(p) {
		return false, vfs.Info{}, notFound(op, p)
	}
	info, err := o.lower.Lstat(ctx, p.Unresolved())
	if err != nil {
		if vfs.CodeOf(err) == vfs.CodeNotFound {
			o.seeAbsent(p)
		}
		return false, vfs.Info{}, vfs.Readdress(err, op, p.String(), "")
	}
	o.see(ctx, p, info)
	return false, ownerless(info), nil
}

// ownerless is info without the owner a layer reported: the overlay keeps
// none (see Overlay).
func ownerless(info vfs.Info) vfs.Info {
	info.HasOwner, info.Uid, info.Gid = false, 0, 0
	return info
}

// Lstat describes p without following a final symlink.
func (o *Overlay) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return o.stat(ctx, "lstat", p, false)
}

// Stat describes p, following a final symlink within the overlay.
func (o *Overlay) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return o.stat(ctx, "stat", p, true)
}

// stat is Stat (follow) or Lstat. A path a Dir resolved is looked up as it
// is (a symlink on it, swapped in since, is a conflict); any other path is
// resolved in the merged view first, with the status its last lookup found.
func (o *Overlay) stat(ctx context.Context, op string, p vfs.Path, follow bool) (vfs.Info, error) {
	if !p.IsResolved() {
		loc, info, err := o.ResolveStat(ctx, p, follow)
		if err == nil && !loc.Found {
			err = notFound(op, p)
		}
		if !p.IsRoot() {
			info.Name = p.Base() // a followed link's name, not its target's
		}
		return info, err
	}
	_, info, err := o.layer(ctx, op, p)
	switch {
	case err != nil:
	case (follow || p.MustBeDir()) && info.Mode&fs.ModeSymlink != 0:
		return vfs.Info{}, resolvedLink(op, p)
	case p.MustBeDir() && !info.Mode.IsDir():
		return vfs.Info{}, vfs.NewError(vfs.CodeNotDir, op, p, "")
	}
	return info, err
}

// notDir is the error of using p, which info describes, as a directory: a
// conflict where p was Resolved and a symlink stands on it (see
// resolvedLink), not_a_directory otherwise.
func notDir(op string, p vfs.Path, info vfs.Info) error {
	if p.IsResolved() && info.Mode&fs.ModeSymlink != 0 {
		return resolvedLink(op, p)
	}
	return vfs.NewError(vfs.CodeNotDir, op, p, "")
}

// resolvedLink is the error of a call that would follow a final symlink on a
// Resolved path (see vfs.Path.Resolved).
func resolvedLink(op string, p vfs.Path) error {
	return vfs.NewError(vfs.CodeConflict, op, p, "a symlink stands where the path was resolved")
}

// at is the path a call acts on: p as it is when a Dir resolved it (the
// upper refuses a symlink swapped in on it since), else p resolved in the
// merged view with the shared resolver: intermediate symlinks followed, the
// final one when follow is set, a trailing slash asking for a directory.
// The result is Resolved and carries no trailing slash.
func (o *Overlay) at(ctx context.Context, op string, p vfs.Path, follow bool) (vfs.Path, error) {
	if p.IsResolved() {
		return p.WithoutDirMark(), nil
	}
	_, loc, err := o.resolve(ctx, p, follow, op)
	if err != nil {
		return vfs.Path{}, err
	}
	return loc.Path, nil
}

// atEntry is at for a call on an entry itself (remove, rename): a final
// symlink is not followed, even with a trailing slash, which then asks for a
// directory where the entry is.
func (o *Overlay) atEntry(ctx context.Context, op string, p vfs.Path) (vfs.Path, error) {
	q, err := o.at(ctx, op, p.WithoutDirMark(), false)
	if err != nil || !p.MustBeDir() {
		return q, err
	}
	if _, info, err := o.layer(ctx, op, q); err == nil && !info.Mode.IsDir() {
		return q, vfs.NewError(vfs.CodeNotDir, op, p, "")
	}
	return q, nil
}

// atDir is at for a call that follows a final symlink and needs a
// directory: its status, not_a_directory for anything else.
func (o *Overlay) atDir(ctx context.Context, op string, p vfs.Path) (vfs.Path, error) {
	q, err := o.at(ctx, op, p, true)
	if err != nil {
		return q, err
	}
	_, info, err := o.layer(ctx, op, q)
	if err == nil && !info.Mode.IsDir() {
		err = notDir(op, q, info)
	}
	return q, err
}

// ReadDir merges the upper's entries with the lower's visible ones.
func (o *Overlay) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	return mergeLayers(ctx, o, p, merge[vfs.DirEntry]{list: vfs.ReadDir, name: func(e vfs.DirEntry) string { return e.Name }})
}

// ReadDirInfo is ReadDir with each entry's status as Lstat reports it (see
// [vfs.DirInfoReader]). Each layer is listed in one pass where it can. So a lazy
// run's listing with attributes (READDIRPLUS) asks no lookup per entry. A lower
// entry listed with its status is seen, as a lookup sees it: its sight is
// recorded.
func (o *Overlay) ReadDirInfo(ctx context.Context, p vfs.Path) ([]vfs.DirInfo, error) {
	name := func(e vfs.DirInfo) string { return e.Name }
	up := func(e vfs.DirInfo) vfs.DirInfo {
		if e.Err == nil {
			e.ID = upperID(e.ID)
			e.Info = ownerless(e.Info)
		}
		return e
	}
	low := func(c vfs.Path, e vfs.DirInfo) vfs.DirInfo {
		if e.Err == nil {
			o.see(ctx, c, e.Info)
			e.Info = ownerless(e.Info)
		}
		return e
	}
	return mergeLayers(ctx, o, p, merge[vfs.DirInfo]{list: vfs.ReadDirInfo, name: name, up: up, low: low})
}

// merge is how mergeLayers lists one kind of entry ([vfs.DirEntry] or
// [vfs.DirInfo]): list lists a layer's directory, name names an entry, up and
// low (either may be nil) adjust an upper entry and a shown lower one (with
// its path).
type merge[E any] struct {
	list func(context.Context, vfs.Backend, vfs.Path) ([]E, error)
	name func(E) string
	up   func(E) E
	low  func(vfs.Path, E) E
}

// mergeLayers lists directory p of the merged view with m in each layer: the
// upper's entries, then the lower's that no upper entry or whiteout hides,
// sorted by name.
func mergeLayers[E any](ctx context.Context, o *Overlay, p vfs.Path, m merge[E]) ([]E, error) {
	p, err := o.atDir(ctx, "readdir", p)
	if err != nil {
		return nil, err
	}
	byName := map[string]E{}
	ups, uerr := m.list(ctx, o.upper, p)
	if uerr != nil && vfs.CodeOf(uerr) != vfs.CodeNotFound {
		return nil, uerr
	}
	for _, e := range ups {
		if m.up != nil {
			e = m.up(e)
		}
		byName[m.name(e)] = e
	}
	o.mu.Lock()
	lowerVisible := !o.hidden(p) && !o.opaque[p.Raw()]
	o.mu.Unlock()
	if lowerVisible {
		lows, lerr := m.list(ctx, o.lower, p.Unresolved())
		if lerr != nil && (uerr != nil || vfs.CodeOf(lerr) != vfs.CodeNotFound) {
			return nil, lerr
		}
		m.addLower(ctx, o, p, lows, byName)
	}
	out := make([]E, 0, len(byName))
	for _, e := range byName {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return m.name(out[i]) < m.name(out[j]) })
	return out, nil
}

// addLower adds to byName the entries of lower directory p that no upper
// entry or whiteout hides.
func (m merge[E]) addLower(ctx context.Context, o *Overlay, p vfs.Path, lows []E, byName map[string]E) {
	kept := make([]vfs.Path, len(lows))
	o.mu.Lock()
	for i, e := range lows {
		c, cerr := p.Child(m.name(e))
		if _, ok := byName[m.name(e)]; cerr == nil && !ok && !o.whiteout[c.Raw()] {
			kept[i] = c
		}
	}
	o.mu.Unlock()
	// low may read the lower (a racy file's sight): not under o.mu.
	for i, e := range lows {
		if kept[i].IsRoot() {
			continue
		}
		if m.low != nil {
			e = m.low(kept[i], e)
		}
		byName[m.name(e)] = e
	}
}

const writeFlags = os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_TRUNC | os.O_APPEND

// OpenFile opens p. Reading opens the lower file where the upper has none;
// anything that may write copies a lower file up first.
func (o *Overlay) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	excl := os.O_CREATE | os.O_EXCL
	q, err := o.at(ctx, "open", p, flag&excl != excl)
	if err != nil {
		return nil, err
	}
	if p.MustBeDir() && flag&writeFlags != 0 {
		return nil, vfs.NewError(vfs.CodeIsDir, "open", p, "cannot create or write a file with a trailing slash")
	}
	p = q
	if flag&writeFlags == 0 {
		inUpper, info, err := o.layer(ctx, "open", p)
		if err != nil {
			return nil, err
		}
		if info.Mode&fs.ModeSymlink != 0 {
			return nil, resolvedLink("open", p)
		}
		if inUpper {
			return upperFile(o.upper.OpenFile(ctx, p, flag, perm))
		}
		f, err := o.lower.OpenFile(ctx, p.Unresolved(), flag, perm)
		if err != nil {
			return nil, err
		}
		return lowerOf(f), nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	err = o.copyUp(ctx, p, false)
	gone := vfs.CodeOf(err) == vfs.CodeNotFound
	if err != nil && !gone {
		return nil, err
	}
	if err := o.parents(ctx, p); err != nil {
		return nil, err
	}
	f, err := upperFile(o.upper.OpenFile(ctx, p, flag, perm))
	if err == nil {
		if gone {
			o.sawGone(p)
		}
		delete(o.whiteout, p.Raw())
	}
	return f, err
}

// upperID keeps the upper's object IDs apart from the lower's.
func upperID(id uint64) uint64 { return vfs.MixID(id ^ 0x5bd1e9955bd1e995) }

// ovFile is an upper file whose Stat reports the ID Lstat reports.
type ovFile struct{ vfs.File }

func (f ovFile) Stat() (vfs.Info, error) {
	info, err := f.File.Stat()
	info.ID = upperID(info.ID)
	return ownerless(info), err
}

// OpenStat is the upper file's status at its open, as Stat reports it (see
// [vfs.OpenStater]).
func (f ovFile) OpenStat() (vfs.Info, bool) {
	info, ok := vfs.OpenStat(f.File)
	info.ID = upperID(info.ID)
	return ownerless(info), ok
}

// lowerFile is a lower file whose Stat reports no owner, as Lstat does.
type lowerFile struct{ vfs.File }

func (f lowerFile) Stat() (vfs.Info, error) {
	info, err := f.File.Stat()
	return ownerless(info), err
}

// OpenStat is the lower file's status at its open, as Stat reports it (see
// [vfs.OpenStater]).
func (f lowerFile) OpenStat() (vfs.Info, bool) {
	info, ok := vfs.OpenStat(f.File)
	return ownerless(info), ok
}

// typedFile is a layer's file (ovFile, lowerFile) over a [vfs.TypedFile]: it
// answers the type the backend's file knows, so the Dir above does not fstat
// it at each open.
type typedFile struct {
	vfs.File
	typ fs.FileMode
}

func (f typedFile) Type() fs.FileMode { return f.typ }

// OpenStat forwards to the wrapped layer's file (see [vfs.OpenStater]).
func (f typedFile) OpenStat() (vfs.Info, bool) { return vfs.OpenStat(f.File) }

// HostFd forwards to the wrapped layer's file (an upper file answers, a
// lower one never does).
func (f typedFile) HostFd(t hostfd.Token) (int, bool) { return hostfd.Of(f.File) }

// typed is w, the wrapper of f, made a vfs.TypedFile when f is one.
func typed(w, f vfs.File) vfs.File {
	if tf, ok := f.(vfs.TypedFile); ok {
		return typedFile{w, tf.Type()}
	}
	return w
}

// lowerOf wraps f, opened in the lower layer.
func lowerOf(f vfs.File) vfs.File { return typed(lowerFile{f}, f) }

func upperFile(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return typed(ovFile{f}, f), nil
}

// parents makes p's parent directories exist in the upper (copying their modes
// from the lower). o.mu is held.
func (o *Overlay) parents(ctx context.Context, p vfs.Path) error {
	if p.Depth() <= 1 {
		return nil
	}
	return o.copyUpDir(ctx, p.Dir())
}

// copyUpDir makes directory p exist in the upper, with the lower's mode and
// time. o.mu is held.
func (o *Overlay) copyUpDir(ctx context.Context, p vfs.Path) error {
	if p.IsRoot() {
		return nil
	}
	if info, err := o.upper.Lstat(ctx, p); err == nil {
		if info.Mode.IsDir() {
			return nil
		}
		return notDir("copyup", p, info)
	}
	if err := o.parents(ctx, p); err != nil {
		return err
	}
	if o.hidden(p) {
		return notFound("copyup", p)
	}
	info, err := o.lower.Lstat(ctx, p.Unresolved())
	if err != nil {
		return err
	}
	if !info.Mode.IsDir() {
		return notDir("copyup", p, info)
	}
	if err := o.upper.Mkdir(ctx, p, info.Mode.Perm()|0o700); err != nil && vfs.CodeOf(err) != vfs.CodeExists {
		return err
	}
	_ = o.upper.Chtimes(ctx, p, time.Time{}, info.ModTime)
	if _, ok := o.base[p.Raw()]; !ok {
		o.setBase(p, info, Base{Type: fs.ModeDir, Mode: info.Mode.Perm(), ModTime: info.ModTime})
	}
	return nil
}

// copyUp copies the lower entry at p into the upper unless the upper has p
// already, recording its Base; a directory is copied with its whole subtree
// when deep is set, as an empty directory otherwise. not_found when the lower
// has nothing visible at p. o.mu is held.
func (o *Overlay) copyUp(ctx context.Context, p vfs.Path, deep bool) error {
	uinfo, err := o.upper.Lstat(ctx, p)
	switch {
	case err == nil:
		return o.completeDir(ctx, p, uinfo, deep)
	case vfs.CodeOf(err) != vfs.CodeNotFound:
		return err
	case o.hidden(p):
		return notFound("copyup", p)
	}
	info, err := o.lower.Lstat(ctx, p.Unresolved())
	if err != nil {
		return err
	}
	if err := o.parents(ctx, p); err != nil {
		return err
	}
	switch {
	case info.Mode.IsDir():
		if err := o.copyUpDir(ctx, p); err != nil || !deep {
			return err
		}
		return o.copyUpChildren(ctx, p)
	case info.Mode&fs.ModeSymlink != 0:
		return o.copyUpLink(ctx, p, info)
	case info.Mode.IsRegular():
		return o.copyUpFile(ctx, p, info)
	}
	return vfs.NewError(vfs.CodeNotRegular, "copyup", p, "")
}

// completeDir brings the rest of directory p up for a deep copy-up, where
// the upper holds p (uinfo) only as the parent of an earlier change and the
// lower still has it. o.mu is held.
func (o *Overlay) completeDir(ctx context.Context, p vfs.Path, uinfo vfs.Info, deep bool) error {
	if !deep || !uinfo.Mode.IsDir() || o.opaque[p.Raw()] {
		return nil
	}
	low, err := o.inLower(ctx, p)
	if err != nil || !low {
		return err
	}
	return o.copyUpChildren(ctx, p)
}

// copyUpLink copies the lower symlink at p (info its Lstat) up, its target
// the Base's. o.mu is held.
func (o *Overlay) copyUpLink(ctx context.Context, p vfs.Path, info vfs.Info) error {
	t, err := o.lower.Readlink(ctx, p.Unresolved())
	if err != nil {
		return err
	}
	if err := o.upper.Symlink(ctx, t, p); err != nil {
		return err
	}
	o.setBase(p, info, Base{Type: fs.ModeSymlink, Target: t, ModTime: info.ModTime})
	return nil
}

// copyUpFile copies the lower file at p (info its Lstat) up, hashing what
// it copies for the Base: the digest is left unknown when the host changed
// the file during the copy. o.mu is held.
func (o *Overlay) copyUpFile(ctx context.Context, p vfs.Path, info vfs.Info) error {
	src, err := o.lower.OpenFile(ctx, p.Unresolved(), os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := o.upper.OpenFile(ctx, p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode.Perm())
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(dst, h), src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = o.upper.Remove(ctx, p)
		return vfs.Errno("copyup", p, err)
	}
	_ = o.upper.Chtimes(ctx, p, time.Time{}, info.ModTime)
	digest := hex.EncodeToString(h.Sum(nil))
	if after, err := src.Stat(); err != nil || !sightOf(info).same(after) {
		digest = "" // the host changed it during the copy: contents unknown, a conflict at sync-back
	}
	o.setBase(p, info, Base{Mode: info.Mode.Perm(), Size: n, ModTime: info.ModTime, Digest: digest})
	return nil
}

// copyUpChildren copies every visible lower entry beneath directory p up,
// whole, and marks p opaque: the upper then holds all of it. o.mu is held.
func (o *Overlay) copyUpChildren(ctx context.Context, p vfs.Path) error {
	ents, err := o.lower.ReadDir(ctx, p.Unresolved())
	if err != nil {
		return err
	}
	for _, e := range ents {
		c, cerr := p.Child(e.Name)
		if cerr != nil || o.whiteout[c.Raw()] {
			continue
		}
		if err := o.copyUp(ctx, c, true); err != nil {
			return err
		}
	}
	o.opaque[p.Raw()] = true
	return nil
}

// inLower reports whether the lower has a visible entry at p. o.mu is held.
func (o *Overlay) inLower(ctx context.Context, p vfs.Path) (bool, error) {
	if o.hidden(p) {
		return false, nil
	}
	_, err := o.lower.Lstat(ctx, p.Unresolved())
	return err == nil, notAnswer(err)
}

// exists reports whether p is visible in the overlay. o.mu is held.
func (o *Overlay) exists(ctx context.Context, p vfs.Path) (bool, error) {
	_, err := o.upper.Lstat(ctx, p)
	if err == nil {
		return true, nil
	}
	if err := notAnswer(err); err != nil {
		return false, err
	}
	return o.inLower(ctx, p)
}

// existsErr is what a creation at p answers when exists said err or "there".
func existsErr(err error, op string, p vfs.Path) error {
	if err != nil {
		return err
	}
	return vfs.NewError(vfs.CodeExists, op, p, "")
}

// notAnswer is err when it says nothing about whether an entry is there: the
// call was canceled, the capability revoked or closed, or the layer failed.
// Such an error must stop a change, never be read as "absent" (a canceled
// existence check would otherwise let a removal report success having
// removed nothing). Every other error (not found, refused, not a directory)
// answers "absent", nil here.
func notAnswer(err error) error {
	switch vfs.CodeOf(err) {
	case vfs.CodeCanceled, vfs.CodeRevoked, vfs.CodeClosed, vfs.CodeIO:
		return err
	}
	return nil
}

// Mkdir creates directory p in the upper.
func (o *Overlay) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	p, err := o.at(ctx, "mkdir", p.WithoutDirMark(), false) // a link there, even dangling, exists
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if there, err := o.exists(ctx, p); err != nil || there {
		return existsErr(err, "mkdir", p)
	}
	if err := o.parents(ctx, p); err != nil {
		return err
	}
	if err := o.upper.Mkdir(ctx, p, perm); err != nil {
		return err
	}
	o.sawGone(p)
	if o.whiteout[p.Raw()] {
		delete(o.whiteout, p.Raw())
		o.opaque[p.Raw()] = true
	}
	return nil
}

// Remove removes p: from the upper, and with a whiteout where the lower has it.
// A directory must be empty in the merged view. The lower entry's Base comes
// from its sight (see sight.go): a removal reads none of its contents.
func (o *Overlay) Remove(ctx context.Context, p vfs.Path) error {
	p, err := o.atEntry(ctx, "remove", p)
	if err != nil {
		return err
	}
	if p.IsRoot() {
		return vfs.NewError(vfs.CodeInvalidPath, "remove", p, "")
	}
	inUpper, info, err := o.layerResolved(ctx, "remove", p)
	if err != nil {
		return err
	}
	if info.Mode.IsDir() {
		ents, err := o.ReadDir(ctx, p)
		if err != nil {
			return err
		}
		if len(ents) > 0 {
			return vfs.NewError(vfs.CodeNotEmpty, "remove", p, "")
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	low, lowInfo, err := o.lowerOf(ctx, p, inUpper, info)
	if err != nil {
		return err
	}
	if low {
		if _, ok := o.base[p.Raw()]; !ok {
			if err := o.recordBase(ctx, p, lowInfo); err != nil {
				return err
			}
		}
	}
	if _, err := o.upper.Lstat(ctx, p); err == nil {
		if err := o.removeUpper(ctx, p); err != nil {
			return err
		}
	} else if err := notAnswer(err); err != nil {
		return err
	}
	if low {
		o.whiteout[p.Raw()] = true
	}
	delete(o.opaque, p.Raw())
	return nil
}

// lowerOf reports whether the lower has a visible entry at p, with its
// Lstat when known: a lookup that served p from the lower (inUpper false,
// info its Lstat) answers, unless p was hidden since; else the lower is
// asked (its Lstat is then left for recordBase). o.mu is held.
func (o *Overlay) lowerOf(ctx context.Context, p vfs.Path, inUpper bool, info vfs.Info) (bool, *vfs.Info, error) {
	if !inUpper {
		if o.hidden(p) {
			return false, nil, notFound("remove", p) // removed meanwhile
		}
		return true, &info, nil
	}
	low, err := o.inLower(ctx, p)
	return low, nil, err
}

// removeUpper removes p from the upper, a directory with whatever the upper
// holds beneath it (entries the merged view already showed as removed).
func (o *Overlay) removeUpper(ctx context.Context, p vfs.Path) error {
	info, err := o.upper.Lstat(ctx, p)
	if err != nil {
		return err
	}
	if info.Mode.IsDir() {
		ents, err := o.upper.ReadDir(ctx, p)
		if err != nil {
			return err
		}
		for _, e := range ents {
			c, _ := p.Child(e.Name)
			if err := o.removeUpper(ctx, c); err != nil {
				return err
			}
		}
	}
	return o.upper.Remove(ctx, p)
}

// recordBase records the Base of the lower entry at p (for a deletion, or a
// rename over it), as the process first saw it; info is its Lstat when the
// caller has it. A regular file's digest or a symlink's target is read now
// only when the process never saw the entry; else it is the sight's (see
// deferBase). o.mu is held.
func (o *Overlay) recordBase(ctx context.Context, p vfs.Path, info *vfs.Info) error {
	if info == nil {
		li, err := o.lower.Lstat(ctx, p.Unresolved())
		if err != nil {
			return err
		}
		info = &li
	}
	b := Base{Type: info.Mode.Type(), Mode: info.Mode.Perm(), ModTime: info.ModTime}
	if info.Mode.IsRegular() {
		b.Size = info.Size
	}
	if o.deferBase(p, *info, b) {
		return nil
	}
	switch {
	case info.Mode&fs.ModeSymlink != 0:
		b.Target, _ = o.lower.Readlink(ctx, p.Unresolved())
	case info.Mode.IsRegular():
		f, err := o.lower.OpenFile(ctx, p.Unresolved(), os.O_RDONLY, 0)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return vfs.Errno("remove", p, err)
		}
		b.Digest = hex.EncodeToString(h.Sum(nil))
	}
	o.setBase(p, *info, b)
	return nil
}

// Rename moves from to to, copying from up first (a directory with its
// subtree). RenameExchange copies both up and swaps them in the upper.
func (o *Overlay) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	src, dst, fi, ti, act, err := o.renameEnds(ctx, from, to, flags)
	switch {
	case err != nil:
		return err
	case act == vfs.RenameNone:
		return nil
	case act == vfs.RenameSwap:
		return o.exchange(ctx, src, dst)
	}
	return o.move(ctx, src, dst, fi, ti)
}

// renameEnds resolves a rename's two ends (neither final symlink followed)
// and applies the shared preconditions to them (vfs.CheckRename), with each
// end's status (zero where absent).
func (o *Overlay) renameEnds(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) (src, dst vfs.Path, fi, ti vfs.Info, act vfs.RenameAction, err error) {
	if err = vfs.CheckRenameFlags(from, to, flags); err != nil {
		return
	}
	if src, err = o.atEntry(ctx, "rename", from); err != nil {
		return
	}
	if dst, err = o.atEntry(ctx, "rename", to); err != nil {
		return
	}
	_, fi, ferr := o.layer(ctx, "rename", src)
	_, ti, terr := o.layer(ctx, "rename", dst)
	for _, e := range []error{ferr, terr} {
		if e != nil && vfs.CodeOf(e) != vfs.CodeNotFound {
			return src, dst, fi, ti, 0, e
		}
	}
	act, err = vfs.CheckRename(&vfs.RenameEnds{
		From: from, To: to, Flags: flags,
		SrcFound: ferr == nil, DstFound: terr == nil,
		SrcRoot: src.IsRoot(), DstRoot: dst.IsRoot(),
		SrcDir: fi.Mode.IsDir(), DstDir: ti.Mode.IsDir(),
		SameEntry: src.Equal(dst),
		SrcAbove:  func() bool { return dst.HasPrefix(src) && !dst.Equal(src) },
		DstAbove:  func() bool { return src.HasPrefix(dst) && !src.Equal(dst) },
		DstEmpty: func() (bool, error) {
			ents, err := o.ReadDir(ctx, dst)
			return len(ents) == 0, err
		},
	})
	return src, dst, fi, ti, act, err
}

// move renames from to to (a free or replaceable destination, see
// renameEnds), copying from up first (a directory with its subtree).
func (o *Overlay) move(ctx context.Context, from, to vfs.Path, fi, ti vfs.Info) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	fromLow, err := o.inLower(ctx, from)
	if err != nil {
		return err
	}
	toLow, err := o.replaced(ctx, to)
	if err != nil {
		return err
	}
	if err := o.copyUp(ctx, from, true); err != nil {
		return err
	}
	if err := o.parents(ctx, to); err != nil {
		return err
	}
	if err := o.clearDir(ctx, to, ti); err != nil {
		return err
	}
	if err := o.upper.Rename(ctx, from, to, 0); err != nil {
		return err
	}
	if !toLow {
		o.sawGone(to)
	}
	// Bases recorded beneath from now describe the lower entries at from: keep
	// them (sync-back compares the source's old paths), and mark from removed.
	if fromLow {
		o.whiteout[from.Raw()] = true
	}
	delete(o.opaque, from.Raw())
	if fi.Mode.IsDir() && (toLow || o.whiteout[to.Raw()]) {
		o.opaque[to.Raw()] = true
	}
	delete(o.whiteout, to.Raw())
	return nil
}

// replaced reports whether the lower has an entry at a rename's
// destination to, recording its Base first if none is. o.mu is held.
func (o *Overlay) replaced(ctx context.Context, to vfs.Path) (bool, error) {
	toLow, err := o.inLower(ctx, to)
	if err != nil || !toLow {
		return toLow, err
	}
	if _, ok := o.base[to.Raw()]; !ok {
		err = o.recordBase(ctx, to, nil)
	}
	return true, err
}

// clearDir removes from the upper the (empty in the merged view) directory
// a rename replaces at to, ti its status, with what the upper holds beneath
// it. o.mu is held.
func (o *Overlay) clearDir(ctx context.Context, to vfs.Path, ti vfs.Info) error {
	if !ti.Mode.IsDir() {
		return nil
	}
	if _, err := o.upper.Lstat(ctx, to); err != nil {
		return nil
	}
	return o.removeUpper(ctx, to)
}

// exchange swaps from and to, both of which must exist, after copying both up
// whole.
func (o *Overlay) exchange(ctx context.Context, from, to vfs.Path) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range []vfs.Path{from, to} {
		if there, err := o.exists(ctx, p); err != nil {
			return err
		} else if !there {
			return notFound("rename", p)
		}
	}
	if from.Equal(to) {
		return nil
	}
	for _, p := range []vfs.Path{from, to} {
		if err := o.copyUp(ctx, p, true); err != nil {
			return err
		}
	}
	if err := o.upper.Rename(ctx, from, to, vfs.RenameExchange); err != nil {
		return err
	}
	// Both places now hold complete upper trees: a directory there hides the
	// lower's entries.
	for _, p := range []vfs.Path{from, to} {
		delete(o.opaque, p.Raw())
		if info, err := o.upper.Lstat(ctx, p); err == nil && info.Mode.IsDir() {
			o.opaque[p.Raw()] = true
		}
	}
	return nil
}

// Symlink creates link p in the upper.
func (o *Overlay) Symlink(ctx context.Context, target string, p vfs.Path) error {
	p, err := o.at(ctx, "symlink", p, false)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if there, err := o.exists(ctx, p); err != nil || there {
		return existsErr(err, "symlink", p)
	}
	if err := o.parents(ctx, p); err != nil {
		return err
	}
	if err := o.upper.Symlink(ctx, target, p); err != nil {
		return err
	}
	o.sawGone(p)
	delete(o.whiteout, p.Raw())
	return nil
}

// Readlink reads a link from the layer that serves p.
func (o *Overlay) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	p, err := o.at(ctx, "readlink", p, false)
	if err != nil {
		return "", err
	}
	return o.readlink(ctx, p)
}

// readlink reads the link at p, a path whose directories the caller
// resolved, from the layer that serves it.
func (o *Overlay) readlink(ctx context.Context, p vfs.Path) (string, error) {
	inUpper, _, err := o.layer(ctx, "readlink", p)
	if err != nil {
		return "", err
	}
	if inUpper {
		return o.upper.Readlink(ctx, p)
	}
	return o.lower.Readlink(ctx, p.Unresolved())
}

// Link makes newp another name of oldp, copying oldp up first. The
// preconditions are every virtual backend's ([vfs.CheckLinkSource],
// [vfs.CheckLinkDest]).
func (o *Overlay) Link(ctx context.Context, oldp, newp vfs.Path) error {
	src, err := o.at(ctx, "link", oldp, false)
	if err != nil {
		return err
	}
	_, info, lerr := o.layer(ctx, "link", src)
	if lerr != nil && vfs.CodeOf(lerr) != vfs.CodeNotFound {
		return lerr
	}
	if err := vfs.CheckLinkSource(oldp, newp, lerr == nil, info.Mode.IsDir()); err != nil {
		return err
	}
	dst, err := o.at(ctx, "link", newp.WithoutDirMark(), false)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	there, err := o.exists(ctx, dst)
	if err != nil {
		return err
	}
	if err := vfs.CheckLinkDest(oldp, newp, there, false, dst.Base()); err != nil {
		return err
	}
	if err := o.copyUp(ctx, src, false); err != nil {
		return err
	}
	if err := o.parents(ctx, dst); err != nil {
		return err
	}
	if err := o.upper.Link(ctx, src, dst); err != nil {
		return err
	}
	o.sawGone(dst)
	delete(o.whiteout, dst.Raw())
	return nil
}

// Chmod copies p up and changes its mode there.
func (o *Overlay) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	p, err := o.at(ctx, "chmod", p, true)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if p.IsRoot() {
		// The upper directory stays private: the root's bits are shown, not
		// set (a checkout's root mode is not synced back either).
		o.rootPerm.Store(uint32(mode.Perm()))
		return nil
	}
	if err := o.copyUp(ctx, p, false); err != nil {
		return err
	}
	return o.upper.Chmod(ctx, p, mode)
}

// Chtimes copies p up and changes its times there.
func (o *Overlay) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	p, err := o.at(ctx, "chtimes", p, true)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.copyUp(ctx, p, false); err != nil {
		return err
	}
	return o.upper.Chtimes(ctx, p, atime, mtime)
}

// Changes lists what the overlay changed, sorted by path.
// It lists every upper entry: added where the lower had nothing visible,
// modified where it replaced a lower entry. It lists every whiteout as deleted.
// Each carries the [Base] of the lower entry it replaced or removed. A
// directory copied up only to hold a change is left out; one whose mode changed
// is modified.
func (o *Overlay) Changes(ctx context.Context) ([]Change, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.readUnread(ctx)
	var out []Change
	if err := o.upperChanges(ctx, vfs.Path{}, &out); err != nil {
		return nil, err
	}
	for w := range o.whiteout {
		b, ok := o.base[w]
		if !ok {
			continue // an entry the process first found absent: new to it
		}
		out = append(out, Change{Path: w, Kind: "deleted", Base: &b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return dedupeChanges(out), nil
}

// upperChanges appends to out the change of each entry beneath upper
// directory p, recursively (see Changes). o.mu is held.
func (o *Overlay) upperChanges(ctx context.Context, p vfs.Path, out *[]Change) error {
	ents, err := o.upper.ReadDir(ctx, p)
	if err != nil {
		return err
	}
	for _, e := range ents {
		c, err := p.Child(e.Name)
		if err != nil {
			continue
		}
		if ch, ok := o.changeOf(ctx, c, e.Type); ok {
			*out = append(*out, ch)
		}
		if e.Type.IsDir() {
			if err := o.upperChanges(ctx, c, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// changeOf is the change of upper entry c of type typ, if any: added where
// the lower had nothing, modified where it replaced a lower entry; a
// directory copied up with the lower's mode is no change. o.mu is held.
func (o *Overlay) changeOf(ctx context.Context, c vfs.Path, typ fs.FileMode) (Change, bool) {
	b, hasBase := o.base[c.Raw()]
	lowHere := hasBase && !o.whiteout[c.Raw()]
	switch {
	case typ.IsDir() && lowHere && b.Type.IsDir():
		info, err := o.upper.Lstat(ctx, c)
		if err == nil && info.Mode.Perm() != b.Mode && info.Mode.Perm() != b.Mode|0o700 {
			return Change{Path: c.Raw(), Kind: "modified", Base: &b, Type: fs.ModeDir}, true
		}
		return Change{}, false
	case lowHere:
		return Change{Path: c.Raw(), Kind: "modified", Base: &b, Type: typ}, true
	}
	return Change{Path: c.Raw(), Kind: "added", Type: typ}, true
}

// Bases returns a copy of every [Base] the overlay recorded, by path.
//
// There is one for each lower entry it copied up, replaced or removed. There is
// also one for each entry the process saw and the lower lost before the process
// made an entry there. Each is the entry as the process first saw it, whether
// its path still holds it or not. A renamed directory's entries stay under
// their old paths, hidden by a whiteout. With the upper directory it is all a
// sync-back needs. An upper entry without a Base is new. A Base without an
// upper entry at its path was removed.
func (o *Overlay) Bases() map[string]Base {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.readUnread(context.Background())
	out := make(map[string]Base, len(o.base))
	for p, b := range o.base {
		out[p] = b
	}
	return out
}

// dedupeChanges keeps one change per path: a path both whited out and present
// in the upper (replaced by another type) is "modified".
func dedupeChanges(cs []Change) []Change {
	out := cs[:0]
	for i, c := range cs {
		if i > 0 && cs[i-1].Path == c.Path {
			prev := &out[len(out)-1]
			if prev.Kind == "deleted" || c.Kind == "deleted" {
				keep := *prev
				if keep.Kind == "deleted" {
					keep = c
				}
				keep.Kind = "modified"
				if keep.Base == nil {
					keep.Base = prev.Base
				}
				*prev = keep
			}
			continue
		}
		out = append(out, c)
	}
	return out
}

var _ vfs.Backend = (*Overlay)(nil)

// HostFd forwards to the upper file (see package hostfd): the upper is the
// overlay's private directory, so its files are the ones a mount may hand
// to the kernel (Options.Passthrough). A lower file never answers.
func (f ovFile) HostFd(t hostfd.Token) (int, bool) { return hostfd.Of(f.File) }
