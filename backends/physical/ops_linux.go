package physical

import (
	"context"
	"io/fs"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

// parent resolves the directory holding p (following every link, beneath root)
// and returns a handle of it, whether the caller must close it, and p's last
// name, on which the caller acts with an *at syscall that never follows it.
func (f *FS) parent(ctx context.Context, root int, p vfs.Path) (int, bool, string, error) {
	d := p.Dir()
	if d.IsRoot() {
		return root, false, p.Base(), nil
	}
	fd, err := f.lookup(ctx, root, d.Raw(), unix.O_PATH|unix.O_DIRECTORY, 0, true, p.IsResolved())
	if err != nil {
		return -1, false, "", err
	}
	return fd, true, p.Base(), nil
}

// parents is parent for the two paths of Rename and Link. Paths in the same
// directory share one handle of it, resolved once (the second is then not the
// caller's to close).
func (f *FS) parents(ctx context.Context, root int, p, q vfs.Path) (pdir int, pown bool, pleaf string, qdir int, qown bool, qleaf string, err error) {
	pdir, pown, pleaf, err = f.parent(ctx, root, p)
	if err != nil {
		return -1, false, "", -1, false, "", err
	}
	if p.Dir().Equal(q.Dir()) {
		return pdir, pown, pleaf, pdir, false, q.Base(), nil
	}
	qdir, qown, qleaf, err = f.parent(ctx, root, q)
	if err != nil {
		closeIf(pdir, pown)
		return -1, false, "", -1, false, "", err
	}
	return pdir, pown, pleaf, qdir, qown, qleaf, nil
}

func closeIf(fd int, own bool) {
	if own {
		unix.Close(fd)
	}
}

// lstatAt is fstatat without following name.
func lstatAt(dir int, name string, st *unix.Stat_t) error {
	return unix.Fstatat(dir, name, st, unix.AT_SYMLINK_NOFOLLOW)
}

// needDir reports ENOTDIR unless name in dir is a directory (not a symlink).
func needDir(dir int, name string) error {
	var st unix.Stat_t
	if err := lstatAt(dir, name, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.ENOTDIR
	}
	return nil
}

// newName reports the error creating name in dir with a trailing slash gets on
// Linux: EEXIST if it exists, ENOENT otherwise.
func newName(dir int, name string) error {
	var st unix.Stat_t
	if err := lstatAt(dir, name, &st); err != nil {
		return err
	}
	return unix.EEXIST
}

// Mkdir creates directory p with exactly perm (no umask; setuid and setgid
// dropped).
func (f *FS) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	const op = "mkdir"
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return err
	}
	defer f.leave()
	if p.IsRoot() {
		return vfs.NewError(vfs.CodeExists, op, p, "")
	}
	dir, own, leaf, err := f.parent(ctx, root, p)
	if err != nil {
		return wrap(op, p, err)
	}
	defer closeIf(dir, own)
	mode := createMode(perm)
	if err := eintr(func() error { return unix.Mkdirat(dir, leaf, mode) }); err != nil {
		return wrap(op, p, err)
	}
	// Undo the umask through a handle of the new directory, never by name.
	fd, err := openatRetry(dir, leaf, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // already renamed or replaced by someone else: theirs now
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err == nil && st.Mode&0o7777 == mode {
		return nil
	}
	return wrap(op, p, chmodFd(fd, mode))
}

// Remove removes a file, symlink or empty directory.
func (f *FS) Remove(ctx context.Context, p vfs.Path) error {
	const op = "remove"
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return err
	}
	defer f.leave()
	if p.IsRoot() {
		return vfs.NewError(vfs.CodeInvalidPath, op, p, "cannot remove the root")
	}
	dir, own, leaf, err := f.parent(ctx, root, p)
	if err != nil {
		return wrap(op, p, err)
	}
	defer closeIf(dir, own)
	if p.MustBeDir() {
		if err := needDir(dir, leaf); err != nil {
			return wrap(op, p, err)
		}
		return wrap(op, p, eintr(func() error { return unix.Unlinkat(dir, leaf, unix.AT_REMOVEDIR) }))
	}
	e := eintr(func() error { return unix.Unlinkat(dir, leaf, 0) })
	if e == nil {
		return nil
	}
	e1 := eintr(func() error { return unix.Unlinkat(dir, leaf, unix.AT_REMOVEDIR) })
	if e1 == nil {
		return nil
	}
	if e1 != unix.ENOTDIR { // as os.Remove: rmdir's error unless it says "not a directory"
		e = e1
	}
	return wrap(op, p, e)
}

