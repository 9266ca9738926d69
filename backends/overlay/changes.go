package overlay

import (
	"context"
	"io/fs"
	"sort"

	"github.com/capfs/capfs/vfs"
)

// Changes lists what the overlay changed, sorted by path.
// It lists every upper entry: added where the lower had nothing visible,
// modified where it replaced a lower entry. It lists every whiteout as deleted.
// Each carries the [Base] of the lower entry it replaced or removed. A
// directory copied up only to hold a change is left out; one whose mode changed
// is modified.
func (o *Overlay) Changes(ctx context.Context) ([]Change, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.readUnread(ctx)
	var out []Change
	if err := o.upperChanges(ctx, vfs.Path{}, &out); err != nil {
		return nil, err
	}
	for w := range o.whiteout {
		b, ok := o.base[w]
		if !ok {
			continue // an entry the process first found absent: new to it
		}
		out = append(out, Change{Path: w, Kind: "deleted", Base: &b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return dedupeChanges(out), nil
}

// upperChanges appends to out the change of each entry beneath upper
// directory p, recursively (see Changes). o.mu is held.
func (o *Overlay) upperChanges(ctx context.Context, p vfs.Path, out *[]Change) error {
	ents, err := o.upper.ReadDir(ctx, p)
	if err != nil {
		return err
	}
	for _, e := range ents {
		c, err := p.Child(e.Name)
		if err != nil {
			continue
		}
		if ch, ok := o.changeOf(ctx, c, e.Type); ok {
			*out = append(*out, ch)
		}
		if e.Type.IsDir() {
			if err := o.upperChanges(ctx, c, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// changeOf is the change of upper entry c of type typ, if any: added where
// the lower had nothing, modified where it replaced a lower entry; a
// directory copied up with the lower's mode is no change. o.mu is held.
func (o *Overlay) changeOf(ctx context.Context, c vfs.Path, typ fs.FileMode) (Change, bool) {
	b, hasBase := o.base[c.Raw()]
	lowHere := hasBase && !o.whiteout[c.Raw()]
	switch {
	case typ.IsDir() && lowHere && b.Type.IsDir():
		info, err := o.upper.Lstat(ctx, c)
		if err == nil && info.Mode.Perm() != b.Mode && info.Mode.Perm() != b.Mode|0o700 {
			return Change{Path: c.Raw(), Kind: "modified", Base: &b, Type: fs.ModeDir}, true
		}
		return Change{}, false
	case lowHere:
		return Change{Path: c.Raw(), Kind: "modified", Base: &b, Type: typ}, true
	}
	return Change{Path: c.Raw(), Kind: "added", Type: typ}, true
}

// Bases returns a copy of every [Base] the overlay recorded, by path.
//
// There is one for each lower entry it copied up, replaced or removed. There is
// also one for each entry the process saw and the lower lost before the process
// made an entry there. Each is the entry as the process first saw it, whether
// its path still holds it or not. A renamed directory's entries stay under
// their old paths, hidden by a whiteout. With the upper directory it is all a
// sync-back needs. An upper entry without a Base is new. A Base without an
// upper entry at its path was removed.
func (o *Overlay) Bases() map[string]Base {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.readUnread(context.Background())
	out := make(map[string]Base, len(o.base))
	for p, b := range o.base {
		out[p] = b
	}
	return out
}

// dedupeChanges keeps one change per path: a path both whited out and present
// in the upper (replaced by another type) is "modified".
func dedupeChanges(cs []Change) []Change {
	out := cs[:0]
	for i, c := range cs {
		if i > 0 && cs[i-1].Path == c.Path {
			prev := &out[len(out)-1]
			if prev.Kind == "deleted" || c.Kind == "deleted" {
				keep := *prev
				if keep.Kind == "deleted" {
					keep = c
				}
				keep.Kind = "modified"
				if keep.Base == nil {
					keep.Base = prev.Base
				}
				*prev = keep
			}
			continue
		}
		out = append(out, c)
	}
	return out
}
