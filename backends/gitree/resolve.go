package gitree

import (
	"context"

	"github.com/capfs/capfs/vfs"
)

// Resolve returns the canonical location of p in the revision (see
// vfs.Backend.Resolve). A revision is immutable, so the location stays true.
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

// Resolve returns the canonical location of p in the overlay.
func (o *Overlay) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	return o.v.Resolve(ctx, p, follow)
}

// Resolve returns the canonical location of p in the view, without copying
// anything up.
func (v *view) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	const op = "resolve"
	if err := v.enter(ctx, op, p); err != nil {
		return vfs.Location{}, err
	}
	v.s.mu.RLock()
	defer v.s.mu.RUnlock()
	_, loc, err := vfs.ResolveLocation[*unode](ctx, ovTree{v.s, false}, v.root, p, follow, op)
	return loc, err
}

// Locate returns the view's root's current path in the overlay, after renames
// made since Sub pinned it (a view of the whole overlay is at the root);
// not_found once the directory was removed.
func (v *view) Locate(ctx context.Context) (vfs.Path, error) {
	if err := v.enter(ctx, "locate", vfs.Root); err != nil {
		return vfs.Path{}, err
	}
	v.s.mu.RLock()
	defer v.s.mu.RUnlock()
	var names []string
	n := v.root
	for n.parent != nil {
		name, ok := "", false
		for k, c := range n.parent.ents {
			if c == n {
				name, ok = k, true
				break
			}
		}
		if !ok {
			return vfs.Path{}, vfs.NewError(vfs.CodeNotFound, "locate", vfs.Root, "the directory was removed")
		}
		names = append(names, name)
		n = n.parent
	}
	if n.gone {
		return vfs.Path{}, vfs.NewError(vfs.CodeNotFound, "locate", vfs.Root, "the directory was removed")
	}
	p := vfs.Root
	for i := len(names) - 1; i >= 0; i-- {
		var err error
		if p, err = p.Child(names[i]); err != nil {
			return vfs.Path{}, err
		}
	}
	return p, nil
}
