package gitree

import (
	"context"
	"io"
	"io/fs"
	"os"

	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/capfs/capfs/internal/cowview"
	"github.com/capfs/capfs/vfs"
)

// The overlay's merged view is package cowview's, over the base revision: this
// file is what it needs of a git tree. A lower entry is a node (mode and object
// id); the zero node is no tree. A submodule is shown as a directory: once
// materialized it becomes an empty up directory that pins the submodule's commit
// (cowview.Node.Pin) while it stays empty. A base file, symlink or submodule that
// is only moved is kept as a reference (not up) to its object. Symlinks the
// overlay creates live in their node (git has no hard links), and a failed
// copy-up's memory entry is removed with the operation's own context.

// unode is one entry of an overlay's merged view.
type unode = cowview.Node[node]

// gitLower is the base revision as the lower tree of the merged view.
type gitLower struct{ base *FS }

var _ cowview.Lower[node] = gitLower{}

// view is the merged view of an Overlay, or of a Sub of one.
type view = cowview.View[node]

func newView(base *FS, cfg cowview.Config) (*cowview.Tree[node], *view) {
	cfg.InoPrefix = "f"
	cfg.BaseTime = base.modTime
	cfg.NoLinks = "git overlays have no hard links"
	return cowview.New[node](gitLower{base}, cfg, base.root)
}

func (l gitLower) Entries(_ context.Context, lo node) ([]string, []node, error) {
	if lo.hash.IsZero() {
		return nil, nil, nil
	}
	d, err := l.base.r.loadDir(lo)
	if err != nil {
		return nil, nil, err
	}
	return d.names, d.nodes, nil
}

func (gitLower) Type(lo node) fs.FileMode { return typeOf(lo) }

func (l gitLower) Target(lo node) (string, error) { return treeView{l.base.r}.Target(lo) }

func (l gitLower) Info(op string, p vfs.Path, lo node, name string) (vfs.Info, error) {
	return l.base.info(op, p, lo, name)
}

func (l gitLower) Open(ctx context.Context, op string, p vfs.Path, lo node, _ string) (vfs.File, error) {
	lf := &FS{r: l.base.r, root: lo, modTime: l.base.modTime}
	f, err := lf.OpenFile(ctx, vfs.Root, os.O_RDONLY, 0)
	if err != nil {
		return nil, vfs.Readdress(err, op, p.String(), "")
	}
	return f, nil
}

func (gitLower) CopyPerm(lo node) fs.FileMode {
	if lo.mode == filemode.Executable {
		return 0o755
	}
	return 0o644
}

func (l gitLower) CopyData(_ context.Context, op string, p vfs.Path, lo node, w io.Writer) error {
	data, err := l.base.r.readBlob(lo.hash)
	if err != nil {
		return vfs.Errno(op, p, err)
	}
	_, err = w.Write(data)
	return err
}

// Materialized turns a submodule into an empty directory remembering the
// commit it pins.
func (gitLower) Materialized(n *unode) {
	if n.Lo.mode == filemode.Submodule {
		n.Pin = n.Lo
		n.Lo = node{}
	}
}

func (gitLower) DirSys(n *unode) any {
	switch {
	case !n.Lo.hash.IsZero():
		return &Entry{Kind: "tree", ID: n.Lo.hash.String()}
	case !n.Pin.hash.IsZero():
		return &Entry{Kind: "submodule", ID: n.Pin.hash.String()}
	}
	return nil
}

func (gitLower) LookupErr(err error) error { return err }

func (gitLower) ResolveErr(err error, _ string, _ vfs.Path) error { return err }

func (gitLower) LowerErr(op string, p vfs.Path, err error) error { return vfs.Errno(op, p, err) }
