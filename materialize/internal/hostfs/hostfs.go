//go:build linux

package hostfs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/capfs/capfs/vfs"
	"golang.org/x/sys/unix"
)

const resolveNoLinks = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openat2State: 0 untried, 1 works, 2 unavailable (use the component walk).
var openat2State atomic.Int32

// OpenBeneath opens rel ("" or "." for root itself) beneath the directory handle
// root without following any symlink. O_NOFOLLOW and O_CLOEXEC are always added.
func OpenBeneath(root int, rel string, flags int, mode uint32) (int, error) {
	if rel == "" {
		rel = "."
	}
	flags |= unix.O_CLOEXEC | unix.O_NOFOLLOW
	if openat2State.Load() != 2 {
		how := &unix.OpenHow{Flags: uint64(flags), Mode: uint64(mode), Resolve: resolveNoLinks}
		for i := 0; ; i++ {
			fd, err := unix.Openat2(root, rel, how)
			if err == unix.EINTR || (err == unix.EAGAIN && i < 64) {
				continue
			}
			if err == unix.ENOSYS || (err == unix.EPERM && openat2State.Load() == 0) {
				openat2State.Store(2)
				break
			}
			if err == nil {
				openat2State.Store(1)
			}
			return fd, err
		}
	}
	return openWalk(root, rel, flags, mode)
}

