//go:build linux

package syncback

import (
	"context"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
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
		case s.c.Kind == materialize.Deleted:
			removals = append(removals, op{s, phRemove})
		case s.c.Kind == materialize.TypeChanged:
			// One op, among the removals (after what was inside the old
			// directory): the path is never left with neither entry.
			removals = append(removals, op{s, phReplace})
		case s.creates():
			creations = append(creations, op{s, phCreate})
		}
		if s.creates() && s.c.New.IsDir() && s.chmod {
			dirModes = append(dirModes, op{s, phDirMode})
		}
		if s.c.Kind == materialize.ModeChanged || s.c.Kind == materialize.Touched {
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
// checkout with read (nil when the checkout is gone), recording each op
// done in j.
type applier struct {
	src      *dir.Dir
	read     func(rel string, want *materialize.Entry) ([]byte, error)
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
func (a *applier) run(ctx context.Context, ops []op, done map[int]bool, rep *Report) error {
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
				first = &vfs.Error{Code: vfs.CodeCanceled, Op: "syncback", Path: vfs.Root.String(), Err: err}
			}
			s.state, s.code, s.reason = stStopped, vfs.CodeCanceled, "not applied: the sync was canceled"
			stopped = true
			continue
		}
		hook("op")
		if err := a.do(ctx, s, o.ph); err != nil {
			if first == nil {
				first = vfs.Readdress(err, "syncback", s.c.Path, "")
			}
			stopped = a.fail(s, err) || stopped
			continue
		}
		s.started = true
		if err := a.journalDone(i); err != nil && first == nil {
			first = err
			stopped = true
		}
		hook("done")
		a.finish(s, rep)
		if a.progress != nil {
			a.progress(i+1, len(ops))
		}
	}
	return first
}

// fail records s failed by err and reports whether the apply stops: a
// conflict blocks the steps that depend on s and stops only under
// RejectAbort; any other error stops it.
func (a *applier) fail(s *step, err error) bool {
	if !isConflict(err) {
		s.state, s.code, s.reason = stFailed, vfs.CodeOf(err), messageOf(err)
		return true
	}
	s.state, s.code, s.reason = stConflict, vfs.CodeConflict, "not applied: "+messageOf(err)
	s.conflict = true
	block(a.plan)
	return a.onReject == RejectAbort
}

// journalDone records op i done in the journal, if there is one.
func (a *applier) journalDone(i int) error {
	if a.j == nil {
		return nil
	}
	return a.j.done(i)
}

// finish counts one op of s done, and records s applied after its last.
func (a *applier) finish(s *step, rep *Report) {
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
	w := elsewhere
	switch ph {
	case phRemove:
		w, err = a.whereRemove(ctx, s, fi)
	case phReplace:
		w, err = a.whereReplace(ctx, s, fi)
	case phCreate:
		w, err = a.whereCreate(ctx, s, fi)
	case phMeta:
		w = a.whereMeta(ctx, s, fi)
	case phDirMode:
		if fi != nil && fi.IsDir() {
			w = atBase
		}
	}
	return w, fi, err
}

// holds reports whether a comparison answered yes without an error.
func holds(ok bool, err error) bool { return err == nil && ok }

// whereRemove places fi (nil: nothing) for a removal: nothing is as the
// step leaves it; the manifest's entry, or anything when forced, is its
// base; a type change's new entry is as it leaves it.
func (a *applier) whereRemove(ctx context.Context, s *step, fi fs.FileInfo) (where, error) {
	if fi == nil {
		return atNew, nil
	}
	if s.force {
		return atBase, nil
	}
	ok, err := a.isOld(ctx, s, fi)
	if err != nil {
		return elsewhere, err
	}
	if ok {
		return atBase, nil
	}
	if s.c.Kind == materialize.TypeChanged && holds(a.isNew(ctx, s, fi)) {
		return atNew, nil
	}
	return elsewhere, nil
}

// whereReplace places fi (nil: nothing) for a type change's replacement:
// nothing (removed before a crash) is the base to create on; the new entry
// is as the step leaves it; the old one, or anything when forced, the base.
func (a *applier) whereReplace(ctx context.Context, s *step, fi fs.FileInfo) (where, error) {
	if fi == nil {
		return atBase, nil // removed before a crash: create
	}
	ok, err := a.isNew(ctx, s, fi)
	if err != nil {
		return elsewhere, err
	}
	if ok {
		return atNew, nil
	}
	if s.force || holds(a.isOld(ctx, s, fi)) {
		return atBase, nil
	}
	return elsewhere, nil
}

