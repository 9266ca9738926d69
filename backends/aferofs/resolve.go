package aferofs

import (
	"context"

	"github.com/capfs/capfs/vfs"
)

// Resolve returns the canonical location of p (see vfs.Backend.Resolve). afero has
// no handles, so a Sub of this backend is lexical and needs no Locate.
func (b *Backend) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	const op = "resolve"
	if err := canceled(ctx, op, p); err != nil {
		return vfs.Location{}, err
	}
	b.s.mu.RLock()
	defer b.s.mu.RUnlock()
	_, loc, err := vfs.ResolveLocation[node](ctx, tree{b.s}, node{p: b.root}, p, follow, op)
	return loc, err
}
