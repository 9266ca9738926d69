package memory

import (
	"context"

	"github.com/capfs/capfs/vfs"
)

// Resolve returns the canonical location of p (see vfs.Backend.Resolve).
func (f *FS) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	const op = "resolve"
	if err := ctx.Err(); err != nil {
		return vfs.Location{}, canceled(op, p, err)
	}
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	if r, ok := walk(f.root, p, follow); ok {
		// No symlink on the way: p is its own canonical path.
		loc := vfs.Location{Path: p.Resolved(), Found: r.Found}
		if r.Found {
			loc.Type = r.Node.typ
		}
		return loc, nil
	}
	_, loc, err := vfs.ResolveLocation[*node](ctx, tree{}, f.root, p, follow, op)
	return loc, err
}

// ResolveStat is Resolve and, when the entry is found, what Stat (follow) or
// Lstat would report for it, from one walk under one lock (vfs.StatResolver): a
// Dir with a policy answers a Stat from the lookup it decided on.
func (f *FS) ResolveStat(ctx context.Context, p vfs.Path, follow bool) (loc vfs.Location, info vfs.Info, err error) {
	const op = "resolve"
	if err := ctx.Err(); err != nil {
		return vfs.Location{}, vfs.Info{}, canceled(op, p, err)
	}
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	// The answer is built in the results (an Info returned by value through
	// calls is copied at each).
	var n *node
	var name string
	if _, wn, wname, ok := walkTo(f.root, p, follow); ok {
		// No symlink on the way: p is its own canonical path.
		loc = vfs.Location{Path: p.Resolved(), Found: wn != nil}
		if wn != nil {
			loc.Type = wn.typ
		}
		n, name = wn, wname
	} else {
		var r vfs.Resolution[*node]
		if r, loc, err = vfs.ResolveLocation[*node](ctx, tree{}, f.root, p, follow, op); err != nil {
			return vfs.Location{}, vfs.Info{}, err
		}
		if r.Found {
			n, name = r.Node, r.Name
			if r.Followed {
				name = p.Base()
			}
		}
	}
	if n == nil {
		return loc, vfs.Info{}, nil
	}
	if name == "" {
		name = "."
	}
	n.infoTo(&info, name)
	return loc, info, nil
}

// Locate returns the current path of this FS's root from the root of the FS New
// returned, following renames made since Sub pinned it; not_found once the
// directory was removed.
func (f *FS) Locate(ctx context.Context) (vfs.Path, error) {
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	if l := f.located.Load(); l != nil && l.gen == f.st.gen {
		return l.p, nil
	}
	p, err := f.locate()
	if err == nil {
		f.located.Store(&location{gen: f.st.gen, p: p})
	}
	return p, err
}

// locate is Locate's answer, walked up from root. The caller holds store.mu.
func (f *FS) locate() (vfs.Path, error) {
	var names []string
	for n := f.root; n != f.origin; n = n.dir.parent {
		if n == nil || n.dir.gone {
			return vfs.Path{}, vfs.NewError(vfs.CodeNotFound, "locate", vfs.Root, "the directory was removed")
		}
		names = append(names, n.dir.name)
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