// whereCreate places fi (nil: nothing) for a creation or modification:
// nothing is the base of an added or type-changed entry; the new entry is
// as the step leaves it; a modified file's old contents, or anything when
// forced, the base.
func (a *applier) whereCreate(ctx context.Context, s *step, fi fs.FileInfo) (where, error) {
	if fi == nil {
		if s.c.Kind == materialize.Added || s.c.Kind == materialize.TypeChanged || s.force {
			return atBase, nil
		}
		return elsewhere, nil
	}
	ok, err := a.isNew(ctx, s, fi)
	if err != nil {
		return elsewhere, err
	}
	if ok {
		return atNew, nil
	}
	if s.force || (s.c.Kind == materialize.Modified && holds(a.isOld(ctx, s, fi))) {
		return atBase, nil
	}
	return elsewhere, nil
}

// whereMeta places fi for a change of mode or time: keeping ours, it applies
// to whatever file the source has there (the sandbox did not change the
// contents); otherwise the entry must have the new contents.
func (a *applier) whereMeta(ctx context.Context, s *step, fi fs.FileInfo) where {
	if fi != nil && ((s.force && fi.Mode().IsRegular()) || holds(a.isNew(ctx, s, fi))) {
		return atBase
	}
	return elsewhere
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
	switch ph {
	case phRemove:
		if w == atNew {
			return nil
		}
		return a.remove(ctx, s)
	case phReplace, phCreate:
		return a.write(ctx, s, ph, w, fi)
	case phMeta:
		return a.meta(ctx, s)
	case phDirMode:
		return a.src.Chmod(ctx, s.c.Path, s.perm)
	}
	return nil
}

// remove removes the source's entry at s's path: with its contents when
// keeping ours, else only if empty.
func (a *applier) remove(ctx context.Context, s *step) error {
	if s.force {
		return a.src.RemoveAll(ctx, s.c.Path)
	}
	return a.src.Remove(ctx, s.c.Path)
}

// write makes s's new entry when the source has its base there (w), then
// sets a new file's mode (when it changed or keeping ours) and time.
func (a *applier) write(ctx context.Context, s *step, ph phase, w where, fi fs.FileInfo) error {
	if w == atBase {
		if err := a.put(ctx, s, ph, fi); err != nil {
			return err
		}
	}
	hook("mid")
	n := s.c.New
	if !n.IsRegular() {
		return nil
	}
	if s.chmod || s.force {
		if err := a.src.Chmod(ctx, s.c.Path, s.perm); err != nil {
			return err
		}
	}
	return a.src.Chtimes(ctx, s.c.Path, time.Time{}, n.ModTime)
}

// put reads a new file's contents, removes the old entry (fi) of a
// replacement, then creates the new entry.
func (a *applier) put(ctx context.Context, s *step, ph phase, fi fs.FileInfo) error {
	var data []byte
	if n := s.c.New; n.IsRegular() {
		var err error
		if data, err = a.newData(s.c.Path, n); err != nil {
			return err
		}
	}
	if ph == phReplace && fi != nil {
		// The old entry of a type change (a directory's contents went
		// first: they are deeper).
		if err := a.remove(ctx, s); err != nil {
			return err
		}
		fi = nil
	}
	return a.create(ctx, s, fi, data)
}

// meta applies a change of mode and time to the source's entry.
func (a *applier) meta(ctx context.Context, s *step) error {
	if s.chmod {
		if err := a.src.Chmod(ctx, s.c.Path, s.perm); err != nil {
			return err
		}
	}
	hook("mid")
	if s.setsTime() {
		return a.src.Chtimes(ctx, s.c.Path, time.Time{}, s.c.New.ModTime)
	}
	return nil
}

// newData reads a new file's contents from the checkout, checking its digest.
func (a *applier) newData(p string, n *materialize.Entry) ([]byte, error) {
	if a.read == nil {
		return nil, vfs.NewError(vfs.CodeIO, "recover", vfs.MustParse(p), "the checkout holding the new contents is gone")
	}
	return a.read(p, n)
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
