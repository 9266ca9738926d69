//go:build linux

package physical

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"math/bits"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

// FS is a host directory served as a vfs.Backend, through a directory handle
// opened once by New (or Sub). The zero value is not usable. An FS is safe for
// concurrent use.
type FS struct {
	cfg      config
	portable atomic.Bool // resolve with the portable walker instead of openat2

	mu      sync.RWMutex // held for reading by every call using fd; Close takes it for writing
	fd      int          // O_PATH|O_DIRECTORY handle of the root
	closed  bool
	cleanup runtime.Cleanup

	dev, ino uint64 // identity of the root directory
	host     string // absolute host path given to New; "" for a Sub
	// origin is the FS New returned, which Sub chains started from (Locate
	// reports where this FS's root is beneath it); nil for that FS itself.
	origin  *FS
	located atomic.Pointer[location] // Locate's last answer

	// procfd is the verified /proc/self/fd handle that opens reopen checked O_PATH
	// handles through (see procFdDir), or -1: then opens check, then open by path.
	procfd int
}

var (
	_ vfs.Backend    = (*FS)(nil)
	_ vfs.HostPather = (*FS)(nil)
)

// New serves the host directory root. It opens root once, as a directory handle
// (O_PATH|O_DIRECTORY|O_CLOEXEC). Symlinks in root itself, which the host chose,
// are followed. Every later call resolves beneath that handle, so renaming or
// replacing root afterwards does not redirect the backend. New's own errors,
// meant for the host, name root. No other error of the backend names a host path.
func New(root string, opts ...Option) (*FS, error) {
	const op = "physical.New"
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, &vfs.Error{Code: vfs.CodeInvalidPath, Op: op, Path: root, Err: err}
	}
	fd, err := openRetry(abs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return nil, hostError(op, abs, err)
	}
	f, err := newFS(cfg, fd, abs)
	if err != nil {
		unix.Close(fd)
		return nil, hostError(op, abs, err)
	}
	switch cfg.resolver {
	case ResolverPortable:
		f.portable.Store(true)
	default:
		pfd, err := openat2(fd, ".", unix.O_PATH, 0, f.resolveFlags())
		if err == nil {
			unix.Close(pfd)
			break
		}
		if err != unix.ENOSYS && err != unix.EPERM {
			f.Close()
			return nil, hostError(op, abs, err)
		}
		if cfg.resolver == ResolverOpenat2 {
			f.Close()
			return nil, &vfs.Error{Code: vfs.CodeNotSupported, Op: op, Path: abs, Err: err}
		}
		f.portable.Store(true)
	}
	if !f.portable.Load() && !cfg.noReopen {
		f.procfd = procFdDir()
	}
	return f, nil
}

// hostError is an error of New, which may name the host path.
func hostError(op, host string, err error) error {
	e := vfs.Errno(op, vfs.Root, err).(*vfs.Error)
	e.Path = host
	return e
}

// eintr runs call until it fails with something other than EINTR (a bounded
// number of times). A served tree on FUSE or NFS can interrupt any system call
// when the thread takes a signal (the Go runtime's preemption signals among
// them); none of the calls retried here has an effect when it fails so.
func eintr(call func() error) error {
	for range 1000 {
		if err := call(); err != unix.EINTR {
			return err
		}
	}
	return unix.EINTR
}

func openRetry(p string, flags int) (int, error) {
	for {
		fd, err := unix.Open(p, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// newFS wraps directory handle fd, which it owns from then on.
func newFS(cfg config, fd int, host string) (*FS, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	f := &FS{cfg: cfg, fd: fd, dev: st.Dev, ino: st.Ino, host: host, procfd: -1}
	// A Sub nobody closes releases its handle when it becomes unreachable.
	f.cleanup = runtime.AddCleanup(f, func(fd int) { unix.Close(fd) }, fd)
	return f, nil
}

// Close releases the root handle. Calls already running finish first. Later
// calls on f fail with closed. Subs made from f and Files opened through it hold
// their own handles, which Close leaves open.
func (f *FS) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return vfs.NewError(vfs.CodeClosed, "close", vfs.Root, "backend already closed")
	}
	f.closed = true
	f.cleanup.Stop()
	return wrap("close", vfs.Root, unix.Close(f.fd))
}

// HostPath returns the directory's current host path, for binding it into a
// sandbox without copying ([vfs.HostPather]). It is for the host only: a guest
// never holds a Backend. It reads the kernel's name for the root handle, so it
// follows renames of the directory. It returns false if the handle is closed or
// the directory was deleted.
func (f *FS) HostPath() (string, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return "", false
	}
	if s, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(f.fd)); err == nil {
		if strings.HasPrefix(s, "/") && !strings.HasSuffix(s, " (deleted)") {
			return s, true
		}
		return "", false
	}
	return f.host, f.host != ""
}

