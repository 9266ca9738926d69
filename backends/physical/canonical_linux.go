//go:build linux

package physical

import (
	"context"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

var _ vfs.Locator = (*FS)(nil)

// Resolve returns the canonical location p reaches (see [vfs.Backend].Resolve).
// Every intermediate symlink is followed; the final one if follow (or p must be
// a directory). ".." in link targets is taken physically. The rules and limits
// are those of every other call: beneath the root, [vfs.MaxSymlinks],
// [WithOneFilesystem], [SymlinksReject]. The result's Path carries no
// trailing-slash mark.
//
// With openat2, the common case is a path with no symlink on it. It costs one
// openat2 (O_PATH|O_NOFOLLOW, RESOLVE_NO_SYMLINKS) and a close, or one fstatat
// for a name directly in the root. The path is then its own canonical path.
// Only when the kernel meets a symlink (ELOOP) does Resolve walk the path
// component by component to compute where it leads. That is the portable walk,
// which reads each link and pops ".." back to the directory handle it came
// from. The portable resolver always walks.
//
// A Resolved p resolves to itself, or fails with conflict if a symlink now stands
// where it would be followed.
func (f *FS) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	const op = "resolve"
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return vfs.Location{}, err
	}
	defer f.leave()
	loc, err := f.resolve(ctx, root, p, follow || p.MustBeDir(), nil)
	if err != nil {
		return vfs.Location{}, wrap(op, p, err)
	}
	return loc, nil
}

// ResolveStat is [FS.Resolve] that also returns the final entry's Info when it
// is found. The Info is what Stat (follow) or Lstat would return for the
// canonical path at the moment of the resolution. Its Name is p's last name, as
// Stat gives. It costs what Resolve costs: the status is the one the resolution
// took anyway. A layer that decides on the canonical path before it reveals
// anything (a Dir's Stat) can answer from it without a second lookup.
func (f *FS) ResolveStat(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, vfs.Info, error) {
	const op = "resolve"
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return vfs.Location{}, vfs.Info{}, err
	}
	defer f.leave()
	var st unix.Stat_t
	loc, err := f.resolve(ctx, root, p, follow || p.MustBeDir(), &st)
	if err != nil {
		return vfs.Location{}, vfs.Info{}, wrap(op, p, err)
	}
	if !loc.Found {
		return loc, vfs.Info{}, nil
	}
	return loc, infoOf(&st, baseName(p), f.dev), nil
}

// resolve is Resolve beneath root; st, if not nil, receives the final entry's
// status when it is found.
func (f *FS) resolve(ctx context.Context, root int, p vfs.Path, follow bool, st *unix.Stat_t) (vfs.Location, error) {
	if p.IsRoot() {
		if st != nil {
			if err := unix.Fstat(root, st); err != nil {
				return vfs.Location{}, err
			}
		}
		return vfs.Location{Path: vfs.Root.Resolved(), Found: true, Type: fs.ModeDir}, nil
	}
	var tmp unix.Stat_t
	if st == nil {
		st = &tmp
	}
	if !f.portable.Load() {
		loc, done, err := f.resolveFast(root, p, follow, st)
		if done || err != nil {
			return loc, err
		}
		if p.IsResolved() {
			return vfs.Location{}, errResolvedLink
		}
	}
	return f.resolveWalk(ctx, root, p, follow, st)
}

