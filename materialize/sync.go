package materialize

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// ConflictMode says what SyncBack does with a path that changed in the source
// since the checkout.
type ConflictMode int

// The conflict modes.
const (
	// ConflictFail (the default) refuses the whole sync: nothing is written and
	// the error (code conflict) names the paths.
	ConflictFail ConflictMode = iota
	// ConflictKeepOurs applies the sandbox's change anyway (the sandbox wins),
	// replacing whatever the source has there.
	ConflictKeepOurs
	// ConflictKeepTheirs keeps the source's version (the source wins): the change
	// is skipped, and so are the changes that depend on it (the contents of a
	// directory it would have created, the removal of a directory that still
	// holds it).
	ConflictKeepTheirs
)

// Default limits of SyncBack, used where a Limits field is 0.
const (
	DefaultMaxFiles       = 100_000 // entries created or rewritten
	DefaultMaxBytes int64 = 1 << 30 // bytes of regular files written (1 GiB)
	DefaultMaxDepth       = 64      // path components of any path written
)

// Limits bound what one SyncBack may write. A zero field means its default
// (DefaultMaxFiles, DefaultMaxBytes, DefaultMaxDepth); a negative one, no limit.
type Limits struct {
	MaxFiles int   // entries added, modified or type-changed (deletions and mode changes are not counted)
	MaxBytes int64 // total size of the regular files written
	MaxDepth int   // number of components of the deepest path written
}

