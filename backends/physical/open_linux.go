package physical

import (
	"context"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

// OpenFile opens p; see the package documentation for the checks it makes.
func (f *FS) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	const op = "open"
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return nil, err
	}
	defer f.leave()
	flag &= os.O_RDONLY | os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_EXCL | os.O_TRUNC | os.O_APPEND | os.O_SYNC
	acc := flag & (os.O_WRONLY | os.O_RDWR)
	if acc == os.O_WRONLY|os.O_RDWR {
		return nil, vfs.NewError(vfs.CodeInvalidPath, op, p, "invalid access mode")
	}
	var h *file
	if acc == os.O_RDONLY && flag&(os.O_CREATE|os.O_TRUNC) == 0 {
		h, err = f.openRead(ctx, root, p)
	} else {
		h, err = f.openWrite(ctx, root, p, flag, perm)
	}
	if err != nil {
		return nil, wrap(op, p, err)
	}
	return h, nil
}

// openable checks that a file of status st may be opened: a regular file (with
// one name, under HardLinksReject) or a directory.
func (f *FS) openable(st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return nil
	case unix.S_IFREG:
		if st.Nlink > 1 && f.cfg.hardLinks == HardLinksReject {
			return errHardLinked
		}
		return nil
	}
	return errNotRegular
}

// reopens reports whether opens go through a checked O_PATH handle reopened by
// its /proc/self/fd entry (openat2 resolution and a verified /proc).
func (f *FS) reopens() bool { return f.procfd >= 0 && !f.portable.Load() }

