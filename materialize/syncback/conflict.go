//go:build linux

package syncback

import (
	"cmp"
	"context"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/internal/hostfs"
	"github.com/capfs/capfs/vfs"
)

// checkSource compares the source at s's path and above it with the
// manifest, and puts s in conflict (or settles a deletion the source made
// too). The error is one that ends the whole sync.
func (t *checkout) checkSource(ctx context.Context, s *step, made map[string]bool, parents map[string]parentState) error {
	conflict, why, err := t.sourceConflict(ctx, s, made, parents)
	if err != nil {
		return checkSourceError(s, err)
	}
	if conflict {
		s.conflict = true
		if s.state == stPending {
			s.state, s.code, s.reason = stConflict, vfs.CodeConflict, why
		}
	} else if s.c.Kind == materialize.Deleted && s.gone && s.state == stPending {
		s.state = stSettled // already deleted in the source
	}
	return nil
}

// sourceConflict reports whether the source changed s's path, or a directory
// above it, since the checkout, and why.
func (t *checkout) sourceConflict(ctx context.Context, s *step, made map[string]bool, parents map[string]parentState) (bool, string, error) {
	conflict, why, err := t.changedInSource(ctx, s)
	if err != nil {
		return false, "", err
	}
	pc, pwhy, err := t.checkParents(ctx, s, made, parents)
	// A deletion beneath a removed directory is already made; beneath
	// a directory replaced by a symlink it would reach elsewhere.
	if pc && !conflict && (s.c.Kind != materialize.Deleted || pwhy == whyParentNotDir) {
		conflict, why = true, pwhy
	}
	if s.c.Kind == materialize.Deleted {
		s.parents = nil
	}
	return conflict, why, err
}

// checkSourceError settles an error met checking s against the source: none
// for a step refused already, a refusal when the sync can go on without
// knowing, else the error, which ends the whole sync.
func checkSourceError(s *step, err error) error {
	code := vfs.CodeOf(err)
	if s.state == stRefused && code != vfs.CodeRevoked && code != vfs.CodeCanceled {
		return nil // refused already: no need to know more
	}
	if !materialize.Skippable(err) {
		return err
	}
	if s.state == stPending {
		s.refuse(code, "cannot check the source: "+messageOf(err))
	}
	return nil
}

// messageOf is err's message without its op and path, else its code.
func messageOf(err error) string { return cmp.Or(vfs.MessageOf(err), string(vfs.CodeOf(err))) }

const whyParentNotDir = "a directory above it is no longer a directory in the source"

// checkParents checks that every directory above s's path is still a directory
// in the source (not removed, renamed away or replaced by a file or a symlink),
// or is one the plan creates. Missing ones are recorded in s.parents (outermost
// first), for ConflictKeepOurs to recreate.
func (t *checkout) checkParents(ctx context.Context, s *step, made map[string]bool, cache map[string]parentState) (bool, string, error) {
	var above []string
	for p := path.Dir(s.c.Path); p != "." && p != "/" && p != ""; p = path.Dir(p) {
		above = append(above, p)
	}
	s.parents = nil
	if len(above) > 0 && made[above[0]] {
		return false, "", nil // its parent's own step checks what lies above
	}
	for i := len(above) - 1; i >= 0; i-- {
		p := above[i]
		if made[p] {
			break
		}
		st, err := t.parentAt(ctx, p, cache)
		if err != nil {
			return false, "", err
		}
		switch st {
		case parentOther:
			s.parents = nil
			return true, whyParentNotDir, nil
		case parentMissing:
			for j := i; j >= 0 && !made[above[j]]; j-- {
				s.parents = append(s.parents, above[j])
			}
			return true, "parent " + p + " was removed or renamed in the source", nil
		}
	}
	return false, "", nil
}

// parentAt is what the source has at directory p, looked up once per plan
// (cache).
func (t *checkout) parentAt(ctx context.Context, p string, cache map[string]parentState) (parentState, error) {
	if st, ok := cache[p]; ok {
		return st, nil
	}
	fi, err := t.src.Lstat(ctx, p)
	var st parentState
	switch code := vfs.CodeOf(err); {
	case err == nil && fi.IsDir():
		st = parentDir
	case err == nil:
		st = parentOther
	case code == vfs.CodeNotFound || code == vfs.CodeNotDir:
		st = parentMissing
	default:
		return 0, err
	}
	cache[p] = st
	return st, nil
}

