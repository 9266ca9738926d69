//go:build linux

package syncback

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// step is one change of the plan: the base it assumes (c.Old), what it makes
// (c.New), how to apply it, and where it stands. Its exported fields are what a
// journal records.
type step struct {
	c        materialize.Change
	perm     fs.FileMode // the permission bits to leave (special bits stripped)
	chmod    bool        // set perm explicitly
	force    bool        // ConflictKeepOurs: replace whatever is in the way
	gone     bool        // the source had nothing at the path at validation
	inTheWay bool        // the source had an entry there that creating the new one must first remove
	parents  []string    // directories above the path to recreate (keep ours, removed in the source)

	state    stepState
	conflict bool // changed in the source since the checkout
	code     vfs.Code
	reason   string
	seen     *seenInfo // the source's entry at validation (nil: none there, or unknown)
	seenSet  bool      // seen was recorded
	ops      int       // ops of this step not yet done
	started  bool      // an op of it was done
}

// seenInfo is what an Lstat of the source showed at validation.
type seenInfo struct {
	mode  fs.FileMode
	size  int64
	mtime int64
}

func seenOf(fi fs.FileInfo) *seenInfo {
	return &seenInfo{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}

func (s *step) refuse(code vfs.Code, reason string) {
	s.state, s.code, s.reason = stRefused, code, reason
}

func (s *step) removes() bool {
	return s.c.Kind == materialize.Deleted || s.c.Kind == materialize.TypeChanged
}

func (s *step) creates() bool {
	return s.c.Kind == materialize.Added || s.c.Kind == materialize.TypeChanged || s.c.Kind == materialize.Modified
}

// createsDir reports whether s makes a directory where the manifest had none.
func (s *step) createsDir() bool {
	return (s.c.Kind == materialize.Added || s.c.Kind == materialize.TypeChanged) && s.c.New.IsDir()
}

// setsTime reports whether applying s sets the file's modification time.
func (s *step) setsTime() bool {
	n := s.c.New
	if n == nil || !n.IsRegular() {
		return false
	}
	switch s.c.Kind {
	case materialize.ModeChanged:
		return !n.ModTime.Equal(s.c.Old.ModTime) || s.gone
	}
	return true
}

// validator checks changes against the file rules, the limits, the source Dir's
// own checks (Dir.Check) and the extra policy.
type validator struct {
	ctx  context.Context
	src  *dir.Dir
	opts Options
	lim  materialize.Limits
}

// dirCall is one call apply makes through the Dir at a step's path, as Dir.Check
// and the extra policy are asked about it.
type dirCall struct {
	op     policy.Op
	path   string // "" for the step's own path
	target string // a symlink's target text (OpSymlink)
	size   int64  // the bytes a write leaves in the file (OpWrite), else -1
}

// calls returns the Dir calls applying s makes when nothing in the source is in
// the way: the removal of the old entry, the creation of the new one, its chmod
// and its times.
func (s *step) calls() []dirCall {
	var out []dirCall
	if s.removes() {
		out = append(out, dirCall{op: policy.OpRemove, size: -1})
	}
	if s.creates() {
		out = append(out, s.createCalls()...)
	}
	if s.chmod {
		out = append(out, dirCall{op: policy.OpChmod, size: -1})
	}
	if s.setsTime() {
		out = append(out, dirCall{op: policy.OpChtimes, size: -1})
	}
	return out
}

// createCalls returns the calls that create s's new entry (see applier.create).
func (s *step) createCalls() []dirCall {
	n := s.c.New
	switch {
	case n.IsRegular():
		return []dirCall{{op: policy.OpWrite, size: n.Size}}
	case n.IsDir():
		return []dirCall{{op: policy.OpMkdir, size: -1}}
	case n.IsSymlink():
		var out []dirCall
		if s.c.Kind == materialize.Modified {
			out = append(out, dirCall{op: policy.OpRemove, size: -1})
		}
		return append(out, dirCall{op: policy.OpSymlink, target: n.Target, size: -1})
	}
	return nil
}

// forcedCalls returns the calls beyond calls() that applying s makes once the
// conflict check has settled it: under ConflictKeepOurs, the mkdir of each
// parent to recreate, the removal of what the source put in the way, the chmod
// that puts a rewritten file's mode back, and the re-creation of an entry the
// source deleted.
func (s *step) forcedCalls() []dirCall {
	if !s.force {
		return nil
	}
	var out []dirCall
	for _, p := range s.parents {
		out = append(out, dirCall{op: policy.OpMkdir, path: p, size: -1})
	}
	if s.c.Kind == materialize.ModeChanged || s.c.Kind == materialize.Touched {
		if s.gone {
			out = append(out, s.createCalls()...)
			if s.c.Kind == materialize.Touched {
				out = append(out, dirCall{op: policy.OpChmod, size: -1})
			}
		}
		return out
	}
	if s.creates() && s.c.Kind != materialize.TypeChanged && s.inTheWay {
		out = append(out, dirCall{op: policy.OpRemove, size: -1})
	}
	if s.c.Kind == materialize.Modified && s.c.New.IsRegular() && !s.chmod {
		out = append(out, dirCall{op: policy.OpChmod, size: -1})
	}
	return out
}

// check validates c and returns its step: pending, refused or settled (nothing
// to do). The error is one that ends the whole sync (the Dir revoked, the
// context canceled).
func (v *validator) check(c materialize.Change) (*step, error) {
	s := &step{c: c}
	p, err := vfs.ParseGuest(c.Path)
	if err != nil || p.String() != c.Path {
		s.refuse(vfs.CodeInvalidPath, "name not allowed in the tree")
		return s, nil
	}
	if c.New != nil && !v.checkNew(s, p) {
		return s, nil
	}
	s.chmod = s.explicitChmod()
	if c.Kind == materialize.ModeChanged && !s.chmod && !s.setsTime() {
		s.state = stSettled // only special bits, which are stripped: nothing to do
		return s, nil
	}
	return s, v.vet(s, s.calls())
}

// checkNew checks the entry s leaves at p and sets s.perm: a regular file,
// a directory or a symlink that stays in the tree, within the depth limit.
// It refuses s and reports false otherwise. A link whose target leaves the
// tree is data the checkout may hold (issue 29), but a new or changed one is
// never brought back (no option allows it: the source may be a host
// directory, whose processes would follow it); one the checkout got from the
// source and left unchanged is no change, so never reaches here.
func (v *validator) checkNew(s *step, p vfs.Path) bool {
	n := s.c.New
	s.perm = n.Mode.Perm()
	switch {
	case n.IsRegular(), n.IsDir():
	case n.IsSymlink():
		if _, err := vfs.SymlinkTarget(p, n.Target); err != nil {
			s.refuse(vfs.CodeOf(err), "symlink target "+quote(n.Target)+" is absolute or leaves the tree")
			return false
		}
	default:
		s.refuse(vfs.CodeNotRegular, "special file ("+n.Type.String()+")")
		return false
	}
	if v.lim.MaxDepth >= 0 && p.Depth() > v.lim.MaxDepth {
		s.refuse(vfs.CodeQuota, fmt.Sprintf("deeper than the limit of %d", v.lim.MaxDepth))
		return false
	}
	return true
}

// explicitChmod reports whether applying s sets the new entry's permission
// bits itself: a mode change that changes them, a modified file whose bits
// changed, a new directory with other bits than 0755.
func (s *step) explicitChmod() bool {
	c := s.c
	switch {
	case c.Kind == materialize.ModeChanged:
		return c.New.Mode.Perm() != c.Old.Mode.Perm()
	case !s.creates():
		return false
	case c.New.IsRegular() && c.Kind == materialize.Modified:
		return s.perm != c.Old.Mode.Perm()
	case c.New.IsDir():
		return s.perm != 0o755
	}
	return false
}

// vet asks the source Dir (Dir.Check: its revocation, read-only and lock state,
// its policy and Asker) and then the extra policy, if any, about each call, and
// refuses s at the first call refused. The error ends the whole sync.
func (v *validator) vet(s *step, calls []dirCall) error {
	for _, dc := range calls {
		at := s.c.Path
		if dc.path != "" {
			at = dc.path
		}
		if err := v.src.Check(v.ctx, dc.op, at, dc.target, dc.size); err != nil {
			switch vfs.CodeOf(err) {
			case vfs.CodeRevoked, vfs.CodeCanceled:
				return vfs.Readdress(err, "syncback", s.c.Path, "")
			}
			if v.ctx.Err() != nil {
				return vfs.Readdress(err, "syncback", s.c.Path, "")
			}
			reason := cmp.Or(vfs.MessageOf(err), err.Error())
			if at != s.c.Path {
				reason = at + ": " + reason
			}
			s.refuse(vfs.CodeOf(err), string(dc.op)+": "+reason)
			return nil
		}
		if v.opts.Policy == nil {
			continue
		}
		dest := ""
		if dc.op == policy.OpSymlink {
			q, _ := vfs.SymlinkTarget(vfs.MustParse(s.c.Path), dc.target) // validated by check
			dest = q.String()
		}
		r := v.req(dc.op, at, dest, dc.size)
		if reason, ok := v.allowed(&r); !ok {
			s.refuse(vfs.CodePermission, reason)
			return nil
		}
	}
	return nil
}

func (v *validator) req(op policy.Op, p, dest string, size int64) policy.Request {
	r := policy.Request{Op: op, Path: v.treePath(p), GuestPath: p, Size: size, Subject: v.opts.Subject, ID: "syncback-validate"}
	if dest != "" {
		r.Dest = v.treePath(dest)
	}
	return r
}

func (v *validator) treePath(p string) string {
	root := strings.Trim(v.opts.PolicyRoot, "/")
	if root == "" || root == "." {
		return p
	}
	if p == "." {
		return path.Clean(root)
	}
	return path.Clean(root + "/" + p)
}

func (v *validator) allowed(r *policy.Request) (string, bool) {
	d := v.opts.Policy.Decide(v.ctx, r)
	reason := "rule " + quote(d.Rule)
	if d.Reason != "" {
		reason = d.Reason + " (" + reason + ")"
	}
	switch d.Effect {
	case policy.Allow:
		return "", true
	case policy.Ask:
		if v.opts.Asker != nil {
			ok, err := v.opts.Asker.Ask(v.ctx, r, d)
			if err == nil && ok {
				return "", true
			}
		}
		return string(r.Op) + ": policy asks and nobody allowed it (" + reason + ")", false
	}
	return string(r.Op) + ": " + reason, false
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

// plan validates every change and checks every valid one against the source.
func (t *checkout) plan(v *validator, changes []materialize.Change) ([]*step, error) {
	plan := make([]*step, 0, len(changes))
	for _, c := range changes {
		s, err := v.check(c)
		if err != nil {
			return nil, err
		}
		plan = append(plan, s)
	}
	made := plannedDirs(plan)
	parents := map[string]parentState{}
	for _, s := range plan {
		if s.state == stSettled {
			continue
		}
		if err := t.checkSource(v.ctx, s, made, parents); err != nil {
			return nil, err
		}
	}
	if v.opts.Conflict != ConflictKeepOurs {
		for _, s := range plan {
			s.parents = nil
		}
		return plan, nil
	}
	if err := v.keepOurs(plan); err != nil {
		return nil, err
	}
	return plan, nil
}

// plannedDirs is the set of directories the plan itself creates: what is
// written beneath them needs nothing from the source.
func plannedDirs(plan []*step) map[string]bool {
	made := map[string]bool{}
	for _, s := range plan {
		if s.state != stSettled && s.createsDir() {
			made[s.c.Path] = true
		}
	}
	return made
}

// keepOurs settles conflicts under ConflictKeepOurs: each step in conflict,
// but one whose parent is no longer a directory, is applied by force, the
// calls that adds checked in turn, still before anything is written.
func (v *validator) keepOurs(plan []*step) error {
	for _, s := range plan {
		if s.state != stConflict || s.reason == whyParentNotDir {
			continue
		}
		s.state, s.code, s.reason, s.force = stPending, "", "", true
		if err := v.vet(s, s.forcedCalls()); err != nil {
			return err
		}
	}
	return nil
}