// pathStat opens an O_PATH handle of what p names beneath root, following a final
// symlink, and returns it with its status. Nothing is opened for I/O.
func (f *FS) pathStat(ctx context.Context, root int, p vfs.Path, st *unix.Stat_t) (int, error) {
	fd, err := f.lookupP(ctx, root, p, unix.O_PATH, 0, true)
	if err != nil {
		return -1, err
	}
	if err := unix.Fstat(fd, st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// reopenChecked opens the object of the O_PATH handle opath, whose status the
// caller has checked, through its /proc/self/fd entry with flags: the very inode
// checked, found without a second path walk, so no other file can be opened in
// its place. (/proc/self/fd shows the descriptor table all threads of a Go
// program share; see the package documentation for a program that unshares it.)
func (f *FS) reopenChecked(opath int, flags int) (int, error) {
	return procReopen(f.procfd, opath, flags)
}

// openRead opens p for reading. With reopens, what p names is opened as an O_PATH
// handle (one confined walk), examined with fstat and, only if it may be opened (a
// regular file or a directory), reopened through that handle (reopenChecked), so a
// FIFO, socket or device is never opened, whatever renames run meanwhile.
// Otherwise it takes two confined steps: what p names is examined without being
// opened (see openChecked), then the real open runs with O_NONBLOCK|O_NOCTTY and
// its handle is checked again, since the name may have changed in between (were a
// FIFO, socket or device swapped in, O_NONBLOCK keeps the open from waiting, and
// the second check refuses it).
//
// With vfs.ExpectRegular's hint, openExpected is tried first (see there).
func (f *FS) openRead(ctx context.Context, root int, p vfs.Path) (*file, error) {
	var st unix.Stat_t
	if f.reopens() {
		if fd := f.openExpected(ctx, root, p, &st); fd >= 0 {
			return f.expectedFile(fd, p, &st)
		}
		opath, err := f.pathStat(ctx, root, p, &st)
		if err != nil {
			return nil, err
		}
		defer unix.Close(opath)
		if err := f.openable(&st); err != nil {
			return nil, err
		}
		fl := unix.O_RDONLY | unix.O_NOCTTY
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			fl |= unix.O_DIRECTORY
		}
		fd, err := f.reopenChecked(opath, fl)
		if err != nil {
			return nil, err
		}
		return f.newFile(fd, p, os.O_RDONLY, vfs.FileModeOf(st.Mode).Type(), false).withOpenStat(&st), nil
	}
	fd, err := f.openChecked(ctx, root, p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0, true, func(st *unix.Stat_t) error {
		if st == nil {
			return unix.ENOENT
		}
		return f.openable(st)
	})
	if err != nil {
		return nil, err
	}
	return f.finishOpen(fd, p, &st, os.O_RDONLY)
}

// openExpected serves callers that set vfs.ExpectRegular (they open names a
// listing showed as regular files). It opens p beneath root for reading in one
// openat2, with O_NONBLOCK|O_NOCTTY, following no symlink (RESOLVE_NO_SYMLINKS
// beside the usual confinement), and examines the descriptor with fstat. Only a
// regular file is kept: its descriptor is returned, st holding its status, and
// p is its canonical path, since no symlink was crossed. Anything else (a
// directory, a FIFO, socket or device swapped in after the listing, a path with
// a symlink on it, a missing name) is closed unread, and -1 sends the caller down
// its usual route, which gives the result it would have given without the hint.
// The cost of the hint is that opening: such a special file may be opened once
// (O_NONBLOCK keeps the open of a FIFO from waiting; nothing is read from it).
// Without the hint, or for a path that must be a directory, nothing is tried.
func (f *FS) openExpected(ctx context.Context, root int, p vfs.Path, st *unix.Stat_t) int {
	if p.MustBeDir() || !vfs.ExpectsRegular(ctx) {
		return -1
	}
	fd, err := openat2(root, pathArg(p), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0, f.resolveFlags()|unix.RESOLVE_NO_SYMLINKS)
	if err != nil {
		return -1
	}
	if unix.Fstat(fd, st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1
	}
	return fd
}

// expectedFile wraps fd, a regular file openExpected opened, as a read-only
// File, once the hard-link rule allows it (openable); otherwise it closes fd
// unread. It owns fd.
func (f *FS) expectedFile(fd int, p vfs.Path, st *unix.Stat_t) (*file, error) {
	if err := f.openable(st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return f.newFile(fd, p, os.O_RDONLY, 0, true).withOpenStat(st), nil
}

// openChecked opens p beneath root with flags (and mode, for O_CREAT), following
// a final symlink if follow, once check has approved the status of what p names,
// taken without opening it (check sees nil if p does not exist; its error stops
// the open). With openat2 the status comes from statAt (an O_PATH handle, or
// fstatat for a name in the root) and the open is a second openat2; the portable
// resolver walks once and opens the final name relative to the directory it
// reached. The opened handle may name something else if p changed in between: the
// caller checks it again.
func (f *FS) openChecked(ctx context.Context, root int, p vfs.Path, flags int, mode uint32, follow bool, check func(*unix.Stat_t) error) (int, error) {
	if !f.portable.Load() {
		var st unix.Stat_t
		switch err := f.statAt(ctx, root, p, follow, &st); {
		case err == nil:
			err = check(&st)
			if err != nil {
				return -1, err
			}
		case err == unix.ENOENT:
			if err := check(nil); err != nil {
				return -1, err
			}
		default:
			return -1, err
		}
		return f.lookupP(ctx, root, p, flags, mode, follow)
	}
	// One walk serves both the check and the open.
	s := pathArg(p)
	for range maxRaces {
		w, err := f.walk(ctx, root, s, walkOpts{follow: follow, noSym: p.IsResolved()})
		if err == errRaced {
			continue
		}
		if err != nil {
			return -1, err
		}
		var cerr error
		if w.found {
			cerr = check(&w.st)
		} else {
			cerr = check(nil)
		}
		if cerr != nil {
			w.close()
			return -1, cerr
		}
		fd, err := f.openWalked(&w, flags, mode)
		if err == unix.ELOOP {
			continue // the name became a symlink since the walk: start over
		}
		return fd, err
	}
	return -1, errRaced
}

// finishOpen checks fd, opened with O_NONBLOCK after a check by name, again and
// wraps it. It owns fd.
func (f *FS) finishOpen(fd int, p vfs.Path, st *unix.Stat_t, flag int) (*file, error) {
	if err := unix.Fstat(fd, st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := f.openable(st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	h := f.newFile(fd, p, flag, vfs.FileModeOf(st.Mode).Type(), true)
	if flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		h.withOpenStat(st)
	}
	return h, nil
}

// openWrite opens p with a write mode, O_CREATE or O_TRUNC. The kernel never sees
// O_TRUNC: the file is truncated with ftruncate only after its status shows one
// name (and never when O_CREAT|O_EXCL has just created it), so a hard link renamed
// over p in the meantime is not emptied. A file with other names is replaced
// (HardLinksReplace) or refused (HardLinksReject).
//
// With O_CREATE (and no trailing slash) and openat2, the open first tries
// O_CREAT|O_EXCL, which creates a new regular file or opens nothing; if that
// fails (the name exists, or the creation fails), the file is opened as if the
// trial had not been made. An existing file is opened, with reopens, through a
// checked O_PATH handle as openRead does; otherwise its status is checked by name
// first and the opened handle checked again.
func (f *FS) openWrite(ctx context.Context, root int, p vfs.Path, flag int, perm fs.FileMode) (*file, error) {
	create := flag&os.O_CREATE != 0
	excl := create && flag&os.O_EXCL != 0
	acc := flag & (os.O_WRONLY | os.O_RDWR)
	oflags := acc | flag&(os.O_APPEND|os.O_SYNC) | unix.O_NOCTTY // opening what exists
	if flag&os.O_TRUNC != 0 && acc == os.O_RDONLY {
		oflags |= os.O_RDWR // Linux truncates read-only opens too; the handle stays read-only
	}
	mode := createMode(perm)
	if create && !p.MustBeDir() && !f.portable.Load() {
		fd, err := f.lookupP(ctx, root, p, oflags|unix.O_CREAT|unix.O_EXCL, mode, false)
		if err == nil {
			return f.created(fd, p, flag, mode)
		}
		if excl {
			return nil, err
		}
	}
	if f.reopens() {
		var st unix.Stat_t
		opath, err := f.pathStat(ctx, root, p, &st)
		if err == nil {
			defer unix.Close(opath)
			return f.reopenWrite(ctx, root, p, opath, &st, flag, oflags)
		}
		if err != unix.ENOENT || !create {
			return nil, err
		}
		// Nothing there to open, or a dangling symlink: create as below.
	}
	fd, exists, err := f.openForWrite(ctx, root, p, flag, oflags, mode)
	if err != nil {
		return nil, err
	}
	return f.writable(ctx, root, p, fd, flag, mode, excl || !exists)
}

// openForWrite opens p through openChecked with oflags and the creation
// flags (O_TRUNC left out), and reports whether p existed: the last status
// check, of possibly several if racing, says.
func (f *FS) openForWrite(ctx context.Context, root int, p vfs.Path, flag, oflags int, mode uint32) (int, bool, error) {
	create := flag&os.O_CREATE != 0
	excl := create && flag&os.O_EXCL != 0
	kflags := oflags | flag&(os.O_CREATE|os.O_EXCL) | unix.O_NONBLOCK
	exists := true
	fd, err := f.openChecked(ctx, root, p, kflags, mode, !excl, func(st *unix.Stat_t) error {
		exists = true // the last check (of possibly several, if racing) counts
		switch {
		case st == nil && create:
			exists = false
			return nil
		case st == nil:
			return unix.ENOENT
		case excl || st.Mode&unix.S_IFMT == unix.S_IFDIR:
			return nil // the open says already_exists or is_a_directory
		}
		return f.openable(st)
	})
	return fd, exists, err
}

// writable finishes openWrite's open of fd: only a regular file; one with
// other names (not just created) is replaced or refused; a created file
// gets its mode exactly; O_TRUNC truncates an existing one.
func (f *FS) writable(ctx context.Context, root int, p vfs.Path, fd, flag int, mode uint32, created bool) (*file, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return nil, unix.EISDIR
		}
		return nil, errNotRegular
	}
	if st.Nlink > 1 && !created {
		unix.Close(fd)
		if f.cfg.hardLinks == HardLinksReject {
			return nil, errHardLinked
		}
		return f.replace(ctx, root, p, flag, &st)
	}
	if created {
		if err := unix.Fchmod(fd, mode); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	excl := flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0
	if flag&os.O_TRUNC != 0 && !excl {
		if err := unix.Ftruncate(fd, 0); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	return f.newFile(fd, p, flag, 0, true), nil
}

// created finishes the open of a file O_CREAT|O_EXCL has just created: a new,
// empty regular file with one name, so neither a check nor O_TRUNC has anything
// to do. Its mode is set exactly (undoing the umask) through the handle.
func (f *FS) created(fd int, p vfs.Path, flag int, mode uint32) (*file, error) {
	if err := unix.Fchmod(fd, mode); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return f.newFile(fd, p, flag, 0, false), nil
}

// reopenWrite opens for writing the existing object of the O_PATH handle opath,
// of status st, through reopenChecked with oflags: only a regular file, with one
// name unless the policy replaces it. The kernel checks write permission at the
// reopen, before any replacement.
func (f *FS) reopenWrite(ctx context.Context, root int, p vfs.Path, opath int, st *unix.Stat_t, flag, oflags int) (*file, error) {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return nil, unix.EISDIR
	default:
		return nil, errNotRegular
	}
	if st.Nlink > 1 && f.cfg.hardLinks == HardLinksReject {
		return nil, errHardLinked
	}
	fd, err := f.reopenChecked(opath, oflags)
	if err != nil {
		return nil, err
	}
	if st.Nlink > 1 {
		unix.Close(fd)
		return f.replace(ctx, root, p, flag, st)
	}
	if flag&os.O_TRUNC != 0 {
		if err := unix.Ftruncate(fd, 0); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	return f.newFile(fd, p, flag, 0, false), nil
}

// replace gives p, a regular file with other hard links whose status is old, a
// private copy before it is written: a new file in the same directory, holding the
// old contents (none for O_TRUNC), with the old owner and mode, renamed over the
// name. The returned handle writes the copy; the shared inode is never written.
func (f *FS) replace(ctx context.Context, root int, p vfs.Path, flag int, old *unix.Stat_t) (*file, error) {
	w, err := f.walkRetry(ctx, root, pathArg(p), p.IsResolved())
	if err != nil {
		return nil, err
	}
	defer w.close()
	if !w.found || w.leaf == "." || w.st.Dev != old.Dev || w.st.Ino != old.Ino {
		return nil, errChanged
	}
	name, tfd, err := createTemp(w.dir)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(tfd)
			unix.Unlinkat(w.dir, name, 0)
		}
	}()
	if flag&os.O_TRUNC == 0 {
		if err := f.copyOld(&w, tfd, old); err != nil {
			return nil, err
		}
	}
	if err := likeOld(tfd, old, flag); err != nil {
		return nil, err
	}
	if err := unix.Renameat(w.dir, name, w.dir, w.leaf); err != nil {
		return nil, err
	}
	ok = true
	var st unix.Stat_t
	return f.finishOpen(tfd, p, &st, flag)
}

// copyOld copies the contents of w's final entry, still the file old
// describes, into tfd (within the size limit), and leaves tfd's offset at
// 0.
func (f *FS) copyOld(w *walkResult, tfd int, old *unix.Stat_t) error {
	if f.cfg.maxSize > 0 && old.Size > f.cfg.maxSize {
		return errTooLarge
	}
	src, err := openatRetry(w.dir, w.leaf, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	var sst unix.Stat_t
	if err := unix.Fstat(src, &sst); err != nil || sst.Dev != old.Dev || sst.Ino != old.Ino {
		unix.Close(src)
		if err == nil {
			err = errChanged
		}
		return err
	}
	limit := int64(-1)
	if f.cfg.maxSize > 0 {
		limit = f.cfg.maxSize
	}
	err = copyFd(tfd, src, limit)
	unix.Close(src)
	if err != nil {
		return err
	}
	// The copy left the offset at the end: a fresh handle starts at 0.
	_, err = unix.Seek(tfd, 0, io.SeekStart)
	return err
}

// likeOld gives the copy tfd the old file's owner (where this process may)
// and mode, and O_APPEND when flag asks for it.
func likeOld(tfd int, old *unix.Stat_t, flag int) error {
	if err := unix.Fchown(tfd, int(old.Uid), int(old.Gid)); err != nil && err != unix.EPERM {
		return err
	}
	if err := unix.Fchmod(tfd, old.Mode&0o1777); err != nil {
		return err
	}
	if flag&os.O_APPEND != 0 {
		if _, err := unix.FcntlInt(uintptr(tfd), unix.F_SETFL, unix.O_APPEND); err != nil {
			return err
		}
	}
	return nil
}

// walkRetry is the portable walk, following a final symlink (none at all if
// noSym), restarted a bounded number of times when it loses a race.
func (f *FS) walkRetry(ctx context.Context, root int, s string, noSym bool) (walkResult, error) {
	for range maxRaces {
		w, err := f.walk(ctx, root, s, walkOpts{follow: true, noSym: noSym})
		if err != errRaced {
			return w, err
		}
	}
	return walkResult{}, errRaced
}

// createTemp creates a new, empty, private file in dir.
func createTemp(dir int) (string, int, error) {
	var err error
	for range 8 {
		name := ".capfs-" + strconv.FormatUint(rand.Uint64(), 36) + ".tmp"
		var fd int
		fd, err = openatRetry(dir, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == nil {
			return name, fd, nil
		}
		if err != unix.EEXIST {
			break
		}
	}
	return "", -1, err
}

// copyFd copies src to dst, failing with file_too_large past limit bytes (limit <
// 0: no limit).
func copyFd(dst, src int, limit int64) error {
	var total int64
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(src, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if total += int64(n); limit >= 0 && total > limit {
			return errTooLarge
		}
		for b := buf[:n]; len(b) > 0; {
			m, err := unix.Write(dst, b)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			b = b[m:]
		}
	}
}

// createMode is the mode a new file or directory gets: the permission bits and
// sticky. setuid and setgid are never set on the host.
func createMode(perm fs.FileMode) uint32 {
	m := uint32(perm.Perm())
	if perm&fs.ModeSticky != 0 {
		m |= unix.S_ISVTX
	}
	return m
}
