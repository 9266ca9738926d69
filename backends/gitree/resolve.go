package gitree

import (
	"context"

	"github.com/capfs/capfs/vfs"
)

// Resolve returns the canonical location of p in the revision (see
// [vfs.Backend.Resolve]). A revision is immutable, so the location stays true.
func (f *FS) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	const op = "resolve"
	if err := ctx.Err(); err != nil {
		return vfs.Location{}, &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
	}
	if f.r.closed.Load() {
		return vfs.Location{}, vfs.NewError(vfs.CodeClosed, op, p, "repository closed")
	}
	_, loc, err := vfs.ResolveLocation[node](ctx, treeView{f.r}, f.root, p, follow, op)
	return loc, err
}
