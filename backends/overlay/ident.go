package overlay

import (
	"context"
	"sync"

	"github.com/capfs/capfs/vfs"
)

// Identity across copy-up. An entry's [vfs.Info].ID is its inode number
// through a mount (fuseexport numbers an entry by it), so it must not change
// when the overlay copies the entry up: a process (find, tar, git, a
// language server) that compares numbers would take the copy for another
// file, and a hard link made of a lower file would show two numbers. As
// overlayfs's origin (xino, index), the overlay remembers, for each upper
// object it copied from the lower, the lower's ID (origins), and reports it
// for the copy under every name the copy gets (a rename, a hard link). An
// upper object the process made has an ID of its own, mixed apart from the
// lower's (upperID).
//
// The upper's file system may reuse an inode number once its object is
// gone, so an origin is forgotten when its copy loses its last name in the
// upper (forget). A file open then keeps the ID it had (ovFile takes it at
// its open). A lower file with other names (Nlink above 1) gets no origin:
// its other names still show the lower file, which the copy no longer is,
// and two different files must not share a number.

// origins maps the ID of an upper object the overlay copied from the lower
// to the lower's ID.
type origins struct {
	mu sync.RWMutex
	m  map[uint64]uint64
}

// id is the ID upper object raw (the upper's ID) shows: its lower's, or
// one of its own.
func (g *origins) id(raw uint64) uint64 {
	g.mu.RLock()
	low, ok := g.m[raw]
	g.mu.RUnlock()
	if ok {
		return low
	}
	return upperID(raw)
}

// keep records that upper object raw is the copy of lower object low.
func (g *origins) keep(raw, low uint64) {
	if raw == 0 || low == 0 {
		return
	}
	g.mu.Lock()
	if g.m == nil {
		g.m = map[uint64]uint64{}
	}
	g.m[raw] = low
	g.mu.Unlock()
}

// forget drops upper object raw's origin.
func (g *origins) forget(raw uint64) {
	g.mu.Lock()
	delete(g.m, raw)
	g.mu.Unlock()
}

// upperID keeps the upper's own object IDs apart from the lower's.
func upperID(id uint64) uint64 { return vfs.MixID(id ^ 0x5bd1e9955bd1e995) }

// keepOrigin records that upper entry p is the copy of the lower entry
// whose Lstat is low, unless that has other names (see above). o.mu is
// held.
func (o *Overlay) keepOrigin(ctx context.Context, p vfs.Path, low vfs.Info) {
	if low.Nlink > 1 && !low.Mode.IsDir() {
		return
	}
	if up, err := o.upper.Lstat(ctx, p); err == nil {
		o.origin.keep(up.ID, low.ID)
	}
}

// forgetLast forgets the origin of upper entry info (its Lstat), about to
// be removed or replaced, if this is its last name. o.mu is held.
func (o *Overlay) forgetLast(info vfs.Info) {
	if info.Nlink <= 1 || info.Mode.IsDir() {
		o.origin.forget(info.ID)
	}
}
