package rofile

import (
	"context"
	"io/fs"
	"time"

	"github.com/capfs/capfs/vfs"
)

// Message names a read-only backend in its refusals: ReadOnlyMessage returns
// the text writes fail with ("git revision is read-only").
type Message interface{ ReadOnlyMessage() string }

// Immutable refuses every mutation of the Backend SPI with read_only (Mkdir,
// Remove, Rename, Symlink, Link, Chmod, Chtimes), addressed to the paths given.
// A read-only backend embeds its zero value; M supplies the message.
type Immutable[M Message] struct{}

// Refuse is the read_only error of op on p, with M's message.
func (Immutable[M]) Refuse(op string, p vfs.Path) error {
	var m M
	return vfs.NewError(vfs.CodeReadOnly, op, p, m.ReadOnlyMessage())
}

func (i Immutable[M]) refuse2(op string, from, to vfs.Path) error {
	e := i.Refuse(op, from).(*vfs.Error)
	e.Dest = to.String()
	return e
}

// Mkdir fails with read_only.
func (i Immutable[M]) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	return i.Refuse("mkdir", p)
}

// Remove fails with read_only.
func (i Immutable[M]) Remove(ctx context.Context, p vfs.Path) error { return i.Refuse("remove", p) }

// Rename fails with read_only.
func (i Immutable[M]) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	return i.refuse2("rename", from, to)
}

// Symlink fails with read_only.
func (i Immutable[M]) Symlink(ctx context.Context, target string, p vfs.Path) error {
	return i.Refuse("symlink", p)
}

// Link fails with read_only.
func (i Immutable[M]) Link(ctx context.Context, oldp, newp vfs.Path) error {
	return i.refuse2("link", oldp, newp)
}

// Chmod fails with read_only.
func (i Immutable[M]) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	return i.Refuse("chmod", p)
}

// Chtimes fails with read_only.
func (i Immutable[M]) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	return i.Refuse("chtimes", p)
}