// changedInSource compares the source's current state at s's path with the
// manifest (or, for an added path, with nothing) and reports a conflict, with
// why. It records what it saw in s (seen, gone, inTheWay).
func (t *checkout) changedInSource(ctx context.Context, s *step) (conflict bool, why string, err error) {
	fi, err := t.src.Lstat(ctx, s.c.Path)
	s.seenSet = true
	if code := vfs.CodeOf(err); code == vfs.CodeNotFound || code == vfs.CodeNotDir {
		// Nothing there (a parent may be a file the plan replaces by a directory).
		// Added: nothing in the way. Otherwise the source deleted it: a conflict
		// unless the sandbox deleted it too.
		s.gone = true
		if s.c.Old != nil && s.c.Kind != materialize.Deleted {
			return true, "deleted or renamed in the source", nil
		}
		return false, "", nil
	}
	if err != nil {
		return false, "", err
	}
	s.seen = seenOf(fi)
	s.inTheWay = inTheWay(s.c.New, fi)
	old := s.c.Old
	if old == nil {
		// Added in both: only two directories agree.
		if s.c.New.IsDir() && fi.IsDir() {
			return false, "", nil
		}
		return true, "added in the source too", nil
	}
	same, err := t.sameAs(ctx, s.c.Path, fi, old, s.removes() && old.IsDir())
	if err != nil {
		return false, "", err
	}
	if !same {
		return true, "changed in the source since the checkout", nil
	}
	return false, "", nil
}

// inTheWay reports whether the source's entry (fi) must go before n (nil:
// nothing) is made: anything but a file for a file, a directory for a
// directory.
func inTheWay(n *materialize.Entry, fi fs.FileInfo) bool {
	return n != nil && !(n.IsRegular() && fi.Mode().IsRegular()) && !(n.IsDir() && fi.IsDir())
}

// sameAs reports whether the source's entry at p (whose Lstat is fi) is what e
// describes: type, permission bits, and a file's digest or a symlink's target.
// With names set, a directory must hold nothing the manifest does not list.
func (t *checkout) sameAs(ctx context.Context, p string, fi fs.FileInfo, e *materialize.Entry, names bool) (bool, error) {
	if fi.Mode().Type() != e.Type&fs.ModeType {
		return false, nil
	}
	if !e.IsSymlink() && fi.Mode().Perm() != e.Mode.Perm() {
		return false, nil
	}
	return sameContent(ctx, t.src, p, fi, e, func(name string) bool {
		if !names {
			return true
		}
		_, ok := t.manifest.Entries[p+"/"+name]
		return ok
	})
}

// sameContent reports whether the entry at p (whose Lstat is fi, of e's type)
// has e's contents: a file's digest, a symlink's target, and for a directory,
// only names known says are expected.
func sameContent(ctx context.Context, src *dir.Dir, p string, fi fs.FileInfo, e *materialize.Entry, known func(string) bool) (bool, error) {
	if fi.Mode().Type() != e.Type&fs.ModeType {
		return false, nil
	}
	switch {
	case e.IsRegular():
		if fi.Size() != e.Size {
			return false, nil
		}
		d, err := sourceDigest(ctx, src, p)
		if err != nil {
			return false, err
		}
		return d == e.Digest, nil
	case e.IsSymlink():
		target, err := src.Readlink(ctx, p)
		if err != nil {
			return false, err
		}
		return target == e.Target, nil
	case e.IsDir():
		names, err := src.List(ctx, p)
		if err != nil {
			return false, err
		}
		for _, n := range names {
			if !known(n) {
				return false, nil // the source added something inside
			}
		}
	}
	return true, nil
}

func sourceDigest(ctx context.Context, src *dir.Dir, p string) (string, error) {
	h, err := src.Open(ctx, p, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer h.Close()
	d, _, err := hostfs.HashFile(h)
	return d, err
}

// under reports whether p is q or lies beneath it.
func under(p, q string) bool {
	return p == q || strings.HasPrefix(p, q+"/")
}
