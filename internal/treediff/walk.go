package treediff

import (
	"context"
	"io/fs"

	"github.com/capfs/capfs/vfs"
)

// Entry is one name in a directory of a [Tree].
type Entry struct {
	Name string
	// Mode is the mode [Compare] reports for the entry (see [Change]).
	Mode fs.FileMode
	// Dir marks a directory that Compare descends into. A submodule is a
	// leaf whose Mode is a directory's.
	Dir bool
	// ID is the git object id in hex, or "" when the tree does not know it.
	// Entries with equal ids and modes are equal; a directory's id covers
	// its whole subtree, which is then not listed.
	ID string

	info vfs.Info // [Backend]'s Lstat of the entry
}

// Tree is one side of [Compare].
type Tree interface {
	// List returns the entries of directory d at path, sorted by name. The
	// root is path "" with d an Entry{Dir: true}.
	List(ctx context.Context, path string, d Entry) ([]Entry, error)
	// ObjectID returns the object id of leaf e at path when List gave none:
	// the blob id of a file or symlink, "" for other types.
	ObjectID(ctx context.Context, path string, e Entry) (string, error)
}

// Compare walks a and b together and returns every changed leaf, sorted by
// path. Names are matched per directory. A subtree whose id is the same on
// both sides is skipped unread. So for trees that carry ids, the cost is
// proportional to what changed. Leaves without ids are compared by the ids
// their Tree computes. Compare reports no renames (see [Renames]).
func Compare(ctx context.Context, a, b Tree) ([]Change, error) {
	w := walker{ctx: ctx, a: a, b: b}
	root := Entry{Dir: true}
	if err := w.dirs("", root, root); err != nil {
		return nil, err
	}
	sortChanges(w.out)
	return w.out, nil
}

type walker struct {
	ctx  context.Context
	a, b Tree
	out  []Change
}

func (w *walker) canceled(path string) error {
	if err := w.ctx.Err(); err != nil {
		return &vfs.Error{Code: vfs.CodeCanceled, Op: "diff", Path: path, Err: err}
	}
	return nil
}

// dirs compares directory x of a with directory y of b, entry by entry.
func (w *walker) dirs(path string, x, y Entry) error {
	if err := w.canceled(path); err != nil {
		return err
	}
	ex, err := w.a.List(w.ctx, path, x)
	if err != nil {
		return err
	}
	ey, err := w.b.List(w.ctx, path, y)
	if err != nil {
		return err
	}
	i, j := 0, 0
	for i < len(ex) || j < len(ey) {
		switch {
		case j == len(ey) || (i < len(ex) && ex[i].Name < ey[j].Name):
			err = w.entry(joinPath(path, ex[i].Name), &ex[i], nil)
			i++
		case i == len(ex) || ey[j].Name < ex[i].Name:
			err = w.entry(joinPath(path, ey[j].Name), nil, &ey[j])
			j++
		default:
			err = w.entry(joinPath(path, ex[i].Name), &ex[i], &ey[j])
			i++
			j++
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// same reports whether x and y are known equal without reading them.
func same(x, y *Entry) bool {
	return x != nil && y != nil && x.ID != "" && x.ID == y.ID && x.Mode == y.Mode && x.Dir == y.Dir
}

// entry compares what a (x) and b (y) hold at path; nil is absent.
func (w *walker) entry(path string, x, y *Entry) error {
	if same(x, y) {
		return nil
	}
	xd, yd := x != nil && x.Dir, y != nil && y.Dir
	switch {
	case xd && yd:
		return w.dirs(path, *x, *y)
	case xd:
		// A directory replaced by a leaf (or removed): its files go, the leaf comes.
		if err := w.expand(w.a, path, *x, Deleted); err != nil {
			return err
		}
		x = nil
	case yd:
		if x != nil {
			if err := w.leaf(path, x, nil); err != nil {
				return err
			}
		}
		return w.expand(w.b, path, *y, Added)
	}
	if x == nil && y == nil {
		return nil
	}
	return w.leaf(path, x, y)
}

// expand reports every leaf under directory d of t as kind.
func (w *walker) expand(t Tree, path string, d Entry, kind Kind) error {
	if err := w.canceled(path); err != nil {
		return err
	}
	es, err := t.List(w.ctx, path, d)
	if err != nil {
		return err
	}
	for i := range es {
		p, e := joinPath(path, es[i].Name), &es[i]
		switch {
		case e.Dir:
			err = w.expand(t, p, *e, kind)
		case kind == Deleted:
			err = w.leaf(p, e, nil)
		default:
			err = w.leaf(p, nil, e)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// leaf records the change between two non-directory entries (either may be
// absent), if there is one.
func (w *walker) leaf(path string, x, y *Entry) error {
	c := Change{Path: path}
	var err error
	if x != nil {
		c.OldMode = x.Mode
		if c.OldID, err = objectID(w.ctx, w.a, path, x); err != nil {
			return err
		}
	}
	if y != nil {
		c.NewMode = y.Mode
		if c.NewID, err = objectID(w.ctx, w.b, path, y); err != nil {
			return err
		}
	}
	switch {
	case y == nil:
		c.Kind = Deleted
	case x == nil:
		c.Kind = Added
	case c.OldMode.Type() != c.NewMode.Type():
		c.Kind = TypeChanged
	case c.OldID != c.NewID:
		c.Kind = Modified
	case c.OldMode != c.NewMode:
		c.Kind = ModeChanged
	default:
		return nil
	}
	w.out = append(w.out, c)
	return nil
}

func objectID(ctx context.Context, t Tree, path string, e *Entry) (string, error) {
	if e.ID != "" {
		return e.ID, nil
	}
	return t.ObjectID(ctx, path, *e)
}