// openWalk is [OpenBeneath] without openat2: every intermediate component is opened
// with O_PATH|O_DIRECTORY|O_NOFOLLOW relative to the previous one.
func openWalk(root int, rel string, flags int, mode uint32) (int, error) {
	elems := strings.Split(rel, "/")
	cur := root
	for _, e := range elems[:len(elems)-1] {
		if e == "." || e == "" {
			continue
		}
		if e == ".." {
			if cur != root {
				unix.Close(cur)
			}
			return -1, unix.EXDEV
		}
		fd, err := OpenatRetry(cur, e, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if cur != root {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur = fd
	}
	last := elems[len(elems)-1]
	if last == ".." {
		if cur != root {
			unix.Close(cur)
		}
		return -1, unix.EXDEV
	}
	fd, err := OpenatRetry(cur, last, flags, mode)
	if cur != root {
		unix.Close(cur)
	}
	return fd, err
}

func OpenatRetry(dirfd int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// ParentOf opens rel's parent directory beneath root (as an O_PATH handle) and
// returns it with rel's last element. The caller closes the handle.
func ParentOf(root int, rel string) (int, string, error) {
	dir, name := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	fd, err := OpenBeneath(root, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	return fd, name, err
}

// MkdirBeneath creates directory rel beneath root with mode.
func MkdirBeneath(root int, rel string, mode uint32) error {
	pfd, name, err := ParentOf(root, rel)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return unix.Mkdirat(pfd, name, mode)
}

// SymlinkBeneath creates symlink rel beneath root with the given target text.
func SymlinkBeneath(root int, target, rel string) error {
	pfd, name, err := ParentOf(root, rel)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return unix.Symlinkat(target, pfd, name)
}

// ReadlinkAt returns the target of symlink name in directory dirfd.
func ReadlinkAt(dirfd int, name string) (string, error) {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
	return "", unix.ENAMETOOLONG
}

// TypeOf returns the fs type bits and the permission-plus-special bits of st.
func TypeOf(st *unix.Stat_t) (typ, mode fs.FileMode) {
	m := vfs.FileModeOf(st.Mode)
	return m.Type(), m &^ fs.ModeType
}

// BufPool holds copy and hash buffers.
var BufPool = sync.Pool{New: func() any { b := make([]byte, 128<<10); return &b }}

// OpenRegularAt opens name in dirfd for reading, without following it and
// without blocking on a special file, and checks that it is the regular file
// want describes (same inode); want may be nil.
func OpenRegularAt(dirfd int, name string, want *unix.Stat_t) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := OpenatRetry(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, st, err
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, st, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, st, ErrNotRegular
	}
	if want != nil && (st.Ino != want.Ino || st.Dev != want.Dev) {
		unix.Close(fd)
		return nil, st, ErrChanged
	}
	return os.NewFile(uintptr(fd), name), st, nil
}

var (
	ErrNotRegular = errors.New("not a regular file")
	ErrChanged    = errors.New("changed while being read")
)

// HashFile returns the hex SHA-256 of r's contents and their length.
func HashFile(r io.Reader) (string, int64, error) {
	bp := BufPool.Get().(*[]byte)
	defer BufPool.Put(bp)
	h := sha256.New()
	n, err := io.CopyBuffer(h, r, *bp)
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// Entry is one entry met by [Walk].
type Entry struct {
	Rel    string
	St     unix.Stat_t
	Dirfd  int    // the directory holding it (valid during the callback only)
	Name   string // its name in dirfd
	Target string // symlink target
}

// Walk walks the tree beneath the directory handle root in lexical order,
// calling fn for every entry (not the root). Nothing is followed: a directory
// is entered by opening its name with O_NOFOLLOW|O_DIRECTORY relative to its
// parent's handle, so a directory swapped for a symlink is not entered. fn
// returning fs.SkipDir skips a directory's contents. maxDepth > 0 bounds the
// depth entered; deeper directories are reported but not entered.
// [WalkParallel] (parwalk.go) is the same walk with the directory reads done
// ahead on worker goroutines; [RemoveTree] stays on this one, because its callback
// must make a directory searchable before the walk opens it.
func Walk(root int, maxDepth int, fn func(e *Entry) error) error {
	fd, err := OpenatRetry(root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	return walkDir(fd, "", 0, maxDepth, fn)
}

func walkDir(fd int, rel string, depth, maxDepth int, fn func(e *Entry) error) error {
	f := os.NewFile(uintptr(fd), "dir")
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return err
	}
	defer f.Close()
	sort.Strings(names)
	for _, name := range names {
		var e Entry
		ok, err := statEntry(&e, fd, rel, name)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		err = fn(&e)
		if err == fs.SkipDir {
			continue
		}
		if err != nil {
			return err
		}
		if e.St.Mode&unix.S_IFMT != unix.S_IFDIR || (maxDepth > 0 && depth+1 >= maxDepth) {
			continue
		}
		if err := walkSubdir(fd, &e, depth+1, maxDepth, fn); err != nil {
			return err
		}
	}
	return nil
}

// walkSubdir walks the directory e of the directory open as fd, at depth;
// one replaced meanwhile is not entered.
func walkSubdir(fd int, e *Entry, depth, maxDepth int, fn func(e *Entry) error) error {
	cfd, err := OpenatRetry(fd, e.Name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOTDIR || err == unix.ELOOP || err == unix.ENOENT {
		return nil // replaced meanwhile: not entered
	}
	if err != nil {
		return err
	}
	return walkDir(cfd, e.Rel, depth, maxDepth, fn)
}

// statEntry fills e with entry name of the directory open as fd (at rel, ""
// for the root): its lstat and, for a symlink, its target. It reports false,
// without an error, for an entry gone meanwhile.
func statEntry(e *Entry, fd int, rel, name string) (bool, error) {
	*e = Entry{Dirfd: fd, Name: name, Rel: name}
	if rel != "" {
		e.Rel = rel + "/" + name
	}
	if err := unix.Fstatat(fd, name, &e.St, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return false, nil
		}
		return false, err
	}
	if e.St.Mode&unix.S_IFMT == unix.S_IFLNK {
		var err error
		if e.Target, err = ReadlinkAt(fd, name); err != nil {
			return false, err
		}
	}
	return true, nil
}

// PrivateMount reports whether dir is a checkout directory with a tmpfs of its
// own mounted on it ([MountPrivate]): named capfs-checkout-*, a tmpfs, on another
// device than its parent.
func PrivateMount(dir string) bool {
	if !strings.HasPrefix(filepath.Base(dir), "capfs-checkout-") {
		return false
	}
	var sfs unix.Statfs_t
	var st, pst unix.Stat_t
	return unix.Statfs(dir, &sfs) == nil && sfs.Type == unix.TMPFS_MAGIC &&
		unix.Lstat(dir, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR &&
		unix.Stat(filepath.Dir(dir), &pst) == nil && st.Dev != pst.Dev
}

// RemoveTree removes the directory at host path dir and everything beneath it
// (a private checkout's tmpfs unmounted first),
// never following a symlink. Directories a sandboxed process left without
// write or search permission are made accessible first.
func RemoveTree(dir string) error {
	if PrivateMount(dir) {
		// A private checkout's tmpfs (Options.Private) goes with its contents;
		// the directory beneath it is empty.
		if err := UnmountPrivate(dir); err != nil {
			return err
		}
	}
	err := os.RemoveAll(dir)
	if err == nil {
		return nil
	}
	fd, oerr := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if oerr != nil {
		return err
	}
	_ = unix.Fchmod(fd, 0o700)
	_ = Walk(fd, 0, func(e *Entry) error {
		if e.St.Mode&unix.S_IFMT == unix.S_IFDIR {
			chmodDirAt(e.Dirfd, e.Name, 0o700)
		}
		return nil
	})
	unix.Close(fd)
	return os.RemoveAll(dir)
}

// chmodDirAt sets the mode of directory name in dirfd without following a
// symlink: it opens the name with O_PATH|O_NOFOLLOW|O_DIRECTORY (which needs no
// permission on the directory itself) and changes the inode that handle names.
func chmodDirAt(dirfd int, name string, mode uint32) {
	fd, err := OpenatRetry(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	_ = unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), mode, 0)
}

// MountPrivate mounts a tmpfs of its own on the new, empty checkout directory
// p when Options.Private asks for one, the base is itself a tmpfs (the checkout
// is in memory either way) and this process may mount (root). A bind of the
// checkout then shows "/" as its root in the sandbox's mountinfo rather than
// the directory's path. It reports whether it mounted.
func MountPrivate(p string) bool {
	var sfs unix.Statfs_t
	if unix.Statfs(filepath.Dir(p), &sfs) != nil || sfs.Type != unix.TMPFS_MAGIC {
		return false
	}
	return unix.Mount("capfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700") == nil
}

// UnmountPrivate detaches the tmpfs [MountPrivate] mounted on p.
func UnmountPrivate(p string) error {
	err := unix.Unmount(p, unix.MNT_DETACH)
	if err == unix.EINVAL || err == unix.ENOENT {
		return nil
	}
	return err
}

// ReadChecked reads the regular file rel of the checkout whose root handle is
// root (never following a link, never opening anything else) and checks that
// it still has size bytes with the hex SHA-256 digest: a conflict error when
// it does not (the checkout changed), addressed to rel.
func ReadChecked(root int, rel string, size int64, digest string) ([]byte, error) {
	const op = "syncback"
	p := vfs.MustParse(rel)
	pfd, name, err := ParentOf(root, rel)
	if err != nil {
		return nil, vfs.Errno(op, p, err)
	}
	defer unix.Close(pfd)
	f, st, err := OpenRegularAt(pfd, name, nil)
	if err != nil {
		if errors.Is(err, ErrNotRegular) {
			return nil, vfs.NewError(vfs.CodeConflict, op, p, "checkout changed during the sync")
		}
		return nil, vfs.Errno(op, p, err)
	}
	defer f.Close()
	if st.Size != size {
		return nil, vfs.NewError(vfs.CodeConflict, op, p, "checkout changed during the sync")
	}
	buf := bytes.NewBuffer(make([]byte, 0, st.Size))
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(h, buf), io.LimitReader(f, size+1)); err != nil {
		return nil, vfs.Errno(op, p, err)
	}
	if int64(buf.Len()) != size || hex.EncodeToString(h.Sum(nil)) != digest {
		return nil, vfs.NewError(vfs.CodeConflict, op, p, "checkout changed during the sync")
	}
	return buf.Bytes(), nil
}