// resolveFast answers Resolve when no symlink stands on p, with openat2 and
// RESOLVE_NO_SYMLINKS: done is false when the kernel met a symlink it would have
// to follow, and the caller walks.
func (f *FS) resolveFast(root int, p vfs.Path, follow bool, st *unix.Stat_t) (loc vfs.Location, done bool, err error) {
	self := func(st *unix.Stat_t) (vfs.Location, bool, error) {
		l := vfs.Location{Path: p.WithoutDirMark().Resolved(), Found: st != nil}
		if st != nil {
			l.Type = vfs.FileModeOf(st.Mode).Type()
		}
		return l, true, nil
	}
	if p.Dir().IsRoot() && !p.MustBeDir() {
		// A name directly in the root: fstatat without following it decides,
		// unless it is a link to follow or, WithOneFilesystem, a mount point.
		switch err := lstatAt(root, p.Base(), st); {
		case err == unix.ENOENT:
			return self(nil)
		case err != nil:
			return vfs.Location{}, true, err
		case st.Mode&unix.S_IFMT == unix.S_IFLNK && follow:
			return vfs.Location{}, false, nil
		case !f.cfg.oneFS || st.Dev == f.dev:
			return self(st)
		}
	}
	rf := f.resolveFlags() | unix.RESOLVE_NO_SYMLINKS
	fd, err := openat2(root, pathArg(p), unix.O_PATH|unix.O_NOFOLLOW, 0, rf)
	switch err {
	case nil:
		err = unix.Fstat(fd, st)
		unix.Close(fd)
		if err != nil {
			return vfs.Location{}, true, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK && follow {
			return vfs.Location{}, false, nil
		}
		return self(st)
	case unix.ENOENT:
		// The final name is missing, or a directory before it: its parent says.
		d := p.Dir()
		if d.IsRoot() {
			return self(nil)
		}
		pfd, err := openat2(root, d.Raw(), unix.O_PATH|unix.O_DIRECTORY, 0, rf)
		switch err {
		case nil:
			unix.Close(pfd)
			return self(nil)
		case unix.ELOOP:
			return vfs.Location{}, false, nil
		case unix.EXDEV:
			return vfs.Location{}, true, f.xdev()
		}
		return vfs.Location{}, true, err
	case unix.ELOOP:
		return vfs.Location{}, false, nil
	case unix.EXDEV:
		// p holds no ".." and no link was followed: RESOLVE_NO_XDEV refused.
		return vfs.Location{}, true, f.xdev()
	}
	// ENOTDIR: the kernel stops at the first symlink (ELOOP), so the non-directory
	// it met stands on the canonical path itself.
	return vfs.Location{}, true, err
}

// xdev is the error of an EXDEV from a lookup that followed no link and climbed
// no "..": a mount crossing under WithOneFilesystem, else (never expected) an
// escape.
func (f *FS) xdev() error {
	if f.cfg.oneFS {
		return errXdev
	}
	return errAbove
}

// resolveWalk resolves p with the portable walk, recording the names of the
// directories it really passes through.
func (f *FS) resolveWalk(ctx context.Context, root int, p vfs.Path, follow bool, st *unix.Stat_t) (vfs.Location, error) {
	s := pathArg(p)
	for range maxRaces {
		w, err := f.walk(ctx, root, s, walkOpts{follow: follow, noSym: p.IsResolved(), canon: true})
		if err == errRaced {
			continue
		}
		if err != nil {
			return vfs.Location{}, err
		}
		w.close()
		q, err := pathOf(w.canon)
		if err != nil {
			return vfs.Location{}, err
		}
		loc := vfs.Location{Path: q.Resolved(), Found: w.found}
		if w.found {
			loc.Type = vfs.FileModeOf(w.st.Mode).Type()
			*st = w.st
		}
		return loc, nil
	}
	return vfs.Location{}, errRaced
}

// pathOf builds the Path of the slash-separated names s ("" for the root), each
// checked as a vfs.ValidName.
func pathOf(s string) (vfs.Path, error) {
	q := vfs.Root
	for s != "" {
		var name string
		name, s, _ = strings.Cut(s, "/")
		var err error
		if q, err = q.Child(name); err != nil {
			return vfs.Path{}, &lookupErr{vfs.CodeInvalidPath, "a name on the path cannot be addressed"}
		}
	}
	return q, nil
}

// Locate returns the current path of this FS's root directory ([vfs.Locator]).
//
// The path is relative to the root of the FS that [New] returned (its origin).
// It reflects whatever renames the host or a guest made since Sub opened the
// directory. It is [vfs.Root] for the FS New returned. A directory removed, or moved out of the
// origin's tree, fails with not_found. A closed FS or origin fails with closed.
//
// It reads the kernel's names of both directory handles: their /proc/self/fd
// entries, re-read on every call, so a moved origin is followed too. Where those
// are unavailable or ambiguous, it climbs ".." from the Sub's handle, finding
// each directory's name in its parent by identity. Either way the answer is
// checked before it is returned. Opened beneath the origin's handle without
// following any symlink, it must be the very directory this FS holds. Otherwise
// the lookup is retried, a bounded number of times, then fails with conflict.
func (f *FS) Locate(ctx context.Context) (vfs.Path, error) {
	const op = "locate"
	o := f.origin
	if o == nil || o == f {
		if _, err := f.enter(ctx, op, vfs.Root); err != nil {
			return vfs.Path{}, err
		}
		f.leave()
		return vfs.Root, nil
	}
	sfd, err := f.enter(ctx, op, vfs.Root)
	if err != nil {
		return vfs.Path{}, err
	}
	defer f.leave()
	ofd, err := o.enter(ctx, op, vfs.Root)
	if err != nil {
		return vfs.Path{}, err
	}
	defer o.leave()
	// The last answer, if it still leads to this directory (three calls).
	if last := f.located.Load(); last != nil && o.leadsTo(ctx, ofd, last.rel, f.dev, f.ino) {
		return last.p, nil
	}
	q, rel, err := o.locate(ctx, ofd, sfd)
	if err != nil {
		return vfs.Path{}, wrap(op, vfs.Root, err)
	}
	f.located.Store(&location{p: q, rel: rel})
	return q, nil
}

// location is an answer of Locate, kept to be checked first next time.
type location struct {
	p   vfs.Path
	rel string
}

// leadsTo reports whether rel, opened beneath the root handle ofd without
// following any symlink, is the directory dev/ino.
func (o *FS) leadsTo(ctx context.Context, ofd int, rel string, dev, ino uint64) bool {
	if rel == "" {
		return dev == o.dev && ino == o.ino
	}
	fd, err := o.lookup(ctx, ofd, rel, unix.O_PATH|unix.O_DIRECTORY, 0, true, true)
	if err != nil {
		return false
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	unix.Close(fd)
	return err == nil && st.Dev == dev && st.Ino == ino
}

var (
	errGone   = &lookupErr{vfs.CodeNotFound, "the directory was removed or moved out of the tree"}
	errMoving = &lookupErr{vfs.CodeConflict, "the directory kept moving while it was located; try again"}
	errNoName = &lookupErr{vfs.CodeNotFound, "the kernel gives no usable name for the directory"}
)

// locate finds directory handle sfd beneath o's root handle ofd: its Path and
// the slash-separated names.
func (o *FS) locate(ctx context.Context, ofd, sfd int) (vfs.Path, string, error) {
	var sst, ost unix.Stat_t
	for range maxRaces {
		if err := unix.Fstat(sfd, &sst); err != nil {
			return vfs.Path{}, "", err
		}
		if err := unix.Fstat(ofd, &ost); err != nil {
			return vfs.Path{}, "", err
		}
		if sst.Nlink == 0 || ost.Nlink == 0 {
			return vfs.Path{}, "", errGone // removed (a removed directory has no links)
		}
		if sst.Dev == ost.Dev && sst.Ino == ost.Ino {
			return vfs.Root, "", nil
		}
		rel, err := procNames(ofd, sfd)
		if err != nil {
			if rel, err = relByParents(ctx, ofd, sfd, &ost); err != nil {
				return vfs.Path{}, "", err
			}
		}
		q, err := pathOf(rel)
		if err != nil {
			return vfs.Path{}, "", err
		}
		// Check the answer: beneath the origin, following nothing, it must lead to
		// the very directory held.
		if o.leadsTo(ctx, ofd, rel, sst.Dev, sst.Ino) {
			return q, rel, nil
		}
		if err := ctx.Err(); err != nil {
			return vfs.Path{}, "", err
		}
		// Moved between the reading and the check: again.
	}
	return vfs.Path{}, "", errMoving
}

// procNames is relByProc; tests replace it to take the climb of relByParents.
var procNames = relByProc

// relByProc returns the path of sfd relative to ofd from the kernel's names of
// the two handles (their /proc/self/fd links). It fails where /proc is missing,
// a name cannot be read, or sfd's name does not lie beneath ofd's (moved out, or
// a race: the caller then climbs parents, which decides).
func relByProc(ofd, sfd int) (string, error) {
	procDir := procFdDir()
	if procDir < 0 {
		return "", errNoName
	}
	op, err := readlinkFd(procDir, strconv.Itoa(ofd))
	if err != nil {
		return "", err
	}
	sp, err := readlinkFd(procDir, strconv.Itoa(sfd))
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(op, "/") || !strings.HasPrefix(sp, "/") {
		return "", errNoName // not reachable from this process's root
	}
	prefix := op + "/"
	if op == "/" {
		prefix = "/"
	}
	rel, ok := strings.CutPrefix(sp, prefix)
	if !ok || rel == "" {
		return "", errNoName
	}
	return rel, nil
}

// maxLocateDepth bounds the climb of relByParents.
const maxLocateDepth = vfs.MaxPathLen / 2

// relByParents returns the path of sfd relative to the origin (of status ost) by
// climbing "..": at each level it lists the parent and finds the entry that is the
// directory it came from (same device and inode, by fstatat without following).
// Reaching the top of the host's tree (a directory that is its own parent) means
// the directory is not beneath the origin: not_found.
func relByParents(ctx context.Context, ofd, sfd int, ost *unix.Stat_t) (string, error) {
	var names []string
	cur, own := sfd, false
	defer func() { closeIf(cur, own) }()
	var st unix.Stat_t
	for range maxLocateDepth {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if err := unix.Fstat(cur, &st); err != nil {
			return "", err
		}
		if st.Dev == ost.Dev && st.Ino == ost.Ino {
			var b strings.Builder
			for i := len(names) - 1; i >= 0; i-- {
				b.WriteString(names[i])
				if i > 0 {
					b.WriteByte('/')
				}
			}
			return b.String(), nil
		}
		parent, err := openatRetry(cur, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", err
		}
		var pst unix.Stat_t
		if err := unix.Fstat(parent, &pst); err != nil || (pst.Dev == st.Dev && pst.Ino == st.Ino) {
			unix.Close(parent)
			if err == nil {
				err = errGone // the host's "/": the origin was never met
			}
			return "", err
		}
		ents, err := readDirFd(context.Background(), parent)
		if err != nil {
			unix.Close(parent)
			return "", err
		}
		name := ""
		for _, e := range ents {
			var est unix.Stat_t
			if e.Type.IsDir() && lstatAt(parent, e.Name, &est) == nil && est.Dev == st.Dev && est.Ino == st.Ino {
				name = e.Name
				break
			}
		}
		if name == "" {
			unix.Close(parent)
			return "", errMoving // renamed meanwhile, or a name a Path cannot hold
		}
		names = append(names, name)
		closeIf(cur, own)
		cur, own = parent, true
	}
	return "", errGone
}

// ResolveOpen opens p for reading, as OpenFile(p, O_RDONLY) does, and lets
// decide rule in between ([vfs.OpenResolver]).
//
// Once it knows the canonical location p reaches (as Resolve with follow reports
// it), it calls decide with it, without holding any lock of f. An error from
// decide is returned as is and nothing is opened. Where decide allows it, the
// very object the resolution reached is opened, through the O_PATH handle the
// resolution holds (no second lookup). So nothing renamed or swapped in after the
// decision can be opened instead. Nor does the open fail with conflict because
// of such a swap. With openat2 and a path with no symlink on it,
// this costs what OpenFile costs: one resolution serves the decision and the
// open. A missing p reaches decide with Found false, then fails with not_found.
//
// It is the read path of a layer that decides on canonical paths (a Dir with a
// policy). Its errors are addressed to p with Op "open".
func (f *FS) ResolveOpen(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) (vfs.File, vfs.Location, error) {
	const op = "open"
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return nil, vfs.Location{}, err
	}
	if f.reopens() {
		var st unix.Stat_t
		if fd := f.openExpected(ctx, root, p, &st); fd >= 0 {
			// A regular file reached without a symlink: p is its canonical
			// path. Nothing has been read; a refusal closes it unread.
			f.leave()
			loc := vfs.Location{Path: p.WithoutDirMark().Resolved(), Found: true}
			if err := decide(loc); err != nil {
				unix.Close(fd)
				return nil, loc, err
			}
			h, err := f.expectedFile(fd, p, &st)
			if err != nil {
				return nil, loc, wrap(op, p, err)
			}
			return h, loc, nil
		}
		obj, loc, st, err := f.resolveObject(ctx, root, p)
		if err == nil {
			f.leave()
			defer unix.Close(obj)
			if err := decide(loc); err != nil {
				return nil, loc, err
			}
			if err := f.openable(&st); err != nil {
				return nil, loc, wrap(op, p, err)
			}
			fl := unix.O_RDONLY | unix.O_NOCTTY
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				fl |= unix.O_DIRECTORY
			}
			fd, err := f.reopenChecked(obj, fl)
			if err != nil {
				return nil, loc, wrap(op, p, err)
			}
			return f.newFile(fd, p, os.O_RDONLY, vfs.FileModeOf(st.Mode).Type(), false).withOpenStat(&st), loc, nil
		}
		if err != errNotObject {
			f.leave()
			return nil, vfs.Location{}, wrap(op, p, err)
		}
	}
	// Resolve, decide, then open the Resolved path (which follows nothing).
	return resolveDecideThen(ctx, f, root, op, p, decide, func(q vfs.Path) (vfs.File, error) {
		h, err := f.OpenFile(ctx, q, os.O_RDONLY, 0)
		if fh, ok := h.(*file); ok {
			fh.p, fh.name = p, baseName(p)
		}
		return h, err
	})
}

