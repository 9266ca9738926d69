//go:build linux

package physical

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"math/bits"
	"os"
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
// HardLinksReject; under HardLinksReplace, with LinkWritesPrivate), Chmod,
// Chtimes and persistence.
func (f *FS) Features() vfs.Features {
	return vfs.Features{
		Symlinks:          f.cfg.symlinks != SymlinksReject,
		HardLinks:         f.cfg.hardLinks != HardLinksReject,
		LinkWritesPrivate: f.cfg.hardLinks == HardLinksReplace,
		Chmod:             true,
		Chtimes:           true,
		Persistent:        true,
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

var (
	errNotRegular = &lookupErr{vfs.CodeNotRegular, "not a regular file or directory"}
	errHardLinked = &lookupErr{vfs.CodePermission, "the file has other hard links (HardLinksReject)"}
	errShared     = &lookupErr{vfs.CodePermission, "the file has other hard links, which may lie outside the root"}
	errChanged    = &lookupErr{vfs.CodeConflict, "the file changed while it was being opened; try again"}
)

var (
	errClimb    = &lookupErr{vfs.CodeOutside, "symlink target climbs above the root"}
	errTooLarge = &lookupErr{vfs.CodeTooLarge, "larger than the maximum file size (WithMaxFileSize)"}
)

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
		Mode:       vfs.FileModeOf(st.Mode),
		ModTime:    time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
		ChangeTime: time.Unix(st.Ctim.Sec, st.Ctim.Nsec),
		Nlink:      int(st.Nlink),
		ID:         id,
		HasOwner:   true,
		Uid:        int(st.Uid),
		Gid:        int(st.Gid),
		HasBlocks:  true,
		Blocks:     st.Blocks,
	}
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
	return vfs.FileModeOf(st.Mode).Type(), true
}
