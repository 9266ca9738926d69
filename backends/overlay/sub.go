package overlay

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/capfs/capfs/vfs"
)

// Sub returns a backend rooted at directory p of the merged view (a final
// symlink followed). It acts on the same layers: a write through it is the
// Overlay's. A path that leads to no directory fails as a resolution does
// (not_found, not_a_directory, too_many_links, path_outside_sandbox).
//
// The Sub follows its directory by path, as the Overlay names everything:
// if the directory is renamed after Sub, the Sub keeps naming the old path
// (it is no [vfs.Locator]). Every path it is given is resolved beneath its
// root, so no symlink or ".." leads above it. Its errors, and those of the
// files it opens, name paths as its caller named them.
func (o *Overlay) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	return (&sub{o: o, root: vfs.Root.Resolved()}).Sub(ctx, p)
}

// sub is a backend rooted at directory root of an Overlay's merged view
// (see [Overlay.Sub]). root is overlay-absolute and Resolved. Each call
// maps its path to the overlay path it acts on (at, atEntry), then calls
// the Overlay with that Resolved path, which it takes as is.
type sub struct {
	o    *Overlay
	root vfs.Path
}

var (
	_ vfs.Backend       = (*sub)(nil)
	_ vfs.StatResolver  = (*sub)(nil)
	_ vfs.OpenResolver  = (*sub)(nil)
	_ vfs.DirInfoReader = (*sub)(nil)
)

// at is the overlay path a call on p acts on: p joined to the root, with
// its marks, when a Dir resolved it (vfs.Path.IsResolved); else p resolved
// beneath the root with the shared resolver (the final symlink followed
// when follow is set), keeping p's trailing-slash mark for the Overlay's
// checks. Errors name p.
func (s *sub) at(ctx context.Context, op string, p vfs.Path, follow bool) (vfs.Path, error) {
	if p.IsResolved() {
		return s.root.Join(p), nil
	}
	_, loc, err := s.o.resolveAt(ctx, s.root, p, follow, op)
	if err != nil {
		return vfs.Path{}, vfs.ReaddressTo(err, op, p)
	}
	return s.root.Join(loc.Path).WithDirMark(p.MustBeDir()), nil
}

// atEntry is at for a call on an entry itself (remove, rename, mkdir,
// link's new name): a final symlink is not followed, even with a trailing
// slash, which the Overlay then checks (a directory where the entry is).
func (s *sub) atEntry(ctx context.Context, op string, p vfs.Path) (vfs.Path, error) {
	q, err := s.at(ctx, op, p.WithoutDirMark(), false)
	return q.WithDirMark(p.MustBeDir()), err
}

// isRoot reports whether q, an overlay path at or atEntry gave, is the
// sub's root.
func (s *sub) isRoot(q vfs.Path) bool { return q.Equal(s.root) }

// Features are the Overlay's.
func (s *sub) Features() vfs.Features { return s.o.Features() }

// Lstat describes p without following a final symlink.
func (s *sub) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return s.stat(ctx, "lstat", p, false)
}

// Stat describes p, following a final symlink beneath the root.
func (s *sub) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return s.stat(ctx, "stat", p, true)
}

// stat is Overlay.stat beneath the root: the status a resolution found, or,
// for a Resolved p, the Overlay's status of it. The root is named ".", any
// other entry by p's last name (a followed link's, not its target's).
func (s *sub) stat(ctx context.Context, op string, p vfs.Path, follow bool) (vfs.Info, error) {
	var info vfs.Info
	var err error
	if p.IsResolved() {
		if follow {
			info, err = s.o.Stat(ctx, s.root.Join(p))
		} else {
			info, err = s.o.Lstat(ctx, s.root.Join(p))
		}
	} else {
		var loc vfs.Location
		loc, info, err = s.o.resolveStat(ctx, s.root, p, follow)
		if err == nil && !loc.Found {
			err = notFound(op, p)
		}
	}
	if err != nil {
		return vfs.Info{}, vfs.ReaddressTo(err, op, p)
	}
	info.Name = p.Base()
	if p.IsRoot() {
		info.Name = "."
	}
	return info, nil
}

