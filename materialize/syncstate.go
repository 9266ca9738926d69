//go:build linux

package materialize

import (
	"context"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize/internal/hostfs"
)

// This file holds what sync-back (syncback.Run) needs of a Tree: its
// source, its checkout's files, the bounded scan, and the two pieces of state
// a sync changes (the Manifest's base, and whether Close keeps the checkout).

// Source returns the Dir the checkout was made from: the one every change
// syncs back through.
func (t *Tree) Source() *dir.Dir { return t.src }

// ReadOnly reports whether the checkout was made with Options.ReadOnly: a
// sync-back then applies nothing.
func (t *Tree) ReadOnly() bool { return t.opts.ReadOnly }

// DiffWithin is Diff bounded by lim (negative fields are off): it stops at the
// change that crosses a limit and returns it as hit, with the changes found up
// to it (unsorted). hit is nil when every change is within lim.
func (t *Tree) DiffWithin(ctx context.Context, lim Limits) (changes []Change, hit *LimitHit, err error) {
	if err := t.Live("diff"); err != nil {
		return nil, nil, err
	}
	return t.scan(ctx, lim)
}

// ReadFile reads the checkout's regular file rel (never following a link,
// never opening anything else) and checks that it still has want's size and
// digest: a conflict error when it does not.
func (t *Tree) ReadFile(rel string, want *Entry) ([]byte, error) {
	return hostfs.ReadChecked(t.rootFd, rel, want.Size, want.Digest)
}

// Keep makes Close leave the checkout directory in place, for the host to
// inspect it (a bound checkout is never removed anyway). It cannot be undone.
func (t *Tree) Keep() {
	t.mu.Lock()
	t.keepUser = true
	t.mu.Unlock()
}

// Kept reports whether Close will leave the checkout directory in place: Keep
// was called, or the last sync-back left changes unapplied (SetSyncKept).
func (t *Tree) Kept() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.created && (t.keepUser || t.keepSync)
}

// SetSyncKept records whether the last sync-back left changes unapplied:
// true keeps the checkout at Close, false lets Close remove it again (Keep's
// mark stays). Only syncback.Run calls it.
func (t *Tree) SetSyncKept(v bool) {
	t.mu.Lock()
	t.keepSync = v
	t.mu.Unlock()
}

// Advance records changes applied to the source in the Manifest, so that the
// next Diff or sync-back starts from the state the source now has. Only
// syncback.Run calls it, with no other call on the Tree running. Their files are marked
// racy: the next Diff re-reads them rather than trust a stat taken now.
func (t *Tree) Advance(applied []Change) {
	m := t.manifest
	for _, c := range applied {
		if c.Kind == Deleted {
			delete(m.Entries, c.Path)
			delete(m.stat, c.Path)
			continue
		}
		m.Entries[c.Path] = *c.New
		delete(m.stat, c.Path)
		if c.New.IsRegular() {
			m.stat[c.Path] = statKey{racy: true}
		}
	}
}
