//go:build !linux

package physical

import (
	"context"
	"io/fs"
	"time"

	"github.com/capfs/capfs/vfs"
)

// FS is a host directory served as a [vfs.Backend]. This build has no implementation:
// the backend needs Linux (openat2, O_PATH, renameat2), and New fails with
// not_supported.
type FS struct{}

var (
	_ vfs.Backend    = (*FS)(nil)
	_ vfs.HostPather = (*FS)(nil)
)

// New fails with not_supported on this operating system, saying why. The
// error names no host path (root is the caller's own).
func New(root string, opts ...Option) (*FS, error) {
	return nil, vfs.NewError(vfs.CodeNotSupported, "physical.New", vfs.Root,
		"the physical backend (host directories) needs Linux for now (openat2, O_PATH); see docs/portability.md")
}

func unsupported(op string, p vfs.Path) error {
	return vfs.NewError(vfs.CodeNotSupported, op, p, "the physical backend needs Linux")
}

// Close does nothing.
func (f *FS) Close() error { return nil }

// HostPath reports no path.
func (f *FS) HostPath() (string, bool) { return "", false }

// HostLinkTarget is not available on this platform.
func (f *FS) HostLinkTarget(ctx context.Context, p vfs.Path) (vfs.Path, bool, error) {
	return vfs.Path{}, false, nil
}

// Features reports nothing supported.
func (f *FS) Features() vfs.Features { return vfs.Features{} }

// Stat fails with not_supported.
func (f *FS) Stat(_ context.Context, p vfs.Path) (vfs.Info, error) {
	return vfs.Info{}, unsupported("stat", p)
}

// Lstat fails with not_supported.
func (f *FS) Lstat(_ context.Context, p vfs.Path) (vfs.Info, error) {
	return vfs.Info{}, unsupported("lstat", p)
}

// ReadDir fails with not_supported.
func (f *FS) ReadDir(_ context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	return nil, unsupported("readdir", p)
}

// OpenFile fails with not_supported.
func (f *FS) OpenFile(_ context.Context, p vfs.Path, _ int, _ fs.FileMode) (vfs.File, error) {
	return nil, unsupported("open", p)
}

// Mkdir fails with not_supported.
func (f *FS) Mkdir(_ context.Context, p vfs.Path, _ fs.FileMode) error {
	return unsupported("mkdir", p)
}

// Remove fails with not_supported.
func (f *FS) Remove(_ context.Context, p vfs.Path) error { return unsupported("remove", p) }

// Rename fails with not_supported.
func (f *FS) Rename(_ context.Context, from, _ vfs.Path, _ vfs.RenameFlags) error {
	return unsupported("rename", from)
}

// Symlink fails with not_supported.
func (f *FS) Symlink(_ context.Context, _ string, p vfs.Path) error {
	return unsupported("symlink", p)
}

// Readlink fails with not_supported.
func (f *FS) Readlink(_ context.Context, p vfs.Path) (string, error) {
	return "", unsupported("readlink", p)
}

// Link fails with not_supported.
func (f *FS) Link(_ context.Context, oldp, _ vfs.Path) error { return unsupported("link", oldp) }

// Chmod fails with not_supported.
func (f *FS) Chmod(_ context.Context, p vfs.Path, _ fs.FileMode) error {
	return unsupported("chmod", p)
}

// Chtimes fails with not_supported.
func (f *FS) Chtimes(_ context.Context, p vfs.Path, _, _ time.Time) error {
	return unsupported("chtimes", p)
}

// Sub fails with not_supported.
func (f *FS) Sub(_ context.Context, p vfs.Path) (vfs.Backend, error) {
	return nil, unsupported("sub", p)
}

// Resolve fails with not_supported.
func (f *FS) Resolve(_ context.Context, p vfs.Path, _ bool) (vfs.Location, error) {
	return vfs.Location{}, unsupported("resolve", p)
}

// Locate fails with not_supported.
func (f *FS) Locate(_ context.Context) (vfs.Path, error) {
	return vfs.Path{}, unsupported("locate", vfs.Root)
}
