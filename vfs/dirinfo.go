package vfs

import (
	"context"
	"errors"
	"io/fs"
)

// DirInfoReader is implemented by backends that can list a directory with the
// status of every entry in one pass (the physical backend: one fstatat per
// entry, relative to the directory it opened). ReadDirInfo returns, sorted by
// name, the entries ReadDir(p) lists, each with what Lstat of p/name reports
// (never following a symlink; Name is the entry's name). An entry removed
// between the listing and its status is left out; any other failure to take an
// entry's status fails the call, with the error Lstat would give. See the
// function ReadDirInfo for the fallback.
//
// It serves layers that need every entry's status (snapshots, tree walks,
// long listings), which would otherwise make one lookup per entry from the
// backend's root.
type DirInfoReader interface {
	ReadDirInfo(ctx context.Context, p Path) ([]Info, error)
}

// ReadDirInfo lists directory p of b with every entry's status: b's own
// ReadDirInfo when b is a DirInfoReader, else ReadDir and an Lstat of each
// entry (which is what every DirInfoReader must answer).
func ReadDirInfo(ctx context.Context, b Backend, p Path) ([]Info, error) {
	if r, ok := b.(DirInfoReader); ok {
		return r.ReadDirInfo(ctx, p)
	}
	return readDirInfoEach(ctx, b, p)
}

// readDirInfoEach is ReadDirInfo as ReadDir and an Lstat per entry.
func readDirInfoEach(ctx context.Context, b Backend, p Path) ([]Info, error) {
	ents, err := b.ReadDir(ctx, p)
	if err != nil {
		return nil, err
	}
	dir := p.WithoutDirMark()
	out := make([]Info, 0, len(ents))
	for _, e := range ents {
		c, err := dir.Child(e.Name)
		if err != nil {
			return nil, err
		}
		info, err := b.Lstat(ctx, c)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, err
		}
		info.Name = e.Name
		out = append(out, info)
	}
	return out, nil
}

// ReadDirInfo lists directory p with every entry's status (see DirInfoReader):
// through the mount's backend in one pass where p lies inside a mount with no
// mount beneath it and that backend is a DirInfoReader, else as ReadDir and an
// Lstat per entry, so mount points and synthetic directories report what Lstat
// reports of them.
func (n *Namespace) ReadDirInfo(ctx context.Context, p Path) ([]Info, error) {
	t := n.table()
	l := t.locate(p)
	if l.kind == kindInMount && !t.shadowing[l.m] {
		if r, ok := l.m.b.(DirInfoReader); ok {
			if infos, err := r.ReadDirInfo(ctx, l.rel); err == nil {
				return infos, nil
			}
			// Failures (a link leaving the mount, which the namespace may
			// follow back in; an entry's status refused) take the general
			// way, which addresses each error as ReadDir and Lstat do.
		}
	}
	return readDirInfoEach(ctx, n, p)
}

// ReadDirInfo forwards to the wrapped backend (see vfs.ReadDirInfo): it only
// reads.
func (r *readOnlyBackend) ReadDirInfo(ctx context.Context, p Path) ([]Info, error) {
	return ReadDirInfo(ctx, r.b, p)
}

// ReadDirInfo forwards to the wrapped backend (see vfs.ReadDirInfo).
func (b *locatedBackend) ReadDirInfo(ctx context.Context, p Path) ([]Info, error) {
	return ReadDirInfo(ctx, b.Backend, p)
}