// ReadDir lists directory p of the merged view.
func (s *sub) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	q, err := s.at(ctx, "readdir", p, true)
	if err != nil {
		return nil, err
	}
	ents, err := s.o.ReadDir(ctx, q)
	return ents, vfs.ReaddressTo(err, "readdir", p)
}

// ReadDirInfo is ReadDir with each entry's status (see [vfs.DirInfoReader]
// and [Overlay.ReadDirInfo]).
func (s *sub) ReadDirInfo(ctx context.Context, p vfs.Path) ([]vfs.DirInfo, error) {
	q, err := s.at(ctx, "readdir", p, true)
	if err != nil {
		return nil, err
	}
	ents, err := s.o.ReadDirInfo(ctx, q)
	return ents, vfs.ReaddressTo(err, "readdir", p)
}

// OpenFile opens p as [Overlay.OpenFile] does; the file's errors name p.
func (s *sub) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	excl := os.O_CREATE | os.O_EXCL
	q, err := s.at(ctx, "open", p, flag&excl != excl)
	if err != nil {
		return nil, err
	}
	f, err := s.o.OpenFile(ctx, q, flag, perm)
	if err != nil {
		return nil, vfs.ReaddressTo(err, "open", p)
	}
	return s.file(f, p, q), nil
}

// file is f, opened at overlay path q for the caller's p, made to name p in
// its errors (and "." at the root) with the optional File interfaces f has
// (see [vfs.AddressFile]).
func (s *sub) file(f vfs.File, p, q vfs.Path) vfs.File {
	a := vfs.FileAddress{Path: p}
	if s.isRoot(q) {
		a.Name = "."
	}
	return vfs.AddressFile(f, a)
}

// Mkdir creates directory p.
func (s *sub) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	q, err := s.atEntry(ctx, "mkdir", p)
	if err != nil {
		return err
	}
	return vfs.ReaddressTo(s.o.Mkdir(ctx, q, perm), "mkdir", p)
}

// Remove removes p; the root cannot be removed (invalid_path).
func (s *sub) Remove(ctx context.Context, p vfs.Path) error {
	q, err := s.atEntry(ctx, "remove", p)
	if err != nil {
		return err
	}
	if s.isRoot(q) {
		return vfs.NewError(vfs.CodeInvalidPath, "remove", p, "")
	}
	return vfs.ReaddressTo(s.o.Remove(ctx, q), "remove", p)
}

// Rename moves from to to (see [Overlay.Rename]); the root is neither
// end (invalid_path).
func (s *sub) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	if err := vfs.CheckRenameFlags(from, to, flags); err != nil {
		return err
	}
	src, err := s.atEntry(ctx, "rename", from)
	if err != nil {
		return err
	}
	dst, err := s.atEntry(ctx, "rename", to)
	if err != nil {
		return err
	}
	if s.isRoot(src) || s.isRoot(dst) {
		return vfs.PairError(vfs.CodeInvalidPath, "rename", from, to, "cannot rename the root")
	}
	return pairAddress(s.o.Rename(ctx, src, dst, flags), "rename", from, to, dst)
}

// pairAddress is err, of a two-path call (rename, link) the Overlay made
// on from and to's overlay paths, addressed as its caller named them: a
// pair error to from and to, an error on to's overlay path dst to to, any
// other to from.
func pairAddress(err error, op string, from, to, dst vfs.Path) error {
	e, ok := errors.AsType[*vfs.Error](err)
	switch {
	case err == nil:
		return nil
	case !ok || e.Dest != "":
		return vfs.ReaddressTo(err, op, from, to)
	case e.Path == dst.String():
		return vfs.ReaddressTo(err, op, to)
	}
	return vfs.ReaddressTo(err, op, from)
}

