package overlay

import (
	"context"
	"io/fs"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/vfs"
)

// Overlay is a copy-on-write [vfs.Backend] for lazy sandboxes. It shows a lower
// tree (a Dir's Backend view, which it never changes) with the changes a
// process makes kept in a private upper directory on the host.
//
// Nothing is read or copied ahead. Opening a lower file for reading reads it
// through the Dir. The first change to a lower file copies it up, whole, once.
// The copy keeps the lower entry's ID, and a reader opened before reads the
// copy after.
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
// directory is written through the physical backend, with
// [physical.WithVerbatimLinks]: a link whose target leaves the tree
// (absolute, or climbing above the root) is created, copied up, listed and
// read back as written, and never followed. So a write to a file with
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
	// origin keeps the lower ID of each upper copy, which it shows (see
	// ident.go); readers the lower files open for reading, which follow
	// their copy-up (see reader.go).
	origin  origins
	readers readers
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
	// The upper is capfs's own: a link's target is data there (an absolute
	// or climbing one is stored and read back, never followed).
	up, err := physical.New(upperDir, physical.WithVerbatimLinks())
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
		o.keepOrigin(ctx, vfs.Root, info)
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

// Features reports symlinks, hard links, chmod and chtimes. Hard links
// part on writing (LinkWritesPrivate): the upper is written through the
// physical backend, which gives the name written a private copy (see
// Overlay).
func (o *Overlay) Features() vfs.Features {
	return vfs.Features{Symlinks: true, HardLinks: true, Chmod: true, Chtimes: true, LinkWritesPrivate: true}
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
			info.ID = o.origin.id(info.ID)
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
			e.ID = o.origin.id(e.ID)
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
		gen := o.readers.copies.Load()
		inUpper, info, err := o.layer(ctx, "open", p)
		if err != nil {
			return nil, err
		}
		if info.Mode&fs.ModeSymlink != 0 {
			return nil, resolvedLink("open", p)
		}
		if inUpper {
			return o.upperFile(o.upper.OpenFile(ctx, p, flag, perm))
		}
		return o.openLower(ctx, p, info, gen, flag, perm)
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
	f, err := o.upperFile(o.upper.OpenFile(ctx, p, flag, perm))
	if err == nil {
		if gone {
			o.sawGone(p)
		}
		delete(o.whiteout, p.Raw())
	}
	return f, err
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

var _ vfs.Backend = (*Overlay)(nil)
