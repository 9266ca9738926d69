//go:build linux

package physical

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

// Bounds on retries. Each only ever repeats work that is itself bounded.
const (
	// An openat2 that fails with EAGAIN (the kernel saw a rename or mount change
	// anywhere in the system while resolving a "..") is retried at once up to
	// maxAgain times, then, yielding the processor between tries, until againWindow
	// has passed since the first try, at most maxAgainTotal times in all. Then it
	// fails with a typed error.
	maxAgain      = 64
	maxAgainTotal = 4096
	againWindow   = 10 * time.Millisecond
	// maxRaces is how many times the portable resolver restarts a lookup whose
	// final open found the entry changed since the walk checked it.
	maxRaces = 16
	// fdWindow is how many directory fds of a portable walk stay open; deeper
	// ancestors are reopened by name (without following links) when ".." needs them.
	fdWindow = 16
)

// lookupErr is a resolution failure the kernel's errno does not say precisely
// enough. It becomes a [*vfs.Error] addressed to the caller's path.
type lookupErr struct {
	code vfs.Code
	msg  string
}

func (e *lookupErr) Error() string { return string(e.code) + ": " + e.msg }

var (
	errAgain = &lookupErr{vfs.CodeIO, "path resolution kept racing with concurrent renames (EAGAIN); try again"}
	errRaced = &lookupErr{vfs.CodeConflict, "the path kept changing during the lookup; try again"}
	errAbs   = &lookupErr{vfs.CodeOutside, "absolute symlink target"}
	errAbove = &lookupErr{vfs.CodeOutside, "resolution climbs above the root"}
	errLoop  = &lookupErr{vfs.CodeTooManyLinks, "too many levels of symbolic links"}
	// errKernelLoop is classifyLoop's answer to an ELOOP the path does not
	// explain; lookup then opens it with the portable walk.
	errKernelLoop = &lookupErr{vfs.CodeTooManyLinks, "the kernel counted more symbolic links than the path has"}
	errNoSym      = &lookupErr{vfs.CodePermission, "symlinks are not followed here (SymlinksReject)"}
	errXdev       = &lookupErr{vfs.CodeOutside, "path crosses a mount point (WithOneFilesystem)"}
	errMagic      = &lookupErr{vfs.CodeOutside, "path leaves the root through a magic link or escaping symlink"}
	// errResolvedLink: a symlink stands where a Resolved path ([vfs.Path.Resolved])
	// would follow one. The path was resolved before a decision; the link came
	// after it, so nothing is followed and nothing reached.
	errResolvedLink = &lookupErr{vfs.CodeConflict, "a symlink stands on a resolved path (it changed after the decision)"}
)

// wrap turns an error from the resolver or a syscall into the *vfs.Error the SPI
// returns, addressed to p. Host paths never enter: errnos carry none, and
// lookupErr messages are fixed strings.
func wrap(op string, p vfs.Path, err error) error {
	if err == nil {
		return nil
	}
	var le *lookupErr
	if errors.As(err, &le) {
		return vfs.NewError(le.code, op, p, le.msg)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
	}
	return vfs.Errno(op, p, err)
}

// pathArg is p as the resolvers take it: "." for the root, and a trailing slash
// when p must be a directory.
func pathArg(p vfs.Path) string {
	s := p.Raw()
	if s == "" {
		return "."
	}
	if p.MustBeDir() {
		return s + "/"
	}
	return s
}

// resolveFlags returns the RESOLVE_* flags of the configured policies.
func (f *FS) resolveFlags() uint64 {
	r := uint64(unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS)
	if f.cfg.symlinks == SymlinksReject {
		r |= unix.RESOLVE_NO_SYMLINKS
	}
	if f.cfg.oneFS {
		r |= unix.RESOLVE_NO_XDEV
	}
	return r
}

// openat2Call is the openat2 system call; tests replace it to simulate EAGAIN
// storms and seccomp filters.
var openat2Call = unix.Openat2