// Features reports symlinks (unless SymlinksReject), hard links (unless
// HardLinksReject), Chmod, Chtimes and persistence.
func (f *FS) Features() vfs.Features {
	return vfs.Features{
		Symlinks:   f.cfg.symlinks != SymlinksReject,
		HardLinks:  f.cfg.hardLinks != HardLinksReject,
		Chmod:      true,
		Chtimes:    true,
		Persistent: true,
	}
}

// enter starts a call: it checks ctx and holds the root handle open until leave.
func (f *FS) enter(ctx context.Context, op string, p vfs.Path) (int, error) {
	if err := ctx.Err(); err != nil {
		return -1, wrap(op, p, err)
	}
	f.mu.RLock()
	if f.closed {
		f.mu.RUnlock()
		return -1, vfs.NewError(vfs.CodeClosed, op, p, "backend closed")
	}
	return f.fd, nil
}

func (f *FS) leave() { f.mu.RUnlock() }

// Stat returns information on p, following a final symlink.
func (f *FS) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return f.stat(ctx, "stat", p, true)
}

// Lstat returns information on p without following a final symlink.
func (f *FS) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return f.stat(ctx, "lstat", p, false)
}

func (f *FS) stat(ctx context.Context, op string, p vfs.Path, follow bool) (vfs.Info, error) {
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return vfs.Info{}, err
	}
	defer f.leave()
	var st unix.Stat_t
	if err := f.statAt(ctx, root, p, follow, &st); err != nil {
		return vfs.Info{}, wrap(op, p, err)
	}
	return infoOf(&st, baseName(p), f.dev), nil
}

// statAt fills st with the status of p beneath root, following a final symlink if
// follow (or p must be a directory).
func (f *FS) statAt(ctx context.Context, root int, p vfs.Path, follow bool, st *unix.Stat_t) error {
	s := pathArg(p)
	if f.portable.Load() {
		return f.statPortable(ctx, root, s, follow, p.IsResolved(), st)
	}
	if !p.IsRoot() && p.Dir().IsRoot() {
		// A name directly in the root needs no resolution: fstatat, not following
		// it, answers unless it is a link to follow, a mount point to refuse, or
		// not the directory a trailing slash asks for.
		err := unix.Fstatat(root, p.Base(), st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.ENOENT {
			return err
		}
		if err == nil {
			typ := st.Mode & unix.S_IFMT
			link := typ == unix.S_IFLNK && (follow || p.MustBeDir())
			if !link && (!f.cfg.oneFS || st.Dev == f.dev) && (!p.MustBeDir() || typ == unix.S_IFDIR) {
				return nil
			}
		}
	}
	fd, err := f.lookup(ctx, root, s, unix.O_PATH, 0, follow, p.IsResolved())
	if err != nil {
		return err
	}
	err = unix.Fstat(fd, st)
	unix.Close(fd)
	return err
}

// ReadDir lists directory p, sorted by name. Entries whose names a [vfs.Path]
// cannot hold (those containing a backslash) are left out. They are reported to
// the context's [vfs.WithUnaddressable] function if it carries one.
func (f *FS) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	const op = "readdir"
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return nil, err
	}
	defer f.leave()
	// O_DIRECTORY fails before anything but a directory is opened: no FIFO hangs.
	fd, err := f.lookupP(ctx, root, p, unix.O_RDONLY|unix.O_DIRECTORY, 0, true)
	if err != nil {
		return nil, wrap(op, p, err)
	}
	ents, err := readDirFd(ctx, fd)
	unix.Close(fd)
	if err != nil {
		return nil, wrap(op, p, err)
	}
	return ents, nil
}

// ReadDirInfo lists directory p with every entry's status ([vfs.DirInfoReader]).
// The directory is opened once, as ReadDir opens it. Each entry's status is
// taken relative to it with fstatat, not following it. So nothing outside the
// directory is reached, and the cost is one system call per entry instead of a
// lookup from the root. Under [WithOneFilesystem] an entry on another file
// system (a mount point) answers what Lstat answers of it. Entries are those
// ReadDir lists; one removed since the listing is left out.
func (f *FS) ReadDirInfo(ctx context.Context, p vfs.Path) ([]vfs.DirInfo, error) {
	const op = "readdir"
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return nil, err
	}
	fd, err := f.lookupP(ctx, root, p, unix.O_RDONLY|unix.O_DIRECTORY, 0, true)
	if err != nil {
		f.leave()
		return nil, wrap(op, p, err)
	}
	out, foreign, err := f.statEntries(ctx, fd, p.WithoutDirMark())
	unix.Close(fd)
	f.leave()
	if err != nil {
		return nil, wrap(op, p, err)
	}
	return f.foreignInfos(ctx, p.WithoutDirMark(), out, foreign)
}

