//go:build linux

package fuseexport

import "sync"

// openTable holds every open handle of every node of one server. Linux
// sends a SETATTR with the file handle only for ftruncate: an fchmod or futimens names the
// inode alone. For a node whose name is gone (unlinked, or renamed over) the
// open file is then the only way to it, and Setattr finds it here.
type openTable struct {
	mu     sync.Mutex
	byNode map[*node][]*handle
	nodeOf map[*handle]*node
}

// add records h, just opened on n.
func (t *openTable) add(n *node, h *handle) {
	h.opens = t
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byNode == nil {
		t.byNode, t.nodeOf = map[*node][]*handle{}, map[*handle]*node{}
	}
	t.byNode[n] = append(t.byNode[n], h)
	t.nodeOf[h] = n
}

// remove forgets h (released, or its open failed).
func (t *openTable) remove(h *handle) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.nodeOf[h]
	if !ok {
		return
	}
	delete(t.nodeOf, h)
	hs := t.byNode[n]
	for i, x := range hs {
		if x == h {
			hs = append(hs[:i], hs[i+1:]...)
			break
		}
	}
	if len(hs) == 0 {
		delete(t.byNode, n)
		return
	}
	t.byNode[n] = hs
}

// any returns one open handle of n, or nil.
func (t *openTable) any(n *node) *handle {
	t.mu.Lock()
	defer t.mu.Unlock()
	if hs := t.byNode[n]; len(hs) > 0 {
		return hs[0]
	}
	return nil
}
