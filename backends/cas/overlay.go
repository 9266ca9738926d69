package cas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
)

// Overlay is a writable vfs.Backend over a tree of a Store: it starts as the
// tree, takes every write, and Commit stores what it holds then and returns the
// new root digest. The base tree is never changed (it is immutable); the store
// gains only the blobs and directories that differ.
//
// It is a memory backend (package memory, whose semantics and conformance it
// shares: hard links, Chmod, Chtimes, O_APPEND, independent offsets) filled with
// the tree when it is opened: every directory, link and file content is copied
// into memory then (at most DefaultMaxEntries entries), so an overlay suits trees
// that fit in memory. (The git
// overlay's per-path copy-up, which reads only what is touched, is not done here.)
// Commit records what a Directory can: names, contents, the owner-execute bit of
// files, link targets; other permission bits, times and hard links are not kept.
// All methods are safe for concurrent use.
type Overlay struct {
	*memory.FS
	st   *Store
	base Digest
}

// OpenOverlay opens a writable overlay over the tree whose root Directory is
// root, with the memory backend's options (quota, file size limit) applying to
// the copy. A tree the options do not admit fails with quota_exceeded or
// file_too_large.
func (s *Store) OpenOverlay(ctx context.Context, root Digest, opts ...memory.Option) (*Overlay, error) {
	src, err := s.Mount(ctx, root, timeZero)
	if err != nil {
		return nil, err
	}
	m := memory.New(opts...)
	budget := DefaultMaxEntries
	if err := copyInto(ctx, src, m, vfs.Root, &budget); err != nil {
		return nil, err
	}
	return &Overlay{FS: m, st: s, base: root}, nil
}

// copyInto copies directory p of src into m, at most *budget entries (a tree
// can share a directory under many names: see MaterializeOptions.MaxEntries).
func copyInto(ctx context.Context, src *FS, m *memory.FS, p vfs.Path, budget *int) error {
	ents, err := src.ReadDir(ctx, p)
	if err != nil {
		return err
	}
	if *budget -= len(ents); *budget < 0 {
		return vfs.NewError(vfs.CodeQuota, "open", p, fmt.Sprintf("the tree has more than %d entries", DefaultMaxEntries))
	}
	for _, e := range ents {
		cp, err := p.Child(e.Name)
		if err != nil {
			return err
		}
		switch e.Type {
		case fs.ModeDir:
			if err := m.Mkdir(ctx, cp, 0o755); err != nil {
				return err
			}
			if err := copyInto(ctx, src, m, cp, budget); err != nil {
				return err
			}
		case fs.ModeSymlink:
			t, err := src.Readlink(ctx, cp)
			if err != nil {
				return err
			}
			if err := m.Symlink(ctx, t, cp); err != nil {
				return err
			}
		default:
			info, err := src.Lstat(ctx, cp)
			if err != nil {
				return err
			}
			in, err := src.OpenFile(ctx, cp, os.O_RDONLY, 0)
			if err != nil {
				return err
			}
			out, err := m.OpenFile(ctx, cp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode.Perm())
			if err == nil {
				_, err = io.Copy(out, in)
				if cerr := out.Close(); err == nil {
					err = cerr
				}
			}
			in.Close()
			if err != nil {
				var ve *vfs.Error
				if !errors.As(err, &ve) {
					err = vfs.NewError(vfs.CodeIO, "open", cp, err.Error())
				}
				return err
			}
		}
	}
	return nil
}

// Base returns the root digest the overlay was opened on, or the last one Commit
// returned.
func (o *Overlay) Base() Digest { return o.base }

// Commit stores the overlay's current tree and returns its root digest, which
// becomes Base. The overlay stays open and writable. Writes made while Commit
// runs may or may not be in the result, each file whole or not at all. The
// result is pinned for the store's grace period (see GC) and, with name, saved
// as that root.
func (o *Overlay) Commit(ctx context.Context, name string) (Digest, error) {
	d, err := o.st.SnapshotBackend(ctx, o.FS, SnapshotOptions{Name: name})
	if err != nil {
		return Digest{}, err
	}
	o.base = d
	return d, nil
}
