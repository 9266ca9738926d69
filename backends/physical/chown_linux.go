package physical

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

// maxID is the largest owner or group id chown(2) can set: (uid_t)-1 means
// "unchanged", so one below it.
const maxID = 1<<32 - 2

// Chown sets the numeric owner and group of what p reaches, following a final
// symlink beneath the root ([vfs.Chowner]). -1 leaves an id unchanged.
//
// It acts on the handle the resolution opened (fchownat with AT_EMPTY_PATH),
// never on a name looked up again. So nothing swapped in afterwards is changed.
// As for Chmod, a regular file with other hard links (which may lie outside the
// root) is refused with fs_permission_denied. FIFOs, sockets and devices are
// refused with not_regular_file. The host decides who may give a file away. An
// unprivileged process gets fs_permission_denied (EPERM) for anything but
// setting its own ids or one of its groups on its own file. The host clears
// setuid and setgid bits on a chown as chown(2) does.
func (f *FS) Chown(ctx context.Context, p vfs.Path, uid, gid int) error {
	return f.chown(ctx, "chown", p, uid, gid, true)
}

// Lchown is Chown on p's own entry: a final symlink is changed itself, not
// followed (intermediate ones are, beneath the root). A symlink with other
// hard links is refused, as a regular file is.
func (f *FS) Lchown(ctx context.Context, p vfs.Path, uid, gid int) error {
	return f.chown(ctx, "lchown", p, uid, gid, false)
}

func (f *FS) chown(ctx context.Context, op string, p vfs.Path, uid, gid int, follow bool) error {
	if uid < -1 || gid < -1 || uid > maxID || gid > maxID {
		return vfs.NewError(vfs.CodeInvalidPath, op, p, "owner and group ids must lie in [-1, 2^32-2]")
	}
	root, err := f.enter(ctx, op, p)
	if err != nil {
		return err
	}
	defer f.leave()
	fd, err := f.lookupP(ctx, root, p, unix.O_PATH, 0, follow)
	if err != nil {
		return wrap(op, p, err)
	}
	defer unix.Close(fd)
	if err := ownEntry(fd); err != nil {
		return wrap(op, p, err)
	}
	return wrap(op, p, eintr(func() error {
		return unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH)
	}))
}
