package physical

import (
	"context"
	"io/fs"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

var (
	_ vfs.LinkTimer = (*FS)(nil)
	_ vfs.StatFSer  = (*FS)(nil)
	_ vfs.AttrFile  = (*file)(nil)
)

// Lchtimes sets the times of p's own entry, a symlink itself included
// ([vfs.LinkTimer]); a zero time is left unchanged. Intermediate symlinks are
// followed beneath the root.
//
// As Lchown, it acts on the O_PATH handle the resolution opened (utimensat
// with AT_EMPTY_PATH, which does not follow the handle's link), never on a
// name looked up again. A regular file or symlink with other hard links is
// refused with fs_permission_denied and FIFOs, sockets and devices with
// not_regular_file, as for Chtimes.
func (f *FS) Lchtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	const op = "lchtimes"
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return err
	}
	defer f.leave()
	fd, err := f.lookupP(ctx, root, p, unix.O_PATH, 0, false)
	if err != nil {
		return wrap(op, p, err)
	}
	defer unix.Close(fd)
	if err := ownEntry(fd); err != nil {
		return wrap(op, p, err)
	}
	err = utimesEmptyPath(fd, []unix.Timespec{timespec(atime), timespec(mtime)})
	if err == unix.EINVAL || err == unix.ENOENT {
		// No AT_EMPTY_PATH for utimensat, and /proc's link would be followed.
		err = &lookupErr{vfs.CodeNotSupported, "setting a symlink's times needs utimensat with AT_EMPTY_PATH"}
	}
	return wrap(op, p, err)
}

// ownEntry checks that the object handle fd names is one whose own status
// may change: a directory, or a regular file or symlink with no other hard
// link (which could lie outside the root).
func ownEntry(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
	case unix.S_IFREG, unix.S_IFLNK:
		if st.Nlink > 1 {
			return errShared
		}
	default:
		return errNotRegular
	}
	return nil
}

// StatFS reports the host file system that holds the root (fstatfs of the
// root's handle, [vfs.StatFSer]): its size and the bytes and inodes an
// unprivileged process may still use. p must exist; a mount beneath the root
// is not told apart.
func (f *FS) StatFS(ctx context.Context, p vfs.Path) (vfs.FSStat, error) {
	const op = "statfs"
	if _, err := f.Stat(ctx, p); err != nil {
		return vfs.FSStat{}, vfs.Readdress(err, op, p.String(), "")
	}
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return vfs.FSStat{}, err
	}
	defer f.leave()
	var s unix.Statfs_t
	if err := eintr(func() error { return unix.Fstatfs(root, &s) }); err != nil {
		return vfs.FSStat{}, wrap(op, p, err)
	}
	bs := s.Bsize
	if s.Frsize > 0 {
		bs = s.Frsize
	}
	return vfs.FSStat{
		Total: int64(s.Blocks) * bs, Free: int64(s.Bavail) * bs,
		Files: int64(s.Files), FreeFiles: int64(s.Ffree),
	}, nil
}

// Chmod sets the permission and sticky bits of the file h opened, whatever
// names it has now ([vfs.AttrFile], fchmod). setuid and setgid are refused
// (fs_permission_denied), and so is a file with other hard links, as for
// [FS.Chmod].
func (h *file) Chmod(mode fs.FileMode) error {
	const op = "fchmod"
	if mode&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		return h.fail(vfs.CodePermission, op, "setuid and setgid bits are not allowed")
	}
	fd, err := h.enter(op, false, false)
	if err != nil {
		return err
	}
	defer h.leave()
	if err := ownEntry(fd); err != nil {
		return h.err(op, err)
	}
	return h.err(op, eintr(func() error { return unix.Fchmod(fd, createMode(mode)) }))
}

// Chtimes sets the times of the file h opened, whatever names it has now
// ([vfs.AttrFile], futimens); a zero time is left unchanged. A file with
// other hard links is refused, as for [FS.Chtimes].
func (h *file) Chtimes(atime, mtime time.Time) error {
	const op = "futimens"
	fd, err := h.enter(op, false, false)
	if err != nil {
		return err
	}
	defer h.leave()
	if err := ownEntry(fd); err != nil {
		return h.err(op, err)
	}
	return h.err(op, utimesEmptyPath(fd, []unix.Timespec{timespec(atime), timespec(mtime)}))
}
