package memory

import (
	"context"
	"hash/maphash"
	"sync/atomic"

	"github.com/capfs/capfs/vfs"
)

// Resolving a path costs one map lookup per component (see walk), so deep paths
// dominate lookup-heavy workloads (build trees, node_modules). The store memoizes
// resolutions of deep paths in a small direct-mapped cache: every answer still
// comes from FS.resolve (walk, or vfs.Resolve), and an entry is only used while the
// tree generation it was computed at is current. The generation advances on every change
// to any directory's entries (store.addEntry, store.delEntry), which are the only
// changes that can alter a resolution: node types and symlink targets never change.

const (
	cacheSlots    = 1024 // entries per store, direct-mapped
	cacheMinDepth = 4    // shallower paths walk about as fast as a cache probe
)

type resCache [cacheSlots]atomic.Pointer[cacheEntry]

// cacheEntry is immutable once published.
type cacheEntry struct {
	gen    uint64
	root   *node
	p      vfs.Path
	follow bool
	res    vfs.Resolution[*node]
}

var cacheSeed = maphash.MakeSeed()

// deep reports whether path s has at least cacheMinDepth components.
func deep(s string) bool {
	slashes := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			if slashes++; slashes == cacheMinDepth-1 {
				return true
			}
		}
	}
	return false
}

// lookup is FS.resolve, memoized for deep paths. Only found results are cached.
// The caller holds store.mu for reading; callers holding it for writing use
// resolve, since they are about to change the generation.
func (f *FS) lookup(ctx context.Context, p vfs.Path, follow bool, op string) (vfs.Resolution[*node], error) {
	if !deep(p.Raw()) {
		if r, ok := walk(f.root, p, follow); ok {
			return r, nil
		}
		return vfs.Resolve[*node](ctx, tree{}, f.root, p, follow, op)
	}
	return f.lookupDeep(ctx, p, follow, op)
}

// lookupDeep is lookup on a path known to be deep.
func (f *FS) lookupDeep(ctx context.Context, p vfs.Path, follow bool, op string) (vfs.Resolution[*node], error) {
	c := f.st.cache.Load()
	if c == nil {
		f.st.cache.CompareAndSwap(nil, new(resCache))
		c = f.st.cache.Load()
	}
	h := maphash.String(cacheSeed, p.Raw()) ^ (f.root.id * 0x9e3779b97f4a7c15)
	if follow {
		h = ^h
	}
	slot := &c[h%cacheSlots]
	gen := f.st.gen
	if e := slot.Load(); e != nil && e.gen == gen && e.root == f.root && e.p == p && e.follow == follow {
		return e.res, nil
	}
	r, err := f.resolve(ctx, p, follow, op)
	if err == nil && r.Found {
		slot.Store(&cacheEntry{gen: gen, root: f.root, p: p, follow: follow, res: r})
	}
	return r, err
}