func (l Limits) withDefaults() Limits {
	if l.MaxFiles == 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxDepth == 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// SyncOptions configures SyncBack.
type SyncOptions struct {
	Conflict ConflictMode
	Limits   Limits
	// DryRun validates and checks for conflicts, then returns the report without
	// writing: Applied lists what would have been applied.
	DryRun bool
	// Policy is an optional extra policy every change must pass as well, asked
	// during validation with the same requests as the Dir (writes with their
	// size, mkdir, remove, symlink with its target, chmod). The source Dir's own
	// policy is always applied (through Dir.Check) whatever this is; nil means
	// nothing beyond it. Use it to hold a sync to stricter rules than the Dir's,
	// such as policy.Defaults() for a Dir that allows everything.
	Policy policy.Policy
	// PolicyRoot is prefixed to the paths given to Policy (not to the Dir's own
	// policy, which knows where the Dir is): the source Dir's path from the root
	// of its capability tree ("" for the root), as the Dir itself does.
	PolicyRoot string
	// Asker settles Ask decisions of Policy; without one they are refusals. (The
	// Dir's own Ask decisions go to the Dir's Asker, both when checking and when
	// writing.)
	Asker policy.Asker
	// Subject is put in the Subject of Policy's requests.
	Subject string
}

// SyncReport says what SyncBack did.
type SyncReport struct {
	Applied   []Change  // applied, in order (or, for a DryRun, to be applied)
	Refused   []Refusal // changes validation refused (then nothing was applied)
	Conflicts []string  // paths changed in the source since the checkout, sorted
	Skipped   []Change  // not applied: ConflictKeepTheirs, or nothing to do (a change of special bits only, a deletion already made in the source)
}

// Refusal is a change validation refused.
type Refusal struct {
	Change Change
	Code   vfs.Code
	Reason string
}

// SyncBack brings the checkout's changes (see Diff) back into the source Dir.
//
// Validation comes first and covers every change before anything is written:
// only regular files, directories and symlinks whose target is relative and,
// resolved lexically from the link's directory, stays inside the tree (FIFOs,
// sockets and devices are refused with not_regular_file; other links with
// path_outside_sandbox); names the Dir could not hold (invalid_path); the
// Limits (quota_exceeded); and every call the apply phase will make through the
// Dir (a write with its size, mkdir, remove, symlink with its target, chmod),
// asked first of the source Dir itself with Dir.Check (its read-only and lock
// state, its policy and its Asker: with policy.Defaults(), for one, the
// persistence traps such as .git/hooks/** and .bashrc and the secret patterns
// are refused, fs_permission_denied) and then of SyncOptions.Policy when set.
// Each check is in the Dir's audit trail as "check.<op>". Setuid, setgid and
// sticky bits are stripped, not refused. Then every path to change is compared
// with the source as it is now, through the Dir (Lstat, the digest of a file, a
// symlink's target, the names in a directory to delete): a path that changed
// since the checkout is a conflict, handled by SyncOptions.Conflict; the calls
// keeping ours adds (removing what the source put in the way, restoring what it
// deleted) are checked in turn. A refusal, or a conflict under ConflictFail,
// returns an error (its code, naming the paths) with the report, and the source
// is untouched. A revoked Dir or a canceled context ends the sync with that
// error, nothing written.
//
// Then the changes are applied through the Dir, so its policy, hooks and audit
// apply to each again: removals first (deepest first), then creations in path
// order (each file with Dir.WriteFile, atomically: the old contents or the new,
// never a mix; the data is read back from the checkout and must still have the
// digest validated), then modes (directories last, deepest first). Symlinks are
// replaced by removing and recreating them. Dir.Check covers everything but the
// Dir's hooks and backend, so a call can still fail midway: a hook refusing it,
// the backend failing (a full disk, a quota), the host revoking or locking the
// Dir or changing its answer (an Asker saying no the second time), a RemoveAll
// under ConflictKeepOurs meeting a path the source added that the policy
// protects, or the checkout edited during the sync. SyncBack then stops there
// and returns the error with the report, whose Applied lists what was applied:
// it is not a transaction.
//
// Applied changes are recorded in the Manifest, so a later Diff no longer
// reports them and a later SyncBack does not apply them again; changes not
// applied (skipped, or after a failure) are still reported.
//
// A ReadOnly checkout has nothing to sync: with no changes SyncBack returns an
// empty report, otherwise read_only naming them.
func (t *Tree) SyncBack(ctx context.Context, opts SyncOptions) (*SyncReport, error) {
	const op = "syncback"
	if err := t.live(op); err != nil {
		return nil, err
	}
	lim := opts.Limits.withDefaults()
	rep := &SyncReport{}
	changes, hit, err := t.scan(ctx, lim)
	if err != nil {
		return nil, err
	}
	if t.opts.ReadOnly {
		if len(changes) == 0 {
			return rep, nil
		}
		return rep, listError(vfs.CodeReadOnly, op, "read-only checkout has changes", paths(changes))
	}
	if hit != nil {
		rep.Refused = append(rep.Refused, Refusal{hit.change, vfs.CodeQuota, hit.reason})
		return rep, refusalError(op, rep.Refused)
	}
	v := &validator{ctx: ctx, src: t.src, opts: opts, lim: lim}
	var plan []*step
	for _, c := range changes {
		s, refusals, err := v.check(c)
		if err != nil {
			return rep, err
		}
		rep.Refused = append(rep.Refused, refusals...)
		if s != nil {
			plan = append(plan, s)
		} else if len(refusals) == 0 {
			rep.Skipped = append(rep.Skipped, c)
		}
	}
	if len(rep.Refused) > 0 {
		return rep, refusalError(op, rep.Refused)
	}
	if len(plan) > 0 && t.src.Backend().Features().ReadOnly {
		return rep, listError(vfs.CodeReadOnly, op, "source is read-only", stepPaths(plan))
	}

	// Conflicts.
	var conflicted []*step
	for _, s := range plan {
		conflict, gone, err := t.changedInSource(ctx, s)
		if err != nil {
			if skippable(err) {
				rep.Refused = append(rep.Refused, Refusal{s.c, vfs.CodeOf(err), "cannot check the source: " + err.Error()})
				continue
			}
			return rep, err
		}
		s.gone = gone
		if conflict {
			s.conflict = true
			conflicted = append(conflicted, s)
			rep.Conflicts = append(rep.Conflicts, s.c.Path)
		}
	}
	if len(rep.Refused) > 0 {
		return rep, refusalError(op, rep.Refused)
	}
	if len(conflicted) > 0 {
		switch opts.Conflict {
		case ConflictKeepOurs:
			for _, s := range conflicted {
				s.force = true
			}
		case ConflictKeepTheirs:
			skipDependents(plan)
		default:
			return rep, listError(vfs.CodeConflict, op, "changed in the source since the checkout", rep.Conflicts)
		}
	}
	var todo []*step
	var settled []Change
	for _, s := range plan {
		switch {
		case s.skip:
			rep.Skipped = append(rep.Skipped, s.c)
		case s.c.Kind == Deleted && s.gone:
			rep.Skipped = append(rep.Skipped, s.c) // already deleted in the source
			settled = append(settled, s.c)
		default:
			todo = append(todo, s)
		}
	}
	// What keeping ours adds (clearing the way, restoring what the source
	// deleted) is checked too, still before anything is written.
	for _, s := range todo {
		refusals, err := v.vet(s, s.forcedCalls())
		if err != nil {
			return rep, err
		}
		rep.Refused = append(rep.Refused, refusals...)
	}
	if len(rep.Refused) > 0 {
		return rep, refusalError(op, rep.Refused)
	}
	if opts.DryRun {
		for _, s := range todo {
			rep.Applied = append(rep.Applied, s.c)
		}
		return rep, nil
	}
	err = t.apply(ctx, todo, rep)
	t.advance(append(settled, rep.Applied...))
	return rep, err
}

// advance records applied changes in the manifest, so that the next Diff or
// SyncBack starts from the state the source now has. Their files are marked
// racy: the next Diff re-reads them rather than trust a stat taken now.
func (t *Tree) advance(applied []Change) {
	m := t.manifest
	for _, c := range applied {
		if c.Kind == Deleted {
			delete(m.Entries, c.Path)
			delete(m.stat, c.Path)
			continue
		}
		m.Entries[c.Path] = *c.New
		delete(m.stat, c.Path)
		if c.New.IsRegular() {
			m.stat[c.Path] = statKey{racy: true}
		}
	}
}

// step is one validated change and how to apply it.
type step struct {
	c        Change
	p        vfs.Path
	perm     fs.FileMode // the permission bits to leave (special bits stripped)
	chmod    bool        // set perm explicitly
	conflict bool
	force    bool // ConflictKeepOurs: replace whatever is in the way
	skip     bool // ConflictKeepTheirs
	gone     bool // the source has nothing at the path
	inTheWay bool // the source has an entry there that creating the new one must first remove
}

func (s *step) removes() bool {
	return s.c.Kind == Deleted || s.c.Kind == TypeChanged
}

func (s *step) creates() bool {
	return s.c.Kind == Added || s.c.Kind == TypeChanged || s.c.Kind == Modified
}

// validator checks changes against the file rules, the limits, the source Dir's
// own checks (Dir.Check) and the extra policy.
type validator struct {
	ctx  context.Context
	src  *dir.Dir
	opts SyncOptions
	lim  Limits
}

func refuse(c Change, code vfs.Code, reason string) []Refusal {
	return []Refusal{{Change: c, Code: code, Reason: reason}}
}

// dirCall is one call apply makes through the Dir at a step's path, as Dir.Check
// and the extra policy are asked about it.
type dirCall struct {
	op     policy.Op
	target string // a symlink's target text (OpSymlink)
	size   int64  // the bytes a write leaves in the file (OpWrite), else -1
}

// calls returns the Dir calls applying s makes when nothing in the source is in
// the way: the removal of the old entry, the creation of the new one, its chmod.
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
	return out
}

