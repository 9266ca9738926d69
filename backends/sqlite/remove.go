package sqlite

import (
	"context"
	"io/fs"
	"time"

	"github.com/capfs/capfs/vfs"
)

// Remove removes a file, symlink or empty directory, as one operation. Open
// handles on a removed file keep working; its data goes with the last one.
func (f *FS) Remove(ctx context.Context, p vfs.Path) error {
	const op = "remove"
	st := f.st
	return st.mutate(ctx, op, p, func() (*batch, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		r, err := f.lookupEntry(ctx, p, op)
		if err != nil {
			return nil, err
		}
		if err := vfs.CheckRemove(op, p, r, fullDir); err != nil {
			return nil, err
		}
		n := r.Node
		now := st.now()
		n.mu.Lock()
		defer n.mu.Unlock()
		b, err := st.exec(op, p, func() error {
			w := st.w
			if err := w.x(w.delDentry, r.Parent.ino, r.Name); err != nil {
				return err
			}
			if err := w.x(w.setMtime, now.Unix(), now.Nanosecond(), r.Parent.ino); err != nil {
				return err
			}
			return st.unlinkSQL(n)
		})
		if err != nil {
			return nil, err
		}
		r.Parent.link2mtime(now)
		r.Parent.unlink(r.Name, n)
		st.reserve(-entryCharge(r.Name))
		st.unlinked(n)
		return b, nil
	})
}

func (d *node) link2mtime(now time.Time) {
	d.mu.Lock()
	d.mtime = now
	d.mu.Unlock()
}

// unlinkSQL writes the statements for one name of n going away: the inode and
// its data go with its last name unless a handle holds it (then it stays, with
// no name, until the last Close or the next Open). Inside writer.exec; the
// caller holds the tree lock for writing and n.mu.
func (s *store) unlinkSQL(n *node) error {
	w := s.w
	nlink, opens := n.nlink-1, n.opens
	if n.typ == fs.ModeDir {
		nlink = 0
	}
	if nlink > 0 || opens > 0 {
		return w.x(w.setNlink, max(nlink, 0), n.ino)
	}
	return s.deleteInodeSQL(n.ino)
}

func (s *store) deleteInodeSQL(ino int64) error {
	w := s.w
	if err := w.x(w.delInode, ino); err != nil {
		return err
	}
	return w.x(w.delChunks, ino<<chunkBits, (ino+1)<<chunkBits-1)
}

// unlinked applies to memory what unlinkSQL wrote. The caller holds the tree
// lock for writing and n.mu.
func (s *store) unlinked(n *node) {
	if n.typ == fs.ModeDir {
		n.gone = true
		n.parent = nil
		s.reserve(-NodeCharge)
		return
	}
	n.nlink--
	if n.nlink <= 0 && n.opens == 0 && !n.freed {
		n.freed = true
		s.reserve(-nodeCharge(n) - n.size*boolInt(n.typ == 0))
	}
}
