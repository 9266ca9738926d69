package vfs

import (
	"context"
	"errors"
	"io/fs"
)

// DirInfo is one entry of a listing with its status (see [DirInfoReader]).
// The status is what Lstat of the entry reports, or the error it fails with (a
// policy's refusal, say). Name is always set. Mode always holds at least the
// entry's type bits as ReadDir lists them. The other fields are set only when
// Err is nil.
type DirInfo struct {
	Info
	Err error
}

// DirInfoReader is implemented by backends that list a directory with the
// status of every entry in one pass. The physical backend makes one fstatat per
// entry, relative to the directory it opened.
//
// ReadDirInfo returns, sorted by name, the entries ReadDir(p) lists. Each holds
// what Lstat of p/name reports (never following a symlink), or the error that
// Lstat gives, in Err. An entry removed between the listing and its status is
// left out. The call fails only where ReadDir(p) would. The function
// [ReadDirInfo] falls back when a backend lacks it.
//
// It serves layers that need every entry's status (snapshots, tree walks,
// long listings). Without it they make one lookup per entry from the
// backend's root.
type DirInfoReader interface {
	ReadDirInfo(ctx context.Context, p Path) ([]DirInfo, error)
}

// ReadDirInfo lists directory p of b with every entry's status.
// It calls b's own ReadDirInfo when b is a [DirInfoReader]. Otherwise it calls
// ReadDir and an Lstat of each entry, which is what every DirInfoReader must
// answer.
func ReadDirInfo(ctx context.Context, b Backend, p Path) ([]DirInfo, error) {
	if r, ok := b.(DirInfoReader); ok {
		return r.ReadDirInfo(ctx, p)
	}
	return readDirInfoEach(ctx, b, p)
}

// ReadDir lists directory p of b, as b.ReadDir does.
// It has [ReadDirInfo]'s signature, for code that lists with either.
func ReadDir(ctx context.Context, b Backend, p Path) ([]DirEntry, error) { return b.ReadDir(ctx, p) }

// readDirInfoEach is ReadDirInfo as ReadDir and an Lstat per entry.
func readDirInfoEach(ctx context.Context, b Backend, p Path) ([]DirInfo, error) {
	ents, err := b.ReadDir(ctx, p)
	if err != nil {
		return nil, err
	}
	dir := p.WithoutDirMark()
	out := make([]DirInfo, 0, len(ents))
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
			info = Info{Mode: e.Type & fs.ModeType}
		}
		info.Name = e.Name
		out = append(out, DirInfo{Info: info, Err: err})
	}
	return out, nil
}

// ReadDirInfo lists directory p with every entry's status (see [DirInfoReader]).
// It goes through the mount's backend in one pass when p lies inside a mount
// with no mount beneath it, and that backend is a DirInfoReader. Otherwise it
// makes a ReadDir and an Lstat per entry, so mount points and synthetic
// directories report what Lstat reports of them.
func (n *Namespace) ReadDirInfo(ctx context.Context, p Path) ([]DirInfo, error) {
	t := n.table()
	l := t.locate(p)
	if l.kind == kindInMount && !t.shadowing[l.m] {
		if r, ok := l.m.b.(DirInfoReader); ok {
			if infos, err := r.ReadDirInfo(ctx, l.rel); err == nil {
				dir := p.WithoutDirMark()
				for i := range infos {
					if infos[i].Err != nil {
						c, _ := dir.Child(infos[i].Name)
						infos[i].Err = ReaddressTo(infos[i].Err, "lstat", c)
					}
				}
				return infos, nil
			}
			// A failure (a link leaving the mount, which the namespace may
			// follow back in) takes the general way, which addresses errors
			// as ReadDir and Lstat do.
		}
	}
	return readDirInfoEach(ctx, n, p)
}

// ReadDirInfo forwards to the wrapped backend (see [ReadDirInfo]). It only
// reads.
func (r *readOnlyBackend) ReadDirInfo(ctx context.Context, p Path) ([]DirInfo, error) {
	return ReadDirInfo(ctx, r.b, p)
}

// ReadDirInfo forwards to the wrapped backend (see [ReadDirInfo]).
func (b *locatedBackend) ReadDirInfo(ctx context.Context, p Path) ([]DirInfo, error) {
	return ReadDirInfo(ctx, b.Backend, p)
}