// wrap2 is wrap for two-path operations: p is Path and q is Dest.
func wrap2(op string, p, q vfs.Path, err error) error {
	if err == nil {
		return nil
	}
	e := wrap(op, p, err).(*vfs.Error)
	e.Dest = q.String()
	return e
}

// Rename moves from to to with renameat2 on the two resolved parent directories
// (one, resolved once, when they are the same path). Errors carry from as Path and
// to as Dest.
func (f *FS) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	const op = "rename"
	root, err := f.enter(ctx, op, from)
	if err != nil {
		return err
	}
	defer f.leave()
	fail := func(err error) error { return wrap2(op, from, to, err) }
	if from.IsRoot() || to.IsRoot() {
		return fail(&lookupErr{vfs.CodeInvalidPath, "cannot rename the root"})
	}
	var rflags uint
	switch flags {
	case 0:
	case vfs.RenameNoReplace:
		rflags = unix.RENAME_NOREPLACE
	case vfs.RenameExchange:
		rflags = unix.RENAME_EXCHANGE
	default:
		return fail(&lookupErr{vfs.CodeInvalidPath, "invalid rename flags"})
	}
	fdir, fown, fleaf, tdir, town, tleaf, err := f.parents(ctx, root, from, to)
	if err != nil {
		return fail(err)
	}
	defer closeIf(fdir, fown)
	defer closeIf(tdir, town)
	if from.MustBeDir() || to.MustBeDir() {
		if err := needDir(fdir, fleaf); err != nil {
			return fail(err)
		}
	}
	return fail(eintr(func() error { return unix.Renameat2(fdir, fleaf, tdir, tleaf, rflags) }))
}

// Symlink creates symlink p holding target, refusing (path_outside_sandbox) a
// target that is absolute or climbs above the root from the link's directory,
// unless [WithVerbatimLinks] makes it data.
func (f *FS) Symlink(ctx context.Context, target string, p vfs.Path) error {
	const op = "symlink"
	if f.cfg.symlinks == SymlinksReject {
		return vfs.NewError(vfs.CodeNotSupported, op, p, "symlinks are rejected (SymlinksReject)")
	}
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return err
	}
	defer f.leave()
	if p.IsRoot() {
		return vfs.NewError(vfs.CodeExists, op, p, "")
	}
	leaves, err := f.linkTarget(p, target)
	if err != nil {
		return err
	}
	dir, own, leaf, err := f.parent(ctx, root, p)
	if err != nil {
		return wrap(op, p, err)
	}
	defer closeIf(dir, own)
	if p.MustBeDir() {
		return wrap(op, p, newName(dir, leaf))
	}
	if !leaves {
		if err := f.checkClimb(dir, target); err != nil {
			return wrap(op, p, err)
		}
	}
	return wrap(op, p, eintr(func() error { return unix.Symlinkat(target, dir, leaf) }))
}

// linkTarget checks target for a new symlink p: leaves is true for a target
// stored as data ([WithVerbatimLinks]: absolute, or in the FS New returned,
// climbing above the root), which no physical climb check applies to. Without
// the option a leaving target is path_outside_sandbox (vfs.SymlinkTarget); a
// Sub refuses a climbing one either way.
func (f *FS) linkTarget(p vfs.Path, target string) (leaves bool, err error) {
	if !f.cfg.verbatim {
		_, err = vfs.SymlinkTarget(p, target)
		return false, err
	}
	_, leaves, err = vfs.LinkTarget(p, target)
	if leaves && target[0] != '/' && f.origin != nil {
		return false, vfs.NewError(vfs.CodeOutside, "symlink", p, "symlink target climbs above the root")
	}
	return leaves, err
}