// openat2 is one openat2 call beneath root, retried on EAGAIN and EINTR a bounded
// number of times.
func openat2(root int, s string, flags int, mode uint32, resolve uint64) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: resolve}
	if flags&(unix.O_CREAT|unix.O_TMPFILE) != 0 {
		how.Mode = uint64(mode)
	}
	var start time.Time
	for i := 0; i < maxAgainTotal; i++ {
		fd, err := openat2Call(root, s, &how)
		switch err {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
		default:
			return fd, err
		}
		switch {
		case i+1 < maxAgain:
		case i+1 == maxAgain:
			start = time.Now()
		case time.Since(start) > againWindow:
			return -1, errAgain
		default:
			runtime.Gosched()
		}
	}
	return -1, errAgain
}

// lookupP is lookup of the guest path p: a Resolved p follows no symlink.
func (f *FS) lookupP(ctx context.Context, root int, p vfs.Path, flags int, mode uint32, follow bool) (int, error) {
	return f.lookup(ctx, root, pathArg(p), flags, mode, follow, p.IsResolved())
}

// lookup opens s beneath root with flags (and mode, for O_CREAT), following a
// final symlink if follow. Every symlink, intermediate or final, resolves beneath
// root; nothing outside root is ever opened. With noSym (a Resolved path) no
// symlink is followed at all: where one would be, the lookup fails with
// errResolvedLink (conflict). It is the one entry point of both resolvers.
func (f *FS) lookup(ctx context.Context, root int, s string, flags int, mode uint32, follow, noSym bool) (int, error) {
	if !f.portable.Load() {
		fl := flags
		if !follow {
			fl |= unix.O_NOFOLLOW
		}
		rf := f.resolveFlags()
		if noSym {
			// The kernel then refuses every symlink with ELOOP, the final one too
			// unless O_PATH|O_NOFOLLOW asks for the link itself (follow false).
			rf |= unix.RESOLVE_NO_SYMLINKS
		}
		fd, err := openat2(root, s, fl, mode, rf)
		switch err {
		case nil:
			return fd, nil
		case unix.EXDEV:
			return -1, f.classifyXdev(root, s, follow)
		case unix.ELOOP:
			if noSym {
				return -1, errResolvedLink
			}
			if err := f.classifyLoop(ctx, root, s, follow); err != errKernelLoop {
				return -1, err
			}
			// The path resolves within vfs.MaxSymlinks: the walk below opens it.
		case unix.ENOSYS:
			if f.cfg.resolver != ResolverAuto {
				return -1, &lookupErr{vfs.CodeNotSupported, "openat2 is not available (WithResolver(ResolverOpenat2))"}
			}
			f.portable.Store(true) // openat2 vanished (a seccomp filter): fall back for good
		default:
			return -1, err
		}
	}
	return f.lookupPortable(ctx, root, s, flags, mode, walkOpts{follow: follow, noSym: noSym})
}

// classifyXdev names the cause of an EXDEV from openat2: with RESOLVE_NO_XDEV it
// may be a mount crossing rather than an escape, which a second resolution
// without that flag (opening nothing but an O_PATH handle, closed at once) tells
// apart.
func (f *FS) classifyXdev(root int, s string, follow bool) error {
	if !f.cfg.oneFS {
		return errAbove
	}
	fl := unix.O_PATH
	if !follow {
		fl |= unix.O_NOFOLLOW
	}
	fd, err := openat2(root, s, fl, 0, f.resolveFlags()&^unix.RESOLVE_NO_XDEV)
	if err == nil {
		unix.Close(fd)
	}
	if err == unix.EXDEV {
		return errAbove
	}
	return errXdev
}

