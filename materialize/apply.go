package materialize

import (
	"context"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// phase is one part of a step, as the apply runs it.
type phase string

const (
	phRemove  phase = "remove"  // remove the old entry
	phReplace phase = "replace" // a type change: remove the old entry and create the new one
	phCreate  phase = "create"  // create the new entry (a file with its mode and time)
	phMeta    phase = "meta"    // a file's mode and time only
	phDirMode phase = "dirmode" // a directory's mode, once nothing more is written into it
)

// op is one phase of one step: the unit the journal records as done.
type op struct {
	s  *step
	ph phase
}

// opsOf orders the pending steps' phases: removals and type changes first
// (deepest first), then creations in path order (parents before children),
// then file modes and times, then directory modes (deepest first). It sets
// each step's op count.
func opsOf(plan []*step) []op {
	var removals, creations, metas, dirModes []op
	for _, s := range plan {
		if s.state != stPending {
			continue
		}
		switch {
		case s.c.Kind == Deleted:
			removals = append(removals, op{s, phRemove})
		case s.c.Kind == TypeChanged:
			// One op, among the removals (after what was inside the old
			// directory): the path is never left with neither entry.
			removals = append(removals, op{s, phReplace})
		case s.creates():
			creations = append(creations, op{s, phCreate})
		}
		if s.creates() && s.c.New.IsDir() && s.chmod {
			dirModes = append(dirModes, op{s, phDirMode})
		}
		if s.c.Kind == ModeChanged || s.c.Kind == Touched {
			if s.force && s.gone {
				creations = append(creations, op{s, phCreate})
			}
			if s.c.New.IsDir() {
				dirModes = append(dirModes, op{s, phDirMode})
			} else {
				metas = append(metas, op{s, phMeta})
			}
		}
	}
	depth := func(o op) int { return strings.Count(o.s.c.Path, "/") }
	sort.SliceStable(removals, func(i, j int) bool { return depth(removals[i]) > depth(removals[j]) })
	sort.SliceStable(dirModes, func(i, j int) bool { return depth(dirModes[i]) > depth(dirModes[j]) })
	out := append(append(append(removals, creations...), metas...), dirModes...)
	for _, o := range out {
		o.s.ops++
	}
	return out
}

// testHook, when set (by tests), is called at points of the apply: "journal"
// after each journal record of the plan, "committed" once the journal is on
// disk, "op" before each op, "mid" between an op's main call and its mode and
// time, "done" after an op is recorded as done.
var testHook func(point string)

func hook(point string) {
	if testHook != nil {
		testHook(point)
	}
}

// where says how the source's entry at a step's path stands for one phase.
type where int

const (
	atBase    where = iota // as the step assumes: apply it
	atNew                  // already as the step leaves it (applied before a crash)
	elsewhere              // changed by someone else: a conflict
)

// applier applies ops through the source Dir, reading new files from the
// checkout whose root handle is rootFd, recording each op done in j.
type applier struct {
	src      *dir.Dir
	rootFd   int
	onReject RejectMode
	fast     bool // trust an unchanged Lstat (since validation) without re-reading
	j        *journal
	plan     []*step
	progress func(done, total int) // optional: after each op
}

// run applies ops in order, appending each step to rep.Applied once all its
// ops are done. A step whose base changed is a conflict: its dependents are
// blocked, and under RejectAbort the apply stops there. A failed call stops it.
// After a stop, only the remaining ops of steps already begun are run.
// Steps not applied are left in their state for fillReport; the error is the
// one that stopped the apply, or the first conflict.
func (a *applier) run(ctx context.Context, ops []op, done map[int]bool, rep *SyncReport) error {
	var first error
	stopped := false
	for i, o := range ops {
		s := o.s
		if done[i] {
			a.finish(s, rep)
			continue
		}
		if s.state != stPending {
			continue
		}
		if stopped && !s.started {
			s.state, s.code, s.reason = stStopped, vfs.CodeOf(first), "not applied: the sync stopped before it"
			continue
		}
		// A step already begun is finished even after a stop (a directory's
		// mode, set last), as far as it can be.
		if err := ctx.Err(); err != nil && !s.started {
			if first == nil {
				first = canceled("syncback", vfs.Root, err)
			}
			s.state, s.code, s.reason = stStopped, vfs.CodeCanceled, "not applied: the sync was canceled"
			stopped = true
			continue
		}
		hook("op")
		err := a.do(ctx, s, o.ph)
		if err != nil {
			if first == nil {
				first = vfs.Readdress(err, "syncback", s.c.Path, "")
			}
			if isConflict(err) {
				s.state, s.code, s.reason = stConflict, vfs.CodeConflict, "not applied: "+messageOf(err)
				s.conflict = true
				block(a.plan)
				if a.onReject == RejectAbort {
					stopped = true
				}
				continue
			}
			s.state, s.code, s.reason = stFailed, vfs.CodeOf(err), messageOf(err)
			stopped = true
			continue
		}
		s.started = true
		if a.j != nil {
			if err := a.j.done(i); err != nil && first == nil {
				first = err
				stopped = true
			}
		}
		hook("done")
		a.finish(s, rep)
		if a.progress != nil {
			a.progress(i+1, len(ops))
		}
	}
	return first
}

// finish counts one op of s done, and records s applied after its last.
func (a *applier) finish(s *step, rep *SyncReport) {
	s.started = true
	s.ops--
	if s.ops == 0 && s.state == stPending {
		s.state = stApplied
		rep.Applied = append(rep.Applied, s.c)
	}
}

// isConflict reports whether err, met applying a step, means that the source
// changed under it (rather than that the call failed).
func isConflict(err error) bool {
	switch vfs.CodeOf(err) {
	case vfs.CodeNotFound, vfs.CodeNotDir, vfs.CodeExists, vfs.CodeNotEmpty, vfs.CodeIsDir, vfs.CodeConflict:
		return true
	}
	return false
}

// lstat is the source's Lstat of p, nil when nothing is there.
func (a *applier) lstat(ctx context.Context, p string) (fs.FileInfo, error) {
	fi, err := a.src.Lstat(ctx, p)
	if code := vfs.CodeOf(err); code == vfs.CodeNotFound || code == vfs.CodeNotDir {
		return nil, nil
	}
	return fi, err
}

// isNew reports whether the source's entry at s's path (fi) has the contents
// s leaves: its type, and a file's digest or a symlink's target.
func (a *applier) isNew(ctx context.Context, s *step, fi fs.FileInfo) (bool, error) {
	return sameContent(ctx, a.src, s.c.Path, fi, s.c.New, func(string) bool { return true })
}

// isOld reports whether the entry (fi) is the step's base: the manifest's
// type, mode and contents (a directory to remove holding nothing unknown).
func (a *applier) isOld(ctx context.Context, s *step, fi fs.FileInfo) (bool, error) {
	e := s.c.Old
	if !e.IsSymlink() && fi.Mode().Perm() != e.Mode.Perm() {
		return false, nil
	}
	return sameContent(ctx, a.src, s.c.Path, fi, e, func(string) bool { return !s.removes() })
}

// where compares the source's entry at s's path with what phase ph assumes.
func (a *applier) where(ctx context.Context, s *step, ph phase) (where, fs.FileInfo, error) {
	fi, err := a.lstat(ctx, s.c.Path)
	if err != nil {
		return elsewhere, nil, err
	}
	if a.fast && s.seenSet && sameSeen(fi, s.seen) {
		return atBase, fi, nil // as validation saw it
	}
	yes := func(ok bool, err error) bool { return err == nil && ok }
	switch ph {
	case phRemove:
		if fi == nil {
			return atNew, nil, nil
		}
		if s.force {
			return atBase, fi, nil
		}
		ok, err := a.isOld(ctx, s, fi)
		if err != nil {
			return elsewhere, fi, err
		}
		if ok {
			return atBase, fi, nil
		}
		if s.c.Kind == TypeChanged && yes(a.isNew(ctx, s, fi)) {
			return atNew, fi, nil
		}
	case phReplace:
		if fi == nil {
			return atBase, nil, nil // removed before a crash: create
		}
		ok, err := a.isNew(ctx, s, fi)
		if err != nil {
			return elsewhere, fi, err
		}
		if ok {
			return atNew, fi, nil
		}
		if s.force || yes(a.isOld(ctx, s, fi)) {
			return atBase, fi, nil
		}
	case phCreate:
		if fi == nil {
			if s.c.Kind == Added || s.c.Kind == TypeChanged || s.force {
				return atBase, nil, nil
			}
			return elsewhere, nil, nil
		}
		ok, err := a.isNew(ctx, s, fi)
		if err != nil {
			return elsewhere, fi, err
		}
		if ok {
			return atNew, fi, nil
		}
		if s.force {
			return atBase, fi, nil
		}
		if s.c.Kind == Modified && yes(a.isOld(ctx, s, fi)) {
			return atBase, fi, nil
		}
	case phMeta:
		// Keeping ours, a change of mode or time applies to whatever file
		// the source has there (the sandbox did not change the contents).
		if fi != nil && ((s.force && fi.Mode().IsRegular()) || yes(a.isNew(ctx, s, fi))) {
			return atBase, fi, nil
		}
	case phDirMode:
		if fi != nil && fi.IsDir() {
			return atBase, fi, nil
		}
	}
	return elsewhere, fi, nil
}

func sameSeen(fi fs.FileInfo, s *seenInfo) bool {
	if fi == nil || s == nil {
		return fi == nil && s == nil
	}
	return fi.Mode() == s.mode && fi.Size() == s.size && fi.ModTime().UnixNano() == s.mtime
}

// do applies one phase of s, unless the source already has what it leaves.
// A file's new contents are read from the checkout (and their digest checked)
// before anything at its path is removed, so a checkout that is gone or
// changed leaves the source's entry as it was.
func (a *applier) do(ctx context.Context, s *step, ph phase) error {
	w, fi, err := a.where(ctx, s, ph)
	if err != nil {
		return err
	}
	if w == elsewhere {
		return vfs.NewError(vfs.CodeConflict, "syncback", vfs.MustParse(s.c.Path), "changed in the source during the sync")
	}
	src := a.src
	p := s.c.Path
	n := s.c.New
	switch ph {
	case phRemove:
		if w == atNew {
			return nil
		}
		if s.force {
			return src.RemoveAll(ctx, p)
		}
		return src.Remove(ctx, p)
	case phReplace, phCreate:
		if w == atBase {
			var data []byte
			if n.IsRegular() {
				if data, err = a.newData(p, n); err != nil {
					return err
				}
			}
			if ph == phReplace && fi != nil {
				// The old entry of a type change (a directory's contents went
				// first: they are deeper).
				if s.force {
					err = src.RemoveAll(ctx, p)
				} else {
					err = src.Remove(ctx, p)
				}
				if err != nil {
					return err
				}
				fi = nil
			}
			if err := a.create(ctx, s, fi, data); err != nil {
				return err
			}
		}
		hook("mid")
		if n.IsRegular() {
			if s.chmod || s.force {
				if err := src.Chmod(ctx, p, s.perm); err != nil {
					return err
				}
			}
			return src.Chtimes(ctx, p, time.Time{}, n.ModTime)
		}
		return nil
	case phMeta:
		if s.chmod {
			if err := src.Chmod(ctx, p, s.perm); err != nil {
				return err
			}
		}
		hook("mid")
		if s.setsTime() {
			return src.Chtimes(ctx, p, time.Time{}, n.ModTime)
		}
		return nil
	case phDirMode:
		return src.Chmod(ctx, p, s.perm)
	}
	return nil
}

// newData reads a new file's contents from the checkout, checking its digest.
func (a *applier) newData(p string, n *Entry) ([]byte, error) {
	if a.rootFd < 0 {
		return nil, vfs.NewError(vfs.CodeIO, "recover", vfs.MustParse(p), "the checkout holding the new contents is gone")
	}
	return readCheckoutAt(a.rootFd, p, n)
}

// create makes s's new entry where the source has fi (nil: nothing): the
// parents keeping ours recreates, then, keeping ours, what is in the way goes,
// then the directory, symlink or file (data) is made.
func (a *applier) create(ctx context.Context, s *step, fi fs.FileInfo, data []byte) error {
	src, p, n := a.src, s.c.Path, s.c.New
	for _, q := range s.parents {
		if err := mkdir(ctx, src, q); err != nil {
			return err
		}
	}
	if s.force && fi != nil && !(n.IsRegular() && fi.Mode().IsRegular()) && !(n.IsDir() && fi.IsDir()) {
		if err := src.RemoveAll(ctx, p); err != nil {
			return err
		}
		fi = nil
	}
	switch {
	case n.IsDir():
		return mkdir(ctx, src, p)
	case n.IsSymlink():
		if fi != nil {
			if err := src.Remove(ctx, p); err != nil && vfs.CodeOf(err) != vfs.CodeNotFound {
				return err
			}
		}
		return src.Symlink(ctx, n.Target, p)
	}
	return src.WriteFile(ctx, p, data, s.perm)
}

// mkdir creates directory p, or accepts the directory already there.
func mkdir(ctx context.Context, src *dir.Dir, p string) error {
	if _, err := src.CreateDir(ctx, p); err != nil {
		if fi, serr := src.Lstat(ctx, p); serr != nil || !fi.IsDir() {
			return err
		}
	}
	return nil
}