// checkClimb refuses a relative target whose leading ".." segments (after lexical
// cleaning) would climb above the root from dir, the directory the link is
// actually created in. vfs.SymlinkTarget checks the same against the link's path;
// this check also holds when that path ran through symlinks.
func (f *FS) checkClimb(dir int, target string) error {
	k := 0
	for rest := path.Clean(target); rest == ".." || strings.HasPrefix(rest, "../"); rest = strings.TrimPrefix(rest[2:], "/") {
		k++
	}
	cur, own := dir, false
	defer func() { closeIf(cur, own) }()
	var st unix.Stat_t
	for range k {
		if err := unix.Fstat(cur, &st); err != nil {
			return err
		}
		if st.Dev == f.dev && st.Ino == f.ino {
			return errClimb
		}
		next, err := openatRetry(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		var nst unix.Stat_t
		if err := unix.Fstat(next, &nst); err != nil || (nst.Dev == st.Dev && nst.Ino == st.Ino) {
			// The host's "/" without meeting the root: the directory left the tree.
			unix.Close(next)
			return errClimb
		}
		closeIf(cur, own)
		cur, own = next, true
	}
	return nil
}

// Readlink returns the target of symlink p as stored. An absolute target, which
// could only have been planted on the host, is never shown: it fails with
// path_outside_sandbox, unless [WithVerbatimLinks] made it data.
func (f *FS) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	const op = "readlink"
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return "", err
	}
	defer f.leave()
	if p.IsRoot() {
		return "", vfs.NewError(vfs.CodeInvalidPath, op, p, "not a symlink")
	}
	if p.MustBeDir() {
		// A trailing slash follows the link: what it reaches is a directory, never a link.
		fd, err := f.lookupP(ctx, root, p, unix.O_PATH, 0, true)
		if err != nil {
			return "", wrap(op, p, err)
		}
		unix.Close(fd)
		return "", vfs.NewError(vfs.CodeInvalidPath, op, p, "not a symlink")
	}
	dir, own, leaf, err := f.parent(ctx, root, p)
	if err != nil {
		return "", wrap(op, p, err)
	}
	defer closeIf(dir, own)
	target, err := readlinkFd(dir, leaf)
	if err != nil {
		return "", wrap(op, p, err)
	}
	if strings.HasPrefix(target, "/") && !f.cfg.verbatim {
		return "", vfs.NewError(vfs.CodeOutside, op, p, "absolute symlink target (not shown)")
	}
	return target, nil
}

// HostLinkTarget reads symlink p and returns the place its absolute host target
// names, as a path from the root ([vfs.HostLinkResolver]).
//
// The target must name the root or a place beneath it: a link planted on the
// host, such as "/home/me/proj/src/x" in a tree served from /home/me/proj. The
// namespace follows such a link as the target means it. ok is false for any
// other target, which stays unshown. The root's host name is the kernel's
// current name of the root directory. So a target spelled through another
// symlinked host path does not match. Under [WithVerbatimLinks] ok is always
// false: an absolute target there is data a guest stored, never a host link.
func (f *FS) HostLinkTarget(ctx context.Context, p vfs.Path) (vfs.Path, bool, error) {
	const op = "readlink"
	if p.IsRoot() || p.MustBeDir() || f.cfg.verbatim {
		return vfs.Path{}, false, nil
	}
	host, ok := f.HostPath()
	if !ok {
		return vfs.Path{}, false, nil
	}
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return vfs.Path{}, false, err
	}
	defer f.leave()
	dir, own, leaf, err := f.parent(ctx, root, p)
	if err != nil {
		return vfs.Path{}, false, wrap(op, p, err)
	}
	defer closeIf(dir, own)
	target, err := readlinkFd(dir, leaf)
	if err != nil {
		return vfs.Path{}, false, wrap(op, p, err)
	}
	host = strings.TrimRight(host, "/")
	rest, ok := strings.CutPrefix(target, host)
	if !strings.HasPrefix(target, "/") || !ok || (rest != "" && rest[0] != '/') {
		return vfs.Path{}, false, nil
	}
	rest = strings.Trim(rest, "/")
	if rest == "" {
		return vfs.Root, true, nil
	}
	q, err := vfs.ParseGuest(rest)
	if err != nil {
		return vfs.Path{}, false, nil
	}
	return q, true, nil
}

