package sqlite

import (
	"cmp"
	"context"
	"io/fs"
	"slices"
	"time"

	"github.com/capfs/capfs/vfs"
)

// RemoveAll removes p and everything beneath it as one operation, in one
// transaction: after a crash either all of it is gone or none of it. A final
// symlink is removed, not followed; a missing p is not an error (as with
// os.RemoveAll); the root (of this FS) cannot be removed (invalid_path). Files
// still open keep their data until their last Close. It is what `rm -rf` of a
// large tree (node_modules) costs: one commit, not one per entry.
func (f *FS) RemoveAll(ctx context.Context, p vfs.Path) error {
	const op = "removeall"
	st := f.st
	return st.mutate(ctx, op, p, func() (*batch, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		r, err := f.lookupEntry(ctx, p, op)
		if err != nil {
			if vfs.CodeOf(err) == vfs.CodeNotFound {
				return nil, nil
			}
			return nil, err
		}
		if !r.Found {
			return nil, nil
		}
		if r.Name == "" {
			return nil, vfs.NewError(vfs.CodeInvalidPath, op, p, "cannot remove the root")
		}
		return st.removeTree(ctx, op, p, r)
	})
}

// removal is one entry RemoveAll removes: name in parent, naming n.
type removal struct {
	parent *node
	name   string
	n      *node
}

// removalOrder lists the entry name of d (naming n) and everything beneath
// it, children before their directories.
func removalOrder(d *node, name string, n *node) []removal {
	var ents []removal
	var collect func(d *node, name string, n *node)
	collect = func(d *node, name string, n *node) {
		if n.typ == fs.ModeDir {
			for cn, c := range n.children {
				collect(n, cn, c)
			}
		}
		ents = append(ents, removal{d, name, n})
	}
	collect(d, name, n)
	return ents
}

// removeTree removes r's entry and everything beneath it as one operation.
// The caller holds the tree lock for writing.
func (s *store) removeTree(ctx context.Context, op string, p vfs.Path, r vfs.Resolution[*node]) (*batch, error) {
	ents := removalOrder(r.Parent, r.Name, r.Node)
	if err := ctx.Err(); err != nil {
		return nil, canceled(op, p, err)
	}
	// Every file's lock, in inode order, held across the statements and
	// their application, as Remove holds one (a Close must not slip between).
	var files []*node
	for _, e := range ents {
		if e.n.typ != fs.ModeDir {
			files = append(files, e.n)
		}
	}
	slices.SortFunc(files, func(a, b *node) int { return cmp.Compare(a.ino, b.ino) })
	files = slices.Compact(files)
	for _, n := range files {
		n.mu.Lock()
	}
	defer func() {
		for _, n := range files {
			n.mu.Unlock()
		}
	}()
	now := s.now()
	// A file with several names inside the tree loses them one by one.
	names := map[*node]int{}
	b, err := s.exec(op, p, func() error { return s.removeRows(ents, names, r.Parent.ino, now) })
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		e.parent.unlink(e.name, e.n)
		s.reserve(-entryCharge(e.name))
		s.unlinked(e.n)
	}
	r.Parent.link2mtime(now)
	return b, nil
}

// removeRows deletes the entries' rows: each entry, a directory's inode, a
// file's inode once its last name (counted in names) goes and nothing has it
// open, else its new link count; then it sets the parent's time.
func (s *store) removeRows(ents []removal, names map[*node]int, parentIno int64, now time.Time) error {
	w := s.w
	for _, e := range ents {
		if err := w.x(w.delDentry, e.parent.ino, e.name); err != nil {
			return err
		}
		if e.n.typ == fs.ModeDir {
			if err := s.deleteInodeSQL(e.n.ino); err != nil {
				return err
			}
			continue
		}
		names[e.n]++
		if nlink := e.n.nlink - names[e.n]; nlink > 0 || e.n.opens > 0 {
			if err := w.x(w.setNlink, max(nlink, 0), e.n.ino); err != nil {
				return err
			}
		} else if err := s.deleteInodeSQL(e.n.ino); err != nil {
			return err
		}
	}
	return w.x(w.setMtime, now.Unix(), now.Nanosecond(), parentIno)
}
