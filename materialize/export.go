//go:build linux

package materialize

import (
	"cmp"
	"context"
	"path"
	"sort"
	"strings"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// ExportReport says what Export wrote.
type ExportReport struct {
	// Written lists the changes whose new entry dst now holds, in path order.
	Written []Change
	// Deleted lists the paths the checkout removed: a copy of what changed
	// cannot express a removal, so they are listed only.
	Deleted []Change
	// Refused lists the changes Export would not write: special files,
	// absolute or escaping symlinks, and the calls dst refused.
	Refused []Refusal
}

// Export writes the checkout's changes (see Diff) into dst, a Dir holding
// nothing the changes depend on (typically an empty output directory): each
// added or modified regular file (read back from the checkout and checked
// against the digest Diff computed), each new directory, and each symlink whose
// target is relative and stays inside the tree, at its path, with its
// permission bits (setuid, setgid and sticky stripped), through dst, so dst's
// policy and audit apply. A file whose contents are unchanged but whose mode or
// type changed is written too; a time alone (Touched) is not. Deletions are
// listed, not applied. It is meant for a checkout whose source cannot take the
// changes back (a git revision, a memory tree about to vanish).
//
// lim bounds what is written as for a sync-back (a zero field: the default).
// Export stops at the first error dst returns other than a refusal
// (fs_permission_denied, invalid_path), and returns it with what it wrote so far.
func (t *Tree) Export(ctx context.Context, dst *dir.Dir, lim Limits) (*ExportReport, error) {
	const op = "export"
	if err := t.Live(op); err != nil {
		return nil, err
	}
	lim = lim.WithDefaults()
	changes, hit, err := t.scan(ctx, lim)
	if err != nil {
		return nil, err
	}
	rep := &ExportReport{}
	if hit != nil {
		rep.Refused = append(rep.Refused, Refusal{hit.Change, vfs.CodeQuota, hit.Reason})
		return rep, vfs.NewError(vfs.CodeQuota, op, vfs.MustParse(hit.Change.Path), hit.Reason)
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Path < changes[j].Path })
	refusedDirs := map[string]bool{}
	for _, c := range changes {
		if err := ctx.Err(); err != nil {
			return rep, vfs.Errno(op, vfs.Root, err)
		}
		if c.Kind == Deleted {
			rep.Deleted = append(rep.Deleted, c)
			continue
		}
		if c.Kind == Touched || c.New == nil || inRefusedDir(c.Path, refusedDirs) {
			continue
		}
		r, werr := t.exportEntry(ctx, dst, c)
		switch {
		case r != nil:
			rep.Refused = append(rep.Refused, *r)
		case werr == nil:
			rep.Written = append(rep.Written, c)
		case isExportRefusal(werr):
			rep.Refused = append(rep.Refused, Refusal{c, vfs.CodeOf(werr), messageOf(werr)})
			if c.New.IsDir() {
				refusedDirs[c.Path] = true
			}
		default:
			return rep, werr
		}
	}
	return rep, nil
}

// inRefusedDir reports whether a directory above p is in refused.
func inRefusedDir(p string, refused map[string]bool) bool {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if refused[d] {
			return true
		}
	}
	return false
}

// isExportRefusal reports whether dst's error writing an entry is a refusal
// Export lists and goes on after.
func isExportRefusal(err error) bool {
	switch vfs.CodeOf(err) {
	case vfs.CodePermission, vfs.CodeInvalidPath, vfs.CodeConflict:
		return true
	}
	return false
}

// exportEntry writes c's new entry to dst: a directory, a symlink staying in
// the tree, or a regular file read from the checkout. It returns a refusal
// of its own for any other entry, else dst's error.
func (t *Tree) exportEntry(ctx context.Context, dst *dir.Dir, c Change) (*Refusal, error) {
	n := c.New
	switch {
	case n.IsDir():
		return nil, dst.MkdirAll(ctx, c.Path)
	case n.IsSymlink():
		if why := badLink(c.Path, n.Target); why != "" {
			return &Refusal{c, vfs.CodeOutside, why}, nil
		}
		if err := mkParent(ctx, dst, c.Path); err != nil {
			return nil, err
		}
		return nil, dst.Symlink(ctx, n.Target, c.Path)
	case n.IsRegular():
		data, err := t.ReadFile(c.Path, n)
		if err != nil {
			return nil, err
		}
		if err := mkParent(ctx, dst, c.Path); err != nil {
			return nil, err
		}
		return nil, dst.WriteFile(ctx, c.Path, data, n.Mode.Perm())
	}
	return &Refusal{c, vfs.CodeNotRegular, "not a regular file, directory or symlink"}, nil
}

// badLink says why a symlink at p with target may not be written ("" if it
// may): absolute, or climbing above the tree's root.
func badLink(p, target string) string {
	if target == "" || strings.HasPrefix(target, "/") {
		return "symlink target is absolute"
	}
	if j := path.Join(path.Dir(p), target); j == ".." || strings.HasPrefix(j, "../") {
		return "symlink target leaves the tree"
	}
	return ""
}

// mkParent creates the directories above p in dst.
func mkParent(ctx context.Context, dst *dir.Dir, p string) error {
	if d := path.Dir(p); d != "." {
		return dst.MkdirAll(ctx, d)
	}
	return nil
}

// messageOf is err's message without its op and path, else its code.
func messageOf(err error) string { return cmp.Or(vfs.MessageOf(err), string(vfs.CodeOf(err))) }
