package materialize

import (
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
// lim bounds what is written as for SyncBack (a zero field: the default).
// Export stops at the first error dst returns other than a refusal
// (fs_permission_denied, invalid_path), and returns it with what it wrote so far.
func (t *Tree) Export(ctx context.Context, dst *dir.Dir, lim Limits) (*ExportReport, error) {
	const op = "export"
	if err := t.live(op); err != nil {
		return nil, err
	}
	lim = lim.withDefaults()
	changes, hit, err := t.scan(ctx, lim)
	if err != nil {
		return nil, err
	}
	rep := &ExportReport{}
	if hit != nil {
		rep.Refused = append(rep.Refused, Refusal{hit.change, vfs.CodeQuota, hit.reason})
		return rep, vfs.NewError(vfs.CodeQuota, op, vfs.MustParse(hit.change.Path), hit.reason)
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Path < changes[j].Path })
	refusedDirs := map[string]bool{}
	under := func(p string) bool {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if refusedDirs[d] {
				return true
			}
		}
		return false
	}
	for _, c := range changes {
		if err := ctx.Err(); err != nil {
			return rep, vfs.Errno(op, vfs.Root, err)
		}
		if c.Kind == Deleted {
			rep.Deleted = append(rep.Deleted, c)
			continue
		}
		if c.Kind == Touched || c.New == nil || under(c.Path) {
			continue
		}
		n := c.New
		var werr error
		switch {
		case n.IsDir():
			werr = dst.MkdirAll(ctx, c.Path)
		case n.IsSymlink():
			if why := badLink(c.Path, n.Target); why != "" {
				rep.Refused = append(rep.Refused, Refusal{c, vfs.CodeOutside, why})
				continue
			}
			if werr = mkParent(ctx, dst, c.Path); werr == nil {
				werr = dst.Symlink(ctx, n.Target, c.Path)
			}
		case n.IsRegular():
			data, err := readCheckoutAt(t.rootFd, c.Path, n)
			if err != nil {
				werr = err
				break
			}
			if werr = mkParent(ctx, dst, c.Path); werr == nil {
				werr = dst.WriteFile(ctx, c.Path, data, n.Mode.Perm())
			}
		default:
			rep.Refused = append(rep.Refused, Refusal{c, vfs.CodeNotRegular, "not a regular file, directory or symlink"})
			continue
		}
		if werr != nil {
			switch vfs.CodeOf(werr) {
			case vfs.CodePermission, vfs.CodeInvalidPath, vfs.CodeConflict:
				rep.Refused = append(rep.Refused, Refusal{c, vfs.CodeOf(werr), messageOf(werr)})
				if n.IsDir() {
					refusedDirs[c.Path] = true
				}
				continue
			}
			return rep, werr
		}
		rep.Written = append(rep.Written, c)
	}
	return rep, nil
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
