package sqlite

import (
	"context"
	"io/fs"
	"time"

	"github.com/capfs/capfs/vfs"
)

// WriteFile sets the whole content of file p to data as one operation, in one
// transaction: a reader, or the file after a crash, sees the old content or the
// new, never a mix or an empty file. A missing p is created with perm (through a
// final symlink too, as OpenFile with O_CREATE); an existing file keeps its inode,
// links and permission bits, and its open handles see the new content. It is the
// atomic replace that a temporary file, Sync and Rename achieve elsewhere, at the
// cost of one commit.
func (f *FS) WriteFile(ctx context.Context, p vfs.Path, data []byte, perm fs.FileMode) error {
	const op = "write"
	st := f.st
	if int64(len(data)) > st.maxSize() {
		return vfs.NewError(vfs.CodeTooLarge, op, p, "")
	}
	return st.mutate(ctx, op, p, func() (*batch, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		r, err := f.resolve(ctx, p, true, op)
		if err != nil {
			return nil, err
		}
		now := st.now()
		if r.Found {
			return st.replaceData(r.Node, data, now, op, p)
		}
		if p.MustBeDir() {
			return nil, vfs.NewError(vfs.CodeIsDir, op, p, "cannot create a file with a trailing slash")
		}
		if err := canCreate(r, op, p); err != nil {
			return nil, err
		}
		return st.createWith(r, data, perm, now, op, p)
	})
}

// replaceData replaces the contents of file n with data as one operation.
// The caller holds the tree lock for writing.
func (s *store) replaceData(n *node, data []byte, now time.Time, op string, p vfs.Path) (*batch, error) {
	if n.typ == fs.ModeDir {
		return nil, vfs.NewError(vfs.CodeIsDir, op, p, "")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	w := s.w
	size := int64(len(data))
	delta := size - n.size
	if !n.freed && !s.reserve(delta) {
		return nil, quotaError(op, p)
	}
	b, err := s.exec(op, p, func() error {
		if err := w.x(w.delChunks, n.ino<<chunkBits, (n.ino+1)<<chunkBits-1); err != nil {
			return err
		}
		if err := s.putData(n.ino, data); err != nil {
			return err
		}
		return w.x(w.setSize, size, now.Unix(), now.Nanosecond(), n.ino)
	})
	if err != nil {
		if !n.freed {
			s.reserve(-delta)
		}
		return nil, err
	}
	n.size, n.mtime, n.dirty = size, now, w.execSeq.Load()
	return b, nil
}

// createWith creates the missing file r names with perm and contents data,
// as one operation. The caller holds the tree lock for writing.
func (s *store) createWith(r vfs.Resolution[*node], data []byte, perm fs.FileMode, now time.Time, op string, p vfs.Path) (*batch, error) {
	w := s.w
	size := int64(len(data))
	charge := entryCharge(r.Name) + NodeCharge + size
	if !s.reserve(charge) {
		return nil, quotaError(op, p)
	}
	n := newNode(s.nextIno.Add(1), 0, perm, now)
	n.size = size
	d := r.Parent
	b, err := s.exec(op, p, func() error {
		if err := w.x(w.insInode, n.ino, unixMode(0, n.perm), 1, size, now.Unix(), now.Nanosecond(), nil); err != nil {
			return err
		}
		if err := w.x(w.insDentry, d.ino, r.Name, n.ino); err != nil {
			return err
		}
		if err := s.putData(n.ino, data); err != nil {
			return err
		}
		return w.x(w.setMtime, now.Unix(), now.Nanosecond(), d.ino)
	})
	if err != nil {
		s.reserve(-charge)
		return nil, err
	}
	n.dirty = w.execSeq.Load()
	d.link(r.Name, n)
	d.link2mtime(now)
	return b, nil
}

// putData writes data as the chunks of inode ino (which has none). Inside
// writer.exec.
func (s *store) putData(ino int64, data []byte) error {
	for idx := int64(0); idx*s.chunk < int64(len(data)); idx++ {
		end := min((idx+1)*s.chunk, int64(len(data)))
		if err := s.w.x(s.w.putChunk, ino<<chunkBits|idx, data[idx*s.chunk:end]); err != nil {
			return err
		}
	}
	return nil
}