// createCalls returns the calls that create s's new entry (see Tree.create).
func (s *step) createCalls() []dirCall {
	n := s.c.New
	switch {
	case n.IsRegular():
		return []dirCall{{op: policy.OpWrite, size: n.Size}}
	case n.IsDir():
		return []dirCall{{op: policy.OpMkdir, size: -1}}
	case n.IsSymlink():
		var out []dirCall
		if s.c.Kind == Modified {
			out = append(out, dirCall{op: policy.OpRemove, size: -1})
		}
		return append(out, dirCall{op: policy.OpSymlink, target: n.Target, size: -1})
	}
	return nil
}

// forcedCalls returns the calls beyond calls() that applying s makes once the
// conflict check has settled it: under ConflictKeepOurs, the removal of what the
// source put in the way, the chmod that puts a rewritten file's mode back, and
// the re-creation of an entry the source deleted.
func (s *step) forcedCalls() []dirCall {
	if !s.force {
		return nil
	}
	if s.c.Kind == ModeChanged {
		if s.gone {
			return s.createCalls()
		}
		return nil
	}
	var out []dirCall
	if s.creates() && s.c.Kind != TypeChanged && s.inTheWay {
		out = append(out, dirCall{op: policy.OpRemove, size: -1})
	}
	if s.c.Kind == Modified && s.c.New.IsRegular() && !s.chmod {
		out = append(out, dirCall{op: policy.OpChmod, size: -1})
	}
	return out
}