// ResolveReadDir lists p, as ReadDir does, and lets decide rule in between
// ([vfs.ListResolver]), as [FS.ResolveOpen] does for reads.
//
// Once it knows the canonical location p reaches (as Resolve with follow reports
// it), it calls decide with it, without holding any lock of f. An error from
// decide is returned as is and nothing is listed. With openat2 and a path with no
// symlink on it, the directory is opened once. O_DIRECTORY fails before anything
// but a directory is opened, and RESOLVE_NO_SYMLINKS makes p its canonical path.
// The directory is decided on and listed through that descriptor. So one lookup
// serves the decision and the listing, and nothing renamed or swapped in after
// the decision can be listed instead. Any other path (a symlink on it, a missing
// name, a file) is resolved and decided on. Then its Resolved path is listed as
// ReadDir lists it. That path follows nothing, so a swap in between fails with
// conflict.
//
// It is the listing path of a layer that decides on canonical paths (a Dir with
// a policy). Its errors are addressed to p with Op "readdir".
func (f *FS) ResolveReadDir(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) ([]vfs.DirEntry, vfs.Location, error) {
	const op = "readdir"
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return nil, vfs.Location{}, err
	}
	if !f.portable.Load() {
		fd, err := openat2(root, pathArg(p), unix.O_RDONLY|unix.O_DIRECTORY, 0, f.resolveFlags()|unix.RESOLVE_NO_SYMLINKS)
		if err == nil {
			f.leave()
			defer unix.Close(fd)
			loc := vfs.Location{Path: p.WithoutDirMark().Resolved(), Found: true, Type: fs.ModeDir}
			if err := decide(loc); err != nil {
				return nil, loc, err
			}
			ents, err := readDirFd(ctx, fd)
			if err != nil {
				return nil, loc, wrap(op, p, err)
			}
			return ents, loc, nil
		}
	}
	// Resolve, decide, then list the Resolved path (which follows nothing).
	return resolveDecideThen(ctx, f, root, op, p, decide, func(q vfs.Path) ([]vfs.DirEntry, error) {
		return f.ReadDir(ctx, q)
	})
}