// statEntries lists the directory open as fd (dir, for the errors of its
// entries) with every entry's status, taken with fstatat relative to fd
// without following it; one removed since the listing is left out. Under
// WithOneFilesystem it returns the indexes of the entries on another file
// system too (foreign).
func (f *FS) statEntries(ctx context.Context, fd int, dir vfs.Path) (out []vfs.DirInfo, foreign []int, err error) {
	ents, err := readDirFd(ctx, fd)
	if err != nil {
		return nil, nil, err
	}
	out = make([]vfs.DirInfo, 0, len(ents))
	for _, e := range ents {
		if i := len(out); i%256 == 0 && i > 0 {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
		}
		var st unix.Stat_t
		err := eintr(func() error { return unix.Fstatat(fd, e.Name, &st, unix.AT_SYMLINK_NOFOLLOW) })
		switch {
		case err == unix.ENOENT:
			continue // removed since the listing
		case err != nil:
			c, _ := dir.Child(e.Name)
			out = append(out, vfs.DirInfo{Info: vfs.Info{Name: e.Name, Mode: e.Type}, Err: wrap("lstat", c, err)})
			continue
		case f.cfg.oneFS && st.Dev != f.dev:
			foreign = append(foreign, len(out))
		}
		out = append(out, vfs.DirInfo{Info: infoOf(&st, e.Name, f.dev)})
	}
	return out, foreign, nil
}

// foreignInfos answers the entries of out at indexes foreign (on another
// file system) with what Lstat answers of them, leaving out those removed
// since the listing.
func (f *FS) foreignInfos(ctx context.Context, dir vfs.Path, out []vfs.DirInfo, foreign []int) ([]vfs.DirInfo, error) {
	gone := false
	for _, i := range foreign {
		c, err := dir.Child(out[i].Name)
		if err != nil {
			return nil, err
		}
		info, err := f.Lstat(ctx, c)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			out[i].Name, gone = "", true // removed since the listing
		case err != nil:
			out[i] = vfs.DirInfo{Info: vfs.Info{Name: out[i].Name, Mode: out[i].Mode.Type()}, Err: err}
		default:
			out[i].Info = info
		}
	}
	if gone {
		out = slices.DeleteFunc(out, func(d vfs.DirInfo) bool { return d.Name == "" })
	}
	return out, nil
}

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