// check validates c and returns its step, or refusals, or neither (nothing to
// do). The error is one that ends the whole sync (the Dir revoked, the context
// canceled).
func (v *validator) check(c Change) (*step, []Refusal, error) {
	p, err := vfs.ParseGuest(c.Path)
	if err != nil || p.String() != c.Path {
		return nil, refuse(c, vfs.CodeInvalidPath, "name not allowed in the tree"), nil
	}
	s := &step{c: c, p: p}
	if c.New != nil {
		s.perm = c.New.Mode.Perm()
		switch {
		case c.New.IsRegular(), c.New.IsDir():
		case c.New.IsSymlink():
			if _, err := vfs.SymlinkTarget(p, c.New.Target); err != nil {
				code := vfs.CodeOf(err)
				return nil, refuse(c, code, "symlink target "+quote(c.New.Target)+" is absolute or leaves the tree"), nil
			}
		default:
			return nil, refuse(c, vfs.CodeNotRegular, "special file ("+c.New.Type.String()+")"), nil
		}
		if v.lim.MaxDepth >= 0 && p.Depth() > v.lim.MaxDepth {
			return nil, refuse(c, vfs.CodeQuota, fmt.Sprintf("deeper than the limit of %d", v.lim.MaxDepth)), nil
		}
	}
	if s.creates() {
		switch {
		case c.New.IsRegular() && c.Kind == Modified:
			s.chmod = s.perm != c.Old.Mode.Perm()
		case c.New.IsDir():
			s.chmod = s.perm != 0o755
		}
	}
	if c.Kind == ModeChanged {
		if c.New.Mode.Perm() == c.Old.Mode.Perm() {
			return nil, nil, nil // only special bits, which are stripped: nothing to do
		}
		s.chmod = true
	}
	r, err := v.vet(s, s.calls())
	if r != nil || err != nil {
		return nil, r, err
	}
	return s, nil, nil
}