// Symlink creates link p with target. An absolute target is data, stored
// as the Overlay stores it (vfs.LinkTarget). A target climbing above the
// Sub's root is path_outside_sandbox unless that root is the overlay's: it
// may land in the wider tree, where the Overlay follows it, so it is an
// alias into the parent, not data (the Dir's Sub refuses it alike).
func (s *sub) Symlink(ctx context.Context, target string, p vfs.Path) error {
	q, err := s.at(ctx, "symlink", p, false)
	if err != nil {
		return err
	}
	rel, _ := q.TrimPrefix(s.root)
	_, leaves, err := vfs.LinkTarget(rel, target)
	if err == nil && leaves && target[0] != '/' && !s.root.IsRoot() {
		err = vfs.NewError(vfs.CodeOutside, "symlink", p, "symlink target climbs above the root")
	}
	if err != nil {
		return vfs.ReaddressTo(err, "symlink", p)
	}
	return vfs.ReaddressTo(s.o.Symlink(ctx, target, q), "symlink", p)
}

// Readlink reads link p's stored target.
func (s *sub) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	q, err := s.at(ctx, "readlink", p, false)
	if err != nil {
		return "", err
	}
	t, err := s.o.Readlink(ctx, q)
	return t, vfs.ReaddressTo(err, "readlink", p)
}

// Link makes newp another name of oldp (see [Overlay.Link]).
func (s *sub) Link(ctx context.Context, oldp, newp vfs.Path) error {
	src, err := s.at(ctx, "link", oldp, false)
	if err != nil {
		return err
	}
	dst, err := s.atEntry(ctx, "link", newp)
	if err != nil {
		return err
	}
	return pairAddress(s.o.Link(ctx, src, dst), "link", oldp, newp, dst)
}

// Chmod changes p's mode (a final symlink followed).
func (s *sub) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	q, err := s.at(ctx, "chmod", p, true)
	if err != nil {
		return err
	}
	return vfs.ReaddressTo(s.o.Chmod(ctx, q, mode), "chmod", p)
}

// Chtimes changes p's times (a final symlink followed).
func (s *sub) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	q, err := s.at(ctx, "chtimes", p, true)
	if err != nil {
		return err
	}
	return vfs.ReaddressTo(s.o.Chtimes(ctx, q, atime, mtime), "chtimes", p)
}

// Sub returns a backend rooted at directory p beneath this one's root.
func (s *sub) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	q, err := s.at(ctx, "sub", p, true)
	if err != nil {
		return nil, err
	}
	if q, err = s.o.atDir(ctx, "sub", q); err != nil {
		return nil, vfs.ReaddressTo(err, "sub", p)
	}
	return &sub{o: s.o, root: q.WithoutDirMark().Resolved()}, nil
}

// Resolve resolves p beneath the root; the Location is relative to it.
func (s *sub) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	_, loc, err := s.o.resolveAt(ctx, s.root, p, follow, "resolve")
	return loc, vfs.ReaddressTo(err, "resolve", p)
}

// ResolveStat is Resolve plus the status of what it reached (see
// [vfs.StatResolver]).
func (s *sub) ResolveStat(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, vfs.Info, error) {
	loc, info, err := s.o.resolveStat(ctx, s.root, p, follow)
	if err != nil {
		return loc, info, vfs.ReaddressTo(err, "resolve", p)
	}
	if loc.Found && loc.Path.IsRoot() {
		info.Name = "."
	}
	return loc, info, nil
}

// ResolveOpen resolves p beneath the root, lets decide rule on the
// Location (relative to the root), and opens what it reached for reading
// (see [vfs.OpenResolver]).
func (s *sub) ResolveOpen(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) (vfs.File, vfs.Location, error) {
	f, loc, err := s.o.resolveOpen(ctx, s.root, p, decide)
	if err != nil {
		return nil, loc, vfs.ReaddressTo(err, "resolve", p)
	}
	return s.file(f, p, s.root.Join(loc.Path)), loc, nil
}
