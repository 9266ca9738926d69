//go:build linux

package fuseexport

// watchRevocation drops what the kernel caches of the mount once the
// exported Dir is revoked: every entry, attribute and page it holds, of the
// nodes in the tree and of files open with no name left. The next stat,
// lookup or read of an open file then reaches the Dir, which refuses it. A
// write lock needs nothing: writes always reach the Dir. The notifications
// are sent from the server's invalidation goroutine, never the host's: the
// host does not wait for them (dir.Dir.HostChanges), so they land just after
// Revoke returns, not within AttrTimeout. changes is the Dir's HostChanges,
// taken before the mount served anything.
func (s *Server) watchRevocation(changes <-chan struct{}, stop func()) {
	defer stop()
	for !s.d.Revoked() {
		select {
		case <-s.done:
			return
		case <-changes:
		}
	}
	<-s.Invalidate("/")
	for _, n := range s.opens.nodes() {
		n.NotifyContent(0, 0)
	}
}

// nodes returns the nodes with open files.
func (t *openTable) nodes() []*node {
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := make([]*node, 0, len(t.byNode))
	for n := range t.byNode {
		ns = append(ns, n)
	}
	return ns
}