// vet asks the source Dir (Dir.Check: its revocation, read-only and lock state,
// its policy and Asker) and then the extra policy, if any, about each call, and
// returns the first refusal.
func (v *validator) vet(s *step, calls []dirCall) ([]Refusal, error) {
	for _, dc := range calls {
		if err := v.src.Check(v.ctx, dc.op, s.c.Path, dc.target, dc.size); err != nil {
			switch vfs.CodeOf(err) {
			case vfs.CodeRevoked, vfs.CodeCanceled:
				return nil, vfs.Readdress(err, "syncback", s.c.Path, "")
			}
			if v.ctx.Err() != nil {
				return nil, vfs.Readdress(err, "syncback", s.c.Path, "")
			}
			reason := err.Error()
			var ve *vfs.Error
			if errors.As(err, &ve) && ve.Message() != "" {
				reason = ve.Message()
			}
			return refuse(s.c, vfs.CodeOf(err), string(dc.op)+": "+reason), nil
		}
		if v.opts.Policy == nil {
			continue
		}
		dest := ""
		if dc.op == policy.OpSymlink {
			q, _ := vfs.SymlinkTarget(s.p, dc.target) // validated by check
			dest = q.String()
		}
		r := v.req(dc.op, s.c.Path, dest, dc.size)
		if reason, ok := v.allowed(&r); !ok {
			return refuse(s.c, vfs.CodePermission, reason), nil
		}
	}
	return nil, nil
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

// changedInSource compares the source's current state at s's path with the
// manifest (or, for an added path, with nothing) and reports a conflict, and
// whether the source has nothing there.
func (t *Tree) changedInSource(ctx context.Context, s *step) (conflict, gone bool, err error) {
	fi, err := t.src.Lstat(ctx, s.c.Path)
	if code := vfs.CodeOf(err); code == vfs.CodeNotFound || code == vfs.CodeNotDir {
		// Nothing there (a parent may be a file the plan replaces by a directory).
		// Added: nothing in the way. Otherwise the source deleted it: a conflict
		// unless the sandbox deleted it too.
		return s.c.Old != nil && s.c.Kind != Deleted, true, nil
	}
	if err != nil {
		return false, false, err
	}
	if n := s.c.New; n != nil {
		s.inTheWay = !(n.IsRegular() && fi.Mode().IsRegular()) && !(n.IsDir() && fi.IsDir())
	}
	old := s.c.Old
	if old == nil {
		// Added in both: only two directories agree.
		return !(s.c.New.IsDir() && fi.IsDir()), false, nil
	}
	if fi.Mode().Type() != old.Type || fi.Mode().Perm() != old.Mode.Perm() {
		return true, false, nil
	}
	switch {
	case old.IsRegular():
		if fi.Size() != old.Size {
			return true, false, nil
		}
		d, err := t.sourceDigest(ctx, s.c.Path)
		if err != nil {
			return false, false, err
		}
		return d != old.Digest, false, nil
	case old.IsSymlink():
		target, err := t.src.Readlink(ctx, s.c.Path)
		if err != nil {
			return false, false, err
		}
		return target != old.Target, false, nil
	case old.IsDir() && s.removes():
		names, err := t.src.List(ctx, s.c.Path)
		if err != nil {
			return false, false, err
		}
		for _, n := range names {
			if _, ok := t.manifest.Entries[s.c.Path+"/"+n]; !ok {
				return true, false, nil // the source added something inside
			}
		}
	}
	return false, false, nil
}

func (t *Tree) sourceDigest(ctx context.Context, p string) (string, error) {
	h, err := t.src.Open(ctx, p, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer h.Close()
	d, _, err := hashFile(h)
	return d, err
}

// skipDependents marks the conflicted steps skipped (ConflictKeepTheirs) and,
// with them, creations beneath a skipped path and removals of directories above
// one.
func skipDependents(plan []*step) {
	var skipped []vfs.Path
	for _, s := range plan {
		if s.conflict {
			s.skip = true
			skipped = append(skipped, s.p)
		}
	}
	for _, s := range plan {
		if s.skip {
			continue
		}
		for _, q := range skipped {
			if (s.creates() && s.p.HasPrefix(q)) || (s.removes() && q.HasPrefix(s.p)) {
				s.skip = true
				break
			}
		}
	}
}

// apply writes the plan through the Dir, recording each applied change.
func (t *Tree) apply(ctx context.Context, plan []*step, rep *SyncReport) error {
	var removals, creations, dirModes []*step
	for _, s := range plan {
		if s.removes() {
			removals = append(removals, s)
		}
		if s.creates() {
			creations = append(creations, s)
		}
	}
	sort.SliceStable(removals, func(i, j int) bool { return removals[i].p.Depth() > removals[j].p.Depth() })
	done := map[*step]bool{}
	finish := func(s *step) {
		if !done[s] {
			done[s] = true
			rep.Applied = append(rep.Applied, s.c)
		}
	}
	for _, s := range removals {
		if err := t.remove(ctx, s); err != nil {
			return err
		}
		if s.c.Kind == Deleted {
			finish(s)
		}
	}
	for _, s := range creations {
		if err := t.create(ctx, s); err != nil {
			return err
		}
		if s.chmod && s.c.New.IsDir() {
			dirModes = append(dirModes, s)
			continue
		}
		finish(s)
	}
	for _, s := range plan {
		if s.c.Kind != ModeChanged {
			continue
		}
		if s.gone {
			// Keep ours, and the source deleted it: bring the whole entry back.
			if err := t.create(ctx, s); err != nil {
				return err
			}
		}
		if s.c.New.IsDir() {
			dirModes = append(dirModes, s)
			continue
		}
		if err := t.src.Chmod(ctx, s.c.Path, s.perm); err != nil {
			return err
		}
		finish(s)
	}
	sort.SliceStable(dirModes, func(i, j int) bool { return dirModes[i].p.Depth() > dirModes[j].p.Depth() })
	for _, s := range dirModes {
		if err := t.src.Chmod(ctx, s.c.Path, s.perm); err != nil {
			return err
		}
		finish(s)
	}
	return nil
}

// remove removes the source's entry at s's path (the old one of a type change).
func (t *Tree) remove(ctx context.Context, s *step) error {
	if s.gone {
		return nil
	}
	if s.force {
		return t.src.RemoveAll(ctx, s.c.Path)
	}
	return t.src.Remove(ctx, s.c.Path)
}

// create writes the new entry at s's path.
func (t *Tree) create(ctx context.Context, s *step) error {
	n := s.c.New
	if s.force && !s.gone && s.c.Kind != TypeChanged {
		// Keep ours: clear what the source put in the way, unless it can be
		// written over as it is (a file by a file, a directory kept for one).
		fi, err := t.src.Lstat(ctx, s.c.Path)
		if err == nil && !(n.IsRegular() && fi.Mode().IsRegular()) && !(n.IsDir() && fi.IsDir()) {
			if err := t.src.RemoveAll(ctx, s.c.Path); err != nil {
				return err
			}
		}
	}
	switch {
	case n.IsDir():
		if _, err := t.src.CreateDir(ctx, s.c.Path); err != nil {
			if fi, serr := t.src.Lstat(ctx, s.c.Path); serr != nil || !fi.IsDir() {
				return err
			}
		}
	case n.IsSymlink():
		if s.c.Kind == Modified {
			if err := t.src.Remove(ctx, s.c.Path); err != nil && vfs.CodeOf(err) != vfs.CodeNotFound {
				return err
			}
		}
		return t.src.Symlink(ctx, n.Target, s.c.Path)
	default:
		data, err := t.readCheckout(s.c.Path, n)
		if err != nil {
			return err
		}
		if err := t.src.WriteFile(ctx, s.c.Path, data, s.perm); err != nil {
			return err
		}
		if s.chmod || (s.force && s.c.Kind == Modified) {
			return t.src.Chmod(ctx, s.c.Path, s.perm)
		}
	}
	return nil
}

// readCheckout reads a regular file of the checkout (never following a link,
// never opening anything else) and checks it still has the validated digest.
func (t *Tree) readCheckout(rel string, want *Entry) ([]byte, error) {
	const op = "syncback"
	p := vfs.MustParse(rel)
	pfd, name, err := parentOf(t.rootFd, rel)
	if err != nil {
		return nil, vfs.Errno(op, p, err)
	}
	defer unix.Close(pfd)
	f, st, err := openRegularAt(pfd, name, nil)
	if err != nil {
		if errors.Is(err, errNotRegular) {
			return nil, vfs.NewError(vfs.CodeConflict, op, p, "checkout changed during the sync")
		}
		return nil, vfs.Errno(op, p, err)
	}
	defer f.Close()
	if st.Size != want.Size {
		return nil, vfs.NewError(vfs.CodeConflict, op, p, "checkout changed during the sync")
	}
	data := make([]byte, 0, st.Size)
	h := sha256.New()
	buf := bytesWriter{&data}
	if _, err := io.Copy(io.MultiWriter(h, buf), io.LimitReader(f, want.Size+1)); err != nil {
		return nil, vfs.Errno(op, p, err)
	}
	if int64(len(data)) != want.Size || hex.EncodeToString(h.Sum(nil)) != want.Digest {
		return nil, vfs.NewError(vfs.CodeConflict, op, p, "checkout changed during the sync")
	}
	return data, nil
}

type bytesWriter struct{ b *[]byte }

func (w bytesWriter) Write(p []byte) (int, error) {
	*w.b = append(*w.b, p...)
	return len(p), nil
}

func paths(cs []Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Path
	}
	return out
}

func stepPaths(ss []*step) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.c.Path
	}
	return out
}

// listError is an error naming paths: the first as its Path, all (up to ten) in
// its message.
func listError(code vfs.Code, op, what string, ps []string) error {
	const show = 10
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", what)
	for i, p := range ps {
		if i == show {
			fmt.Fprintf(&b, ", and %d more", len(ps)-show)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p)
	}
	first := ""
	if len(ps) > 0 {
		first = ps[0]
	}
	e := vfs.NewError(code, op, vfs.Root, b.String())
	e.Path = first
	return e
}

// refusalError is the error of a refused sync: the first refusal's code, every
// refused path with its reason.
func refusalError(op string, rs []Refusal) error {
	ps := make([]string, len(rs))
	for i, r := range rs {
		ps[i] = r.Change.Path + " (" + string(r.Code) + ": " + r.Reason + ")"
	}
	e := listError(rs[0].Code, op, fmt.Sprintf("%d change(s) refused, nothing written", len(rs)), ps).(*vfs.Error)
	e.Path = rs[0].Change.Path
	return e
}