// resolveDecideThen is the general path of the fused calls: it resolves p
// beneath root (following a final link), ends the call f.enter began, lets
// decide rule on the location and, if decide returns nil, calls act on the
// Resolved path, which follows nothing, so a swap after the decision fails
// with conflict. act's errors are addressed to p; decide's are returned as
// they are.
func resolveDecideThen[T any](ctx context.Context, f *FS, root int, op string, p vfs.Path, decide func(vfs.Location) error, act func(vfs.Path) (T, error)) (T, vfs.Location, error) {
	var zero T
	loc, err := f.resolve(ctx, root, p, true, nil)
	f.leave()
	if err != nil {
		return zero, vfs.Location{}, wrap(op, p, err)
	}
	if err := decide(loc); err != nil {
		return zero, loc, err
	}
	v, err := act(loc.Path)
	if err != nil {
		if e, ok := err.(*vfs.Error); ok {
			e.Path = p.String()
		}
		return zero, loc, err
	}
	return v, loc, nil
}

// errNotObject: resolveObject has no handle to give (p is missing, or the walk
// needs what the general path does); the caller resolves and opens the usual way.
var errNotObject = &lookupErr{vfs.CodeNotFound, "no object"}

// resolveObject resolves p with openat2, following a final link, to an O_PATH
// handle of what it reaches, with that object's canonical location and status:
// one openat2 with RESOLVE_NO_SYMLINKS when no symlink stands on p, else the
// portable walk, which records the canonical path and holds a handle of the final
// object. errNotObject when p reaches nothing.
func (f *FS) resolveObject(ctx context.Context, root int, p vfs.Path) (int, vfs.Location, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := openat2(root, pathArg(p), unix.O_PATH, 0, f.resolveFlags()|unix.RESOLVE_NO_SYMLINKS)
	switch {
	case err == nil:
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, vfs.Location{}, st, err
		}
		loc := vfs.Location{Path: p.WithoutDirMark().Resolved(), Found: true, Type: vfs.FileModeOf(st.Mode).Type()}
		return fd, loc, st, nil
	case err == unix.ELOOP && !p.IsResolved():
		for range maxRaces {
			w, err := f.walk(ctx, root, pathArg(p), walkOpts{follow: true, needObj: true, canon: true})
			if err == errRaced {
				continue
			}
			if err != nil {
				return -1, vfs.Location{}, st, err
			}
			if !w.found {
				w.close()
				return -1, vfs.Location{}, st, errNotObject
			}
			q, err := pathOf(w.canon)
			if err != nil {
				w.close()
				return -1, vfs.Location{}, st, err
			}
			obj := w.obj
			w.obj = -1
			st = w.st
			w.close()
			return obj, vfs.Location{Path: q.Resolved(), Found: true, Type: vfs.FileModeOf(st.Mode).Type()}, st, nil
		}
		return -1, vfs.Location{}, st, errRaced
	case err == unix.ELOOP:
		return -1, vfs.Location{}, st, errResolvedLink
	}
	return -1, vfs.Location{}, st, errNotObject
}