var (
	errNotRegular = &lookupErr{vfs.CodeNotRegular, "not a regular file or directory"}
	errHardLinked = &lookupErr{vfs.CodePermission, "the file has other hard links (HardLinksReject)"}
	errShared     = &lookupErr{vfs.CodePermission, "the file has other hard links, which may lie outside the root"}
	errChanged    = &lookupErr{vfs.CodeConflict, "the file changed while it was being opened; try again"}
)

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
		return f.newFile(fd, p, os.O_RDONLY, fileMode(st.Mode).Type(), false).withOpenStat(&st), nil
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
	h := f.newFile(fd, p, flag, fileMode(st.Mode).Type(), true)
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
// target that is absolute or climbs above the root from the link's directory.
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
	if _, err := vfs.SymlinkTarget(p, target); err != nil {
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
	if err := f.checkClimb(dir, target); err != nil {
		return wrap(op, p, err)
	}
	return wrap(op, p, eintr(func() error { return unix.Symlinkat(target, dir, leaf) }))
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

var (
	errClimb    = &lookupErr{vfs.CodeOutside, "symlink target climbs above the root"}
	errTooLarge = &lookupErr{vfs.CodeTooLarge, "larger than the maximum file size (WithMaxFileSize)"}
)

// Readlink returns the target of symlink p as stored. An absolute target, which
// could only have been planted on the host, is never shown: it fails with
// path_outside_sandbox.
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
	if strings.HasPrefix(target, "/") {
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
// symlinked host path does not match.
func (f *FS) HostLinkTarget(ctx context.Context, p vfs.Path) (vfs.Path, bool, error) {
	const op = "readlink"
	if p.IsRoot() || p.MustBeDir() {
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
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
	case unix.S_IFREG:
		if st.Nlink > 1 {
			unix.Close(fd)
			return -1, errShared
		}
	default:
		unix.Close(fd)
		return -1, errNotRegular
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

// chmodEmptyPath and utimesEmptyPath act on the object an O_PATH handle names;
// tests replace them to take the fallbacks of older kernels.
var (
	chmodEmptyPath = func(fd int, mode uint32) error {
		return unix.Fchmodat(fd, "", mode, unix.AT_EMPTY_PATH)
	}
	utimesEmptyPath = func(fd int, ts []unix.Timespec) error {
		return unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH)
	}
)

func procFd(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// procFallback turns the failure of a /proc fallback for want of /proc into
// not_supported.
func procFallback(err error) error {
	if err == unix.ENOENT {
		return &lookupErr{vfs.CodeNotSupported, "needs fchmodat2/utimensat with AT_EMPTY_PATH or a mounted /proc"}
	}
	return err
}

// Sub returns the backend rooted at directory p: a new directory handle, opened
// now beneath this root. Later renames of p do not redirect it, and its symlinks
// resolve beneath it. It has the same options; close it independently (or let it
// be collected).
func (f *FS) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	const op = "sub"
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return nil, err
	}
	defer f.leave()
	fd, err := f.lookupP(ctx, root, p, unix.O_PATH|unix.O_DIRECTORY, 0, true)
	if err != nil {
		return nil, wrap(op, p, err)
	}
	sub, err := newFS(f.cfg, fd, "")
	if err != nil {
		unix.Close(fd)
		return nil, wrap(op, p, err)
	}
	sub.portable.Store(f.portable.Load())
	sub.procfd = f.procfd
	sub.origin = f.origin
	if sub.origin == nil {
		sub.origin = f
	}
	return sub, nil
}

// baseName is the Info.Name of p.
func baseName(p vfs.Path) string {
	if p.IsRoot() {
		return "."
	}
	return p.Base()
}

// infoOf converts a stat result. ID is the inode number, mixed with the device
// number for objects on another filesystem than the root's; the owner is
// st_uid and st_gid.
func infoOf(st *unix.Stat_t, name string, rootDev uint64) vfs.Info {
	id := st.Ino
	if st.Dev != rootDev {
		id ^= bits.RotateLeft64(st.Dev, 40)
	}
	return vfs.Info{
		Name:       name,
		Size:       st.Size,
		Mode:       fileMode(st.Mode),
		ModTime:    time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
		ChangeTime: time.Unix(st.Ctim.Sec, st.Ctim.Nsec),
		Nlink:      int(st.Nlink),
		ID:         id,
		HasOwner:   true,
		Uid:        int(st.Uid),
		Gid:        int(st.Gid),
	}
}

// fileMode converts st_mode as package os does.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// readDirFd lists the open directory fd with getdents64, sorted by name. d_type
// gives each entry's type; where the filesystem does not say, fstatat on the
// directory handle does (never a path). A name no vfs.Path can hold is left
// out and reported to ctx's vfs.WithUnaddressable function.
func readDirFd(ctx context.Context, fd int) ([]vfs.DirEntry, error) {
	buf := make([]byte, 32<<10)
	var out []vfs.DirEntry
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			break
		}
		for off := 0; off+19 <= n; {
			ino := binary.NativeEndian.Uint64(buf[off:])
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen == 0 || off+reclen > n {
				return nil, unix.EIO
			}
			typ := buf[off+18]
			nameb := buf[off+19 : off+reclen]
			if i := slices.Index(nameb, 0); i >= 0 {
				nameb = nameb[:i]
			}
			off += reclen
			name := string(nameb)
			if ino == 0 || name == "." || name == ".." {
				continue
			}
			if why := vfs.NameProblem(name); why != "" {
				vfs.NoteUnaddressable(ctx, vfs.Unaddressable{Name: name, Reason: why})
				continue
			}
			t, ok := direntType(fd, name, typ)
			if !ok {
				continue // gone since the listing was read
			}
			out = append(out, vfs.DirEntry{Name: name, Type: t})
		}
	}
	slices.SortFunc(out, func(a, b vfs.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func direntType(dir int, name string, typ byte) (fs.FileMode, bool) {
	switch typ {
	case unix.DT_REG:
		return 0, true
	case unix.DT_DIR:
		return fs.ModeDir, true
	case unix.DT_LNK:
		return fs.ModeSymlink, true
	case unix.DT_FIFO:
		return fs.ModeNamedPipe, true
	case unix.DT_SOCK:
		return fs.ModeSocket, true
	case unix.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice, true
	case unix.DT_BLK:
		return fs.ModeDevice, true
	}
	var st unix.Stat_t
	if err := lstatAt(dir, name, &st); err != nil {
		return 0, false
	}
	return fileMode(st.Mode).Type(), true
}
