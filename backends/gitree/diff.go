package gitree

import (
	"context"
	"io"
	"io/fs"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/capfs/capfs/internal/treediff"
	"github.com/capfs/capfs/vfs"
)

// ChangeKind says how one path differs between two trees (see [Change]).
type ChangeKind = treediff.Kind

// The kinds of Change. A path that is a directory on one side and not on the
// other is reported as its files deleted (or added) plus the non-directory
// added (or deleted), as git does.
const (
	Added       = treediff.Added
	Modified    = treediff.Modified
	Deleted     = treediff.Deleted
	TypeChanged = treediff.TypeChanged
	ModeChanged = treediff.ModeChanged
)

// Change is one difference between two trees. It is a leaf (file, symlink or
// submodule) added, deleted or changed, with its modes and git object ids.
type Change = treediff.Change

// MaxDiffBytes is the largest file [UnifiedDiff] reads for a text diff.
const MaxDiffBytes = treediff.MaxBytes

// Diff compares two revisions tree against tree and returns every changed
// leaf, sorted by path. Subtrees whose ids are equal are skipped without
// being read, so the cost is proportional to what changed. a and b may come
// from different Opens, of the same or different repositories. Each side
// reads its own object store.
func Diff(ctx context.Context, a, b *FS) ([]Change, error) {
	return treediff.Compare(ctx, diffTree{a.r, a.root}, diffTree{b.r, b.root})
}

// DiffBackends compares any two backends by walking both (see
// [treediff.Backend]). An entry whose Info.Sys is an [*Entry] reports its id.
// A submodule is a leaf compared by the commit it pins.
func DiffBackends(ctx context.Context, a, b vfs.Backend) ([]Change, error) {
	return treediff.Backends(ctx, a, b)
}

// UnifiedDiff writes changes, as returned by Diff or DiffBackends on a and b,
// as "git diff" does (see [treediff.Unified]).
func UnifiedDiff(ctx context.Context, a, b vfs.Backend, changes []Change, w io.Writer) error {
	return treediff.Unified(ctx, a, b, changes, w)
}

// ObjectID is the entry's object id. With Submodule it makes [*Entry] a
// [treediff.Object].
func (e *Entry) ObjectID() string { return e.ID }

// Submodule reports whether the entry is a submodule.
func (e *Entry) Submodule() bool { return e.Kind == "submodule" }

// diffTree is one revision's tree as a [treediff.Tree], read from its object
// store: every entry carries its id.
type diffTree struct {
	r    *repoState
	root node
}

func (t diffTree) List(_ context.Context, path string, d treediff.Entry) ([]treediff.Entry, error) {
	n := t.root
	if path != "" {
		n = node{mode: filemode.Dir, hash: plumbing.NewHash(d.ID)}
	}
	dd, err := t.r.loadDir(n)
	if err != nil {
		return nil, diffErr(path, err)
	}
	out := make([]treediff.Entry, len(dd.names))
	for i, name := range dd.names {
		m := dd.nodes[i]
		out[i] = treediff.Entry{Name: name, Mode: gitMode(m.mode), Dir: m.mode == filemode.Dir, ID: m.hash.String()}
	}
	return out, nil
}

// ObjectID is never needed: List gives every entry's id.
func (diffTree) ObjectID(_ context.Context, _ string, e treediff.Entry) (string, error) {
	return e.ID, nil
}

func gitMode(m filemode.FileMode) fs.FileMode {
	switch m {
	case filemode.Dir, filemode.Submodule:
		return fs.ModeDir | 0o755
	case filemode.Symlink:
		return fs.ModeSymlink | 0o777
	case filemode.Executable:
		return 0o755
	}
	return 0o644
}

func diffErr(path string, err error) error {
	p, perr := vfs.ParseGuest(path)
	if perr != nil || path == "" {
		p = vfs.Path{}
	}
	return vfs.Errno("diff", p, err)
}