// classifyLoop names the cause of an ELOOP from openat2: a symlink under
// SymlinksReject, too many links, or a magic link (or, racing, an escaping link).
// The portable resolver, which reads link targets itself, tells the last two apart;
// its result only chooses the error code and is never used. A walk that reaches
// an entry other than a symlink within vfs.MaxSymlinks links gives
// errKernelLoop: the kernel's count was not the path's. (It keeps the links
// followed by a lookup in RCU mode that gave up and restarted, so a path of
// exactly 40 links can fail now and then.)
func (f *FS) classifyLoop(ctx context.Context, root int, s string, follow bool) error {
	if f.cfg.symlinks == SymlinksReject {
		return errNoSym
	}
	w, err := f.walk(ctx, root, s, walkOpts{follow: follow})
	if err == nil {
		spurious := w.found && w.st.Mode&unix.S_IFMT != unix.S_IFLNK
		w.close()
		if spurious {
			return errKernelLoop
		}
		return errLoop
	}
	var le *lookupErr
	if errors.As(err, &le) && le.code == vfs.CodeTooManyLinks {
		return errLoop
	}
	return errMagic
}

// procFdDir returns a handle of this process's descriptor directory in procfs
// (/proc/self/fd), opened and verified on first use, or -1 where there is none
// that passes the checks of openProcFdDir. It stays open for the life of the
// process.
var procFdDir = sync.OnceValue(openProcFdDir)

// procRootIno is the inode number of every procfs root (PROC_ROOT_INO).
const procRootIno = 1

// openProcFdDir opens /proc/self/fd as an O_PATH handle and checks that it is what
// it claims: /proc is the root of a procfs mount (its filesystem type is
// PROC_SUPER_MAGIC and its inode number PROC_ROOT_INO), "self/fd" is reached from
// it without crossing a mount or following a magic link (openat2 with
// RESOLVE_NO_XDEV|RESOLVE_NO_MAGICLINKS; no openat2, no handle), the result is
// procfs too, and it lists this process's own descriptors: the entry named after
// the handle's own number leads back to the handle's directory, and reopening
// through it works. Any failure gives -1. It calls unix.Openat2 directly, never
// the openat2Call tests replace.
func openProcFdDir() int {
	root, err := openRetry("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return -1
	}
	defer unix.Close(root)
	var st unix.Stat_t
	if !isProcfs(root) || unix.Fstat(root, &st) != nil || st.Ino != procRootIno {
		return -1
	}
	var fd int
	for {
		fd, err = unix.Openat2(root, "self/fd", &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != unix.EINTR && err != unix.EAGAIN {
			break
		}
	}
	if err != nil {
		return -1
	}
	var self unix.Stat_t
	if !isProcfs(fd) || unix.Fstat(fd, &st) != nil ||
		unix.Fstatat(fd, strconv.Itoa(fd), &self, 0) != nil || self.Dev != st.Dev || self.Ino != st.Ino {
		unix.Close(fd)
		return -1
	}
	// A reopen through it must work too (a security module may refuse opens of
	// magic links): the handle reopens its own directory.
	dfd, err := procReopen(fd, fd, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		unix.Close(fd)
		return -1
	}
	err = unix.Fstat(dfd, &self)
	unix.Close(dfd)
	if err != nil || self.Dev != st.Dev || self.Ino != st.Ino {
		unix.Close(fd)
		return -1
	}
	return fd
}

// isProcfs reports whether fd is on a procfs filesystem.
func isProcfs(fd int) bool {
	var sfs unix.Statfs_t
	for {
		err := unix.Fstatfs(fd, &sfs)
		if err == unix.EINTR {
			continue
		}
		return err == nil && sfs.Type == unix.PROC_SUPER_MAGIC
	}
}

// procReopen opens the object that the O_PATH handle fd names, through its entry in
// the verified descriptor directory procDir (the magic link /proc/self/fd/N): the
// same inode, whatever its path now names, with no second path walk. flags is an
// access mode with O_APPEND, O_SYNC, O_DIRECTORY or O_NOCTTY; never O_CREAT,
// O_TRUNC or O_NOFOLLOW (which would refuse the magic link).
func procReopen(procDir, fd, flags int) (int, error) {
	return openatRetry(procDir, strconv.Itoa(fd), flags|unix.O_CLOEXEC, 0)
}

// readlinkFd reads the target of symlink name in dir (or of dir itself, an O_PATH
// handle of a symlink, when name is "").
func readlinkFd(dir int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dir, name, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
		if size > 2*vfs.MaxPathLen {
			return "", unix.ENAMETOOLONG
		}
	}
}
