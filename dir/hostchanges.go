package dir

import "sync"

// watchers are the channels a gate tree tells of each host change.
type watchers struct {
	mu  sync.Mutex
	chs map[chan struct{}]struct{}
}

// tell sends on every channel that has no value waiting: the host never
// blocks on a watcher.
func (w *watchers) tell() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.chs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// HostChanges returns a channel that receives a value after each Revoke or
// SetWritable on any Control of the tree d descends from (d's own, an
// ancestor's, another branch's), once the change is in force for every call
// that starts afterwards (calls already running may finish).
// Values are coalesced: one may stand for several changes. The host never
// waits for the receiver. stop ends the sends; the channel is not closed.
// A FUSE export uses it to drop what the kernel caches once d is revoked.
func (d *Dir) HostChanges() (ch <-chan struct{}, stop func()) {
	w := &d.s.gate.tree.watchers
	c := make(chan struct{}, 1)
	w.mu.Lock()
	if w.chs == nil {
		w.chs = map[chan struct{}]struct{}{}
	}
	w.chs[c] = struct{}{}
	w.mu.Unlock()
	var once sync.Once
	return c, func() {
		once.Do(func() {
			w.mu.Lock()
			delete(w.chs, c)
			w.mu.Unlock()
		})
	}
}

// Revoked reports whether d is revoked: by its Control, or an ancestor's.
// Every call on d then fails with revoked.
func (d *Dir) Revoked() bool { return d.s.gate.isRevoked() }
