package overlay

import (
	"context"
	"time"

	"github.com/capfs/capfs/vfs"
)

var (
	_ vfs.LinkTimer = (*Overlay)(nil)
	_ vfs.StatFSer  = (*Overlay)(nil)
	_ vfs.LinkTimer = (*sub)(nil)
	_ vfs.StatFSer  = (*sub)(nil)
)

// Lchtimes sets the times of p's own entry, a symlink itself included (see
// [vfs.LinkTimer]): p is copied up, then its copy's times are set. With both
// times zero it changes nothing, and copies nothing up.
func (o *Overlay) Lchtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	p, err := o.atEntry(ctx, "lchtimes", p)
	if err != nil {
		return err
	}
	if atime.IsZero() && mtime.IsZero() {
		_, err := o.Lstat(ctx, p)
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.copyUp(ctx, p, false); err != nil {
		return err
	}
	return vfs.Lchtimes(ctx, o.upper, p, atime, mtime)
}

// StatFS reports the upper directory's storage, where every change lands
// (see [vfs.StatFSer]). It fails as Stat of p would.
func (o *Overlay) StatFS(ctx context.Context, p vfs.Path) (vfs.FSStat, error) {
	if _, err := o.Stat(ctx, p); err != nil {
		return vfs.FSStat{}, vfs.ReaddressTo(err, "statfs", p)
	}
	return vfs.StatFS(ctx, o.upper, vfs.Path{})
}

// Lchtimes is the overlay's Lchtimes beneath the Sub's root.
func (s *sub) Lchtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	q, err := s.atEntry(ctx, "lchtimes", p)
	if err != nil {
		return err
	}
	return vfs.ReaddressTo(s.o.Lchtimes(ctx, q, atime, mtime), "lchtimes", p)
}

// StatFS reports the overlay's storage.
func (s *sub) StatFS(ctx context.Context, p vfs.Path) (vfs.FSStat, error) {
	q, err := s.at(ctx, "statfs", p, true)
	if err != nil {
		return vfs.FSStat{}, err
	}
	st, err := s.o.StatFS(ctx, q)
	return st, vfs.ReaddressTo(err, "statfs", p)
}
