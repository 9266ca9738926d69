package memory

import (
	"context"
	"io/fs"

	"github.com/capfs/capfs/vfs"
)

// ReadRegular returns a copy of the contents of the regular file p reaches (a
// final symlink followed), made in one allocation, the result: no handle is
// opened. For an entry that is not a regular file it returns nil data and the
// entry's type (fs.ModeDir, ...); for a file over max bytes, nil data and its
// size; the caller words those errors. Lookup errors are OpenFile's (op
// "open"). It is how a dir.Dir's ReadFile reads a memory file.
func (f *FS) ReadRegular(ctx context.Context, p vfs.Path, max int64) (data []byte, typ fs.FileMode, size int64, err error) {
	const op = "open"
	if err := ctx.Err(); err != nil {
		return nil, 0, 0, canceled(op, p, err)
	}
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	r, err := f.lookup(ctx, p, true, op)
	if err != nil {
		return nil, 0, 0, err
	}
	if !r.Found {
		return nil, 0, 0, vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	n := r.Node
	if n.typ != 0 {
		return nil, n.typ, 0, nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	if size = int64(len(n.data)); size > max {
		return nil, 0, size, nil
	}
	data = make([]byte, size)
	copy(data, n.data)
	return data, 0, size, nil
}

// ResolveKeptStat is ResolveStat's common case answered with the status the
// node keeps (as StatFileInfo answers Stat): when p reaches an entry without
// a symlink on the way (a final one followed only if follow is false), it
// returns p's location and that status, named p's last element, and true.
// Otherwise it returns false and the caller asks ResolveStat. A deep path is
// looked up through the resolution cache, as Stat looks it up, and found
// canonical when the directories holding the entry are named p's elements
// (spells), or without a check while the store has never held a symlink
// (store.links). It is how a dir.Dir with a policy answers Stat without
// building an fs.FileInfo.
func (f *FS) ResolveKeptStat(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, fs.FileInfo, bool) {
	if ctx.Err() != nil {
		return vfs.Location{}, nil, false
	}
	f.st.mu.RLock()
	var n *node
	var name string
	if !deep(p.Raw()) {
		var ok bool
		if _, n, name, ok = walkTo(f.root, p, follow); !ok {
			n = nil
		}
	} else if r, err := f.lookupDeep(ctx, p, follow, "resolve"); err == nil && r.Found && !r.Followed &&
		(!f.st.links.Load() || f.spells(r.Parent, r.Name, p.Raw())) {
		n, name = r.Node, r.Name
	}
	if n == nil {
		f.st.mu.RUnlock()
		return vfs.Location{}, nil, false
	}
	if name == "" {
		name = "."
	}
	fi := n.fileInfo(name)
	f.st.mu.RUnlock()
	return vfs.Location{Path: p.Resolved(), Found: true, Type: n.typ}, fi, true
}

// spells reports whether the entry name in directory parent is at raw (a
// path from f's root, at least one element): its directories, walked up by
// their own names, are raw's elements. Then raw names no symlink on the way,
// and is the entry's canonical path. The caller holds store.mu.
func (f *FS) spells(parent *node, name, raw string) bool {
	end := len(raw)
	if len(name) > end || raw[end-len(name):] != name {
		return false
	}
	end -= len(name)
	for d := parent; ; d = d.dir.parent {
		if end == 0 {
			return d == f.root
		}
		if raw[end-1] != '/' || d == f.root || d.dir == nil {
			return false
		}
		end--
		nm := d.dir.name
		if len(nm) > end {
			return false
		}
		for k := len(nm) - 1; k >= 0; k-- { // short names: no call to memequal
			if end--; raw[end] != nm[k] {
				return false
			}
		}
	}
}

// LinkFree reports whether the store has never held a symlink. Then every
// path is its own canonical path: no lookup of it can follow a link, and ".."
// is already taken lexically by vfs.Path. Once it reports false it always
// does. A dir.Dir with a policy resolves a path of such a store without a
// lookup; the Resolved mark it acts with still refuses a link made since.
func (f *FS) LinkFree() bool { return !f.st.links.Load() }