// Link creates hard link newp to oldp (which is not followed), both resolved to
// parent directories beneath the root. Errors carry oldp as Path and newp as Dest.
func (f *FS) Link(ctx context.Context, oldp, newp vfs.Path) error {
	const op = "link"
	fail := func(err error) error { return wrap2(op, oldp, newp, err) }
	if f.cfg.hardLinks == HardLinksReject {
		return fail(&lookupErr{vfs.CodeNotSupported, "hard links are rejected (HardLinksReject)"})
	}
	root, err := f.enter(ctx, op, oldp)
	if err != nil {
		return err
	}
	defer f.leave()
	switch {
	case oldp.IsRoot():
		return fail(unix.EPERM)
	case newp.IsRoot():
		return fail(unix.EEXIST)
	}
	odir, oown, oleaf, ndir, nown, nleaf, err := f.parents(ctx, root, oldp, newp)
	if err != nil {
		return fail(err)
	}
	defer closeIf(odir, oown)
	defer closeIf(ndir, nown)
	if oldp.MustBeDir() {
		if err := needDir(odir, oleaf); err != nil {
			return fail(err)
		}
		return fail(unix.EPERM) // a directory
	}
	if newp.MustBeDir() {
		return fail(newName(ndir, nleaf))
	}
	return fail(eintr(func() error { return unix.Linkat(odir, oleaf, ndir, nleaf, 0) }))
}

// target opens an O_PATH handle of what p names, following a final symlink, for
// Chmod and Chtimes, which refuse special files and files with other hard links.
func (f *FS) target(ctx context.Context, root int, p vfs.Path) (int, error) {
	fd, err := f.lookupP(ctx, root, p, unix.O_PATH, 0, true)
	if err != nil {
		return -1, err
	}
	if err := ownEntry(fd); err != nil { // followed: never a symlink
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// Chmod sets the permission and sticky bits of p, following a final symlink.
// setuid and setgid are refused (fs_permission_denied).
func (f *FS) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	const op = "chmod"
	if mode&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		return vfs.NewError(vfs.CodePermission, op, p, "setuid and setgid bits are not allowed")
	}
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return err
	}
	defer f.leave()
	fd, err := f.target(ctx, root, p)
	if err != nil {
		return wrap(op, p, err)
	}
	defer unix.Close(fd)
	return wrap(op, p, chmodFd(fd, createMode(mode)))
}

// Chtimes sets the access and modification times of p, following a final symlink;
// a zero time is left unchanged.
func (f *FS) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	const op = "chtimes"
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return err
	}
	defer f.leave()
	fd, err := f.target(ctx, root, p)
	if err != nil {
		return wrap(op, p, err)
	}
	defer unix.Close(fd)
	ts := []unix.Timespec{timespec(atime), timespec(mtime)}
	err = utimesEmptyPath(fd, ts)
	if err == unix.EINVAL || err == unix.ENOENT {
		// A kernel without AT_EMPTY_PATH for utimensat: through the handle's /proc link.
		err = procFallback(unix.UtimesNanoAt(unix.AT_FDCWD, procFd(fd), ts, 0))
	}
	return wrap(op, p, err)
}

func timespec(t time.Time) unix.Timespec {
	if t.IsZero() {
		return unix.Timespec{Nsec: unix.UTIME_OMIT}
	}
	return unix.Timespec{Sec: t.Unix(), Nsec: int64(t.Nanosecond())}
}

// chmodFd changes the mode of the object an O_PATH handle names: fchmodat2 with
// AT_EMPTY_PATH (Linux 6.6), or else chmod through the handle's /proc/self/fd link,
// which also acts on exactly that object. Never by name.
func chmodFd(fd int, mode uint32) error {
	err := chmodEmptyPath(fd, mode)
	if err == unix.EOPNOTSUPP || err == unix.ENOSYS || err == unix.EINVAL {
		err = procFallback(unix.Fchmodat(unix.AT_FDCWD, procFd(fd), mode, 0))
	}
	return err
}
