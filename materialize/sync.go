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
	"slices"
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
	// ConflictFail (the default) leaves the conflicting change unapplied: with
	// RejectAbort nothing at all is applied, with RejectApplyRest the changes
	// that do not depend on a conflicting one are. The error (code conflict)
	// names the paths.
	ConflictFail ConflictMode = iota
	// ConflictKeepOurs applies the sandbox's change anyway (the sandbox wins),
	// replacing whatever the source has there, and recreating the directories
	// above it that the source removed. A path whose parent the source replaced
	// by something other than a directory stays a conflict, as under
	// ConflictFail.
	ConflictKeepOurs
	// ConflictKeepTheirs keeps the source's version (the source wins): the change
	// is not applied, and neither are the changes that depend on it (the
	// contents of a directory it would have created, the removal of a directory
	// that still holds it). They are listed in NotApplied and Skipped; the
	// checkout is kept.
	ConflictKeepTheirs
)

// RejectMode says what SyncBack does with the rest of its plan when some
// changes cannot be applied: refused by validation, or in a conflict the
// ConflictMode does not settle.
type RejectMode int

// The reject modes.
const (
	// RejectAbort (the default) applies nothing: every change is listed in
	// NotApplied and the checkout is kept.
	RejectAbort RejectMode = iota
	// RejectApplyRest applies every change that is neither refused nor in
	// conflict and does not depend on one that is (a file inside a directory
	// whose creation was refused, the removal of a directory holding a path in
	// conflict); the others are listed in NotApplied and the checkout is kept.
	RejectApplyRest
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
	MaxFiles int   // entries added, modified or type-changed (deletions, mode and time changes are not counted)
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
	// OnReject says what happens to the other changes when some are refused or
	// in an unsettled conflict: RejectAbort (the default) applies none,
	// RejectApplyRest applies those that do not depend on one.
	OnReject RejectMode
	Limits   Limits
	// DryRun validates and checks for conflicts, then returns the report without
	// writing: Applied lists what would have been applied, and nothing is kept
	// or journaled.
	DryRun bool
	// Policy is an optional extra policy every change must pass as well, asked
	// during validation with the same requests as the Dir (writes with their
	// size, mkdir, remove, symlink with its target, chmod, chtimes). The source
	// Dir's own policy is always applied (through Dir.Check) whatever this is;
	// nil means nothing beyond it. Use it to hold a sync to stricter rules than
	// the Dir's, such as policy.Defaults() for a Dir that allows everything.
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
	// JournalDir is the host directory holding sync journals (see Recover);
	// "" means DefaultJournalDir(). It must not lie inside the checkout.
	JournalDir string
	// Progress, when set, is called after each call the apply makes through
	// the Dir (a file written, a directory made, a mode or time set), with the
	// number done and the total, from the goroutine running SyncBack.
	Progress func(done, total int)
	// Label is recorded in the journal for the caller to recognise its source
	// after a crash (PendingJournals): for instance the source's host path. It
	// is host-private: never put in an error.
	Label string
}

// SyncReport says what SyncBack (or Recover) did. Every change the scan found
// is in exactly one of Applied, NotApplied and Settled; Refused, Conflicts and
// Skipped are views kept for callers that want them.
type SyncReport struct {
	Applied    []Change    // applied, in the order applied (for a DryRun: what would be)
	NotApplied []Unapplied // not applied, each with its cause; the checkout is kept when this is not empty
	Settled    []Change    // nothing to do: a change of special bits only, a deletion the source had made too
	Refused    []Refusal   // changes validation refused
	Conflicts  []string    // paths changed in the source since the checkout, sorted
	Skipped    []Change    // not applied without an error: ConflictKeepTheirs, and the Settled ones
	// Checkout is the host path of the checkout when it was kept (NotApplied is
	// not empty, or Tree.Keep was called), for the host to inspect; "" when
	// Close will remove it. It is host-private: show it to the host's user,
	// never to a guest.
	Checkout string
}

// Refusal is a change validation refused.
type Refusal struct {
	Change Change
	Code   vfs.Code
	Reason string
}

// Cause says why a change was not applied.
type Cause string

// The causes.
const (
	CauseRefused  Cause = "refused"  // validation refused it (Code says why)
	CauseConflict Cause = "conflict" // the source changed it too, and the ConflictMode did not settle it
	CauseTheirs   Cause = "theirs"   // ConflictKeepTheirs kept the source's version
	CauseDepends  Cause = "depends"  // it depends on a change not applied (Reason names it)
	CauseAborted  Cause = "aborted"  // RejectAbort: other changes were refused or in conflict
	CauseLimit    Cause = "limit"    // the changes exceed the Limits: nothing was applied
	CauseFailed   Cause = "failed"   // applying it failed (Code says why)
	CauseStopped  Cause = "stopped"  // the sync stopped before it (a failure, a cancellation)
)

// Unapplied is a change that was not applied, and why. Reason names guest
// paths only.
type Unapplied struct {
	Change Change
	Cause  Cause
	Code   vfs.Code
	Reason string
}

// Keep makes Close leave the checkout directory in place, for the host to
// inspect it (a bound checkout is never removed anyway). It cannot be undone.
func (t *Tree) Keep() {
	t.mu.Lock()
	t.keepUser = true
	t.mu.Unlock()
}

// Kept reports whether Close will leave the checkout directory in place: Keep
// was called, or the last SyncBack left changes unapplied.
func (t *Tree) Kept() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.created && (t.keepUser || t.keepSync)
}

func (t *Tree) setKeepSync(v bool) {
	t.mu.Lock()
	t.keepSync = v
	t.mu.Unlock()
}

// SyncBack brings the checkout's changes (see Diff) back into the source Dir as
// one plan: all of it is validated and reported before anything is written,
// then it is applied under a journal.
//
// Plan. Every change (added, modified, deleted, type, mode and time changes)
// becomes a step with the base it assumes: its manifest entry (type, mode,
// digest or target), or nothing for an added path.
//
// Validation covers every step before anything is written, and reports every
// problem, not the first: only regular files, directories and symlinks whose
// target is relative and, resolved lexically from the link's directory, stays
// inside the tree (FIFOs, sockets and devices are refused with
// not_regular_file; other links with path_outside_sandbox); names the Dir
// could not hold (invalid_path); the Limits (quota_exceeded: then nothing is
// applied whatever OnReject says, since the scan stopped there: the changes
// scanned are listed, and the kept checkout holds the rest); and every call
// the apply phase will make through the Dir (a write with its size, mkdir,
// remove, symlink with its target, chmod, chtimes), asked first of the source
// Dir itself with Dir.Check (its read-only and lock state, its policy and its
// Asker: with policy.Defaults(), for one, the persistence traps such as
// .git/hooks/** and .bashrc and the secret patterns are refused,
// fs_permission_denied) and then of SyncOptions.Policy when set. Each check is
// in the Dir's audit trail as "check.<op>". Setuid, setgid and sticky bits are
// stripped, not refused. Then every step is compared with the source as it is
// now, through the Dir (Lstat, the digest of a file, a symlink's target, the
// names in a directory to delete, and every directory above a path to write):
// a path the source changed since the checkout, and a path written beneath a
// directory the source removed, renamed or replaced, is a conflict, handled by
// SyncOptions.Conflict; the calls keeping ours adds (removing what the source
// put in the way, restoring what it deleted, recreating removed parents) are
// checked in turn.
//
// Decision. Refused steps and unsettled conflicts are not applied. Under
// RejectAbort (the default) then nothing is; under RejectApplyRest every step
// that does not depend on one of them is. A revoked Dir or a canceled context
// ends the sync with that error, nothing written.
//
// Apply. The plan is written to a journal (see Recover) and flushed to disk
// before the first change, then applied through the Dir, so its policy, hooks
// and audit apply to each call again: removals and type changes first
// (deepest first; a type change removes the old entry and creates the new one
// in one step), then creations in path order (each file with Dir.WriteFile,
// atomically: the old contents or the new, never a mix; the data is read back
// from the checkout, and must still have the digest validated, before anything
// at its path is removed), then modes and times (directories last, deepest
// first). Every regular file written, and every file whose only
// change is its modification time, gets the checkout's modification time
// (Dir.Chtimes), so the source's times are the sandbox's and make sees what
// the sandbox's make left. When everything was applied, a directory whose
// time the sandbox changed but whose entries are as synced gets the
// sandbox's time too, if the source's still has the checkout's (see
// syncDirTimes: go test's result cache looks at it); other directories keep
// the times the apply gave them. Just before each
// step the source's entry is looked at again (an Lstat compared with what
// validation saw, the full comparison when it differs): a step whose base
// changed meanwhile is not applied (a conflict), and neither are the steps
// that depend on it; under RejectAbort the sync stops there. Dir.Check covers
// everything but the Dir's hooks and backend, so a call can still fail: a hook
// refusing it, the backend failing (a full disk), the host revoking or locking
// the Dir. SyncBack then stops (finishing only the steps it had begun, such as
// a directory's mode), returns the error, and lists that step and the ones
// after it in NotApplied. If the process dies while applying (a crash,
// kill -9), each file is wholly old or wholly new, and Recover (given the
// journal PendingJournals finds) finishes the plan.
//
// The report lists every change: Applied, NotApplied (with its cause), or
// Settled. When NotApplied is not empty the checkout is kept (Close leaves it;
// SyncReport.Checkout names it for the host) and the error is non-nil, except for
// changes ConflictKeepTheirs left out on purpose, which are listed without an
// error. Applied changes are recorded in the Manifest, so a later Diff no
// longer reports them and a later SyncBack does not apply them again; the
// changes not applied are still pending there.
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
		return rep, readOnlyChanges(op, changes)
	}
	if hit != nil {
		return rep, t.refuseAtLimit(op, rep, changes, hit, opts.DryRun)
	}
	v := &validator{ctx: ctx, src: t.src, opts: opts, lim: lim}
	plan, err := t.plan(v, changes)
	if err != nil {
		return rep, err
	}
	if hasPending(plan) && t.src.Backend().Features().ReadOnly {
		ps := stopPending(plan, stRefused, vfs.CodeReadOnly, "the source is read-only")
		fillReport(rep, plan)
		t.keepFor(rep, opts.DryRun)
		return rep, listError(vfs.CodeReadOnly, op, "source is read-only", ps)
	}
	problem := decide(plan, opts)
	if opts.DryRun {
		fillReport(rep, plan)
		rep.Applied = append(rep.Applied, pendingChanges(plan)...)
		return rep, problem
	}
	applyErr, err := t.applyPlan(ctx, opts, plan, rep)
	fillReport(rep, plan)
	if err != nil {
		t.keepFor(rep, false)
		return rep, err
	}
	t.advance(synced(plan))
	t.keepFor(rep, false)
	if applyErr != nil {
		return rep, applyErr
	}
	if problem == nil && len(rep.NotApplied) == 0 {
		t.syncDirTimes(ctx)
	}
	return rep, problem
}

// readOnlyChanges is a ReadOnly checkout's SyncBack error: read_only naming
// the changes, nil when there are none.
func readOnlyChanges(op string, changes []Change) error {
	if len(changes) == 0 {
		return nil
	}
	return listError(vfs.CodeReadOnly, op, "read-only checkout has changes", paths(changes))
}

// refuseAtLimit reports every change not applied because the scan stopped at
// hit, the change that crossed a limit, which is refused.
func (t *Tree) refuseAtLimit(op string, rep *SyncReport, changes []Change, hit *limitHit, dryRun bool) error {
	rep.Refused = []Refusal{{hit.change, vfs.CodeQuota, hit.reason}}
	for _, c := range changes {
		u := Unapplied{c, CauseLimit, vfs.CodeQuota, "not applied: the changes exceed the limits at " + hit.change.Path}
		if c.Path == hit.change.Path {
			u = Unapplied{c, CauseRefused, vfs.CodeQuota, hit.reason}
		}
		rep.NotApplied = append(rep.NotApplied, u)
	}
	t.keepFor(rep, dryRun)
	return refusalError(op, rep.Refused, 0)
}

// hasPending reports whether a step of the plan is still to apply.
func hasPending(plan []*step) bool {
	return slices.ContainsFunc(plan, func(s *step) bool { return s.state == stPending })
}

// pendingChanges lists the changes of the plan's pending steps.
func pendingChanges(plan []*step) []Change {
	var out []Change
	for _, s := range plan {
		if s.state == stPending {
			out = append(out, s.c)
		}
	}
	return out
}

// stopPending puts every pending step in state st with code and reason,
// and returns their paths.
func stopPending(plan []*step, st stepState, code vfs.Code, reason string) []string {
	var ps []string
	for _, s := range plan {
		if s.state == stPending {
			s.state, s.code, s.reason = st, code, reason
			ps = append(ps, s.c.Path)
		}
	}
	return ps
}

// applyPlan applies the plan's ops under a journal. applyErr is the error
// that stopped the apply; err, that no journal could be written (nothing was
// applied, and the pending steps are stopped).
func (t *Tree) applyPlan(ctx context.Context, opts SyncOptions, plan []*step, rep *SyncReport) (applyErr, err error) {
	ops := opsOf(plan)
	if len(ops) == 0 {
		return nil, nil
	}
	j, err := t.startJournal(opts, plan, ops)
	if err != nil {
		stopPending(plan, stStopped, vfs.CodeOf(err), "not applied: no journal could be written")
		return nil, err
	}
	a := &applier{src: t.src, rootFd: t.rootFd, onReject: opts.OnReject, fast: true, j: j, plan: plan, progress: opts.Progress}
	applyErr = a.run(ctx, ops, nil, rep)
	if err := j.finish(); err != nil && applyErr == nil {
		applyErr = err
	}
	return applyErr, nil
}

// synced lists the changes the source now has: the steps applied and the
// deletions it had already made.
func synced(plan []*step) []Change {
	var done []Change
	for _, s := range plan {
		if s.state == stApplied || (s.state == stSettled && s.c.Kind == Deleted) {
			done = append(done, s.c)
		}
	}
	return done
}

// startJournal writes the plan's journal, flushed, before anything is applied.
func (t *Tree) startJournal(opts SyncOptions, plan []*step, ops []op) (*journal, error) {
	jdir, err := openJournalDir(opts.JournalDir, t.path)
	if err != nil {
		return nil, err
	}
	return writeJournal(jdir, opts.Label, t.path, plan, ops)
}

// keepFor keeps the checkout when rep leaves changes unapplied (and lets Close
// remove it again when a later sync applied everything), and reports where.
func (t *Tree) keepFor(rep *SyncReport, dryRun bool) {
	if !dryRun {
		t.setKeepSync(len(rep.NotApplied) > 0)
	}
	if t.Kept() {
		rep.Checkout = t.path
	}
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

// stepState is where a step of the plan stands.
type stepState int

const (
	stPending  stepState = iota // to apply
	stSettled                   // nothing to do
	stRefused                   // validation refused it
	stConflict                  // an unsettled conflict
	stTheirs                    // ConflictKeepTheirs
	stBlocked                   // depends on a step not applied
	stAborted                   // RejectAbort and another step is not applied
	stApplied
	stFailed  // applying it failed
	stStopped // the sync stopped before it
)

// step is one change of the plan: the base it assumes (c.Old), what it makes
// (c.New), how to apply it, and where it stands. Its exported fields are what a
// journal records.
type step struct {
	c        Change
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
	return s.c.Kind == Deleted || s.c.Kind == TypeChanged
}

func (s *step) creates() bool {
	return s.c.Kind == Added || s.c.Kind == TypeChanged || s.c.Kind == Modified
}

// createsDir reports whether s makes a directory where the manifest had none.
func (s *step) createsDir() bool {
	return (s.c.Kind == Added || s.c.Kind == TypeChanged) && s.c.New.IsDir()
}

// setsTime reports whether applying s sets the file's modification time.
func (s *step) setsTime() bool {
	n := s.c.New
	if n == nil || !n.IsRegular() {
		return false
	}
	switch s.c.Kind {
	case ModeChanged:
		return !n.ModTime.Equal(s.c.Old.ModTime) || s.gone
	}
	return true
}

// validator checks changes against the file rules, the limits, the source Dir's
// own checks (Dir.Check) and the extra policy.
type validator struct {
	ctx  context.Context
	src  *dir.Dir
	opts SyncOptions
	lim  Limits
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
		if s.c.Kind == Modified {
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
	if s.c.Kind == ModeChanged || s.c.Kind == Touched {
		if s.gone {
			out = append(out, s.createCalls()...)
			if s.c.Kind == Touched {
				out = append(out, dirCall{op: policy.OpChmod, size: -1})
			}
		}
		return out
	}
	if s.creates() && s.c.Kind != TypeChanged && s.inTheWay {
		out = append(out, dirCall{op: policy.OpRemove, size: -1})
	}
	if s.c.Kind == Modified && s.c.New.IsRegular() && !s.chmod {
		out = append(out, dirCall{op: policy.OpChmod, size: -1})
	}
	return out
}

// check validates c and returns its step: pending, refused or settled (nothing
// to do). The error is one that ends the whole sync (the Dir revoked, the
// context canceled).
func (v *validator) check(c Change) (*step, error) {
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
	if c.Kind == ModeChanged && !s.chmod && !s.setsTime() {
		s.state = stSettled // only special bits, which are stripped: nothing to do
		return s, nil
	}
	return s, v.vet(s, s.calls())
}

// checkNew checks the entry s leaves at p and sets s.perm: a regular file,
// a directory or a symlink that stays in the tree, within the depth limit.
// It refuses s and reports false otherwise.
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
	case c.Kind == ModeChanged:
		return c.New.Mode.Perm() != c.Old.Mode.Perm()
	case !s.creates():
		return false
	case c.New.IsRegular() && c.Kind == Modified:
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
			reason := err.Error()
			var ve *vfs.Error
			if errors.As(err, &ve) && ve.Message() != "" {
				reason = ve.Message()
			}
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
func (t *Tree) plan(v *validator, changes []Change) ([]*step, error) {
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

// checkSource compares the source at s's path and above it with the
// manifest, and puts s in conflict (or settles a deletion the source made
// too). The error is one that ends the whole sync.
func (t *Tree) checkSource(ctx context.Context, s *step, made map[string]bool, parents map[string]parentState) error {
	conflict, why, err := t.sourceConflict(ctx, s, made, parents)
	if err != nil {
		return checkSourceError(s, err)
	}
	if conflict {
		s.conflict = true
		if s.state == stPending {
			s.state, s.code, s.reason = stConflict, vfs.CodeConflict, why
		}
	} else if s.c.Kind == Deleted && s.gone && s.state == stPending {
		s.state = stSettled // already deleted in the source
	}
	return nil
}

// sourceConflict reports whether the source changed s's path, or a directory
// above it, since the checkout, and why.
func (t *Tree) sourceConflict(ctx context.Context, s *step, made map[string]bool, parents map[string]parentState) (bool, string, error) {
	conflict, why, err := t.changedInSource(ctx, s)
	if err != nil {
		return false, "", err
	}
	pc, pwhy, err := t.checkParents(ctx, s, made, parents)
	// A deletion beneath a removed directory is already made; beneath
	// a directory replaced by a symlink it would reach elsewhere.
	if pc && !conflict && (s.c.Kind != Deleted || pwhy == whyParentNotDir) {
		conflict, why = true, pwhy
	}
	if s.c.Kind == Deleted {
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
	if !skippable(err) {
		return err
	}
	if s.state == stPending {
		s.refuse(code, "cannot check the source: "+messageOf(err))
	}
	return nil
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

func messageOf(err error) string {
	var ve *vfs.Error
	if errors.As(err, &ve) && ve.Message() != "" {
		return ve.Message()
	}
	return string(vfs.CodeOf(err))
}

// parentState is what the source has at a directory above a path to write.
type parentState int

const (
	parentDir     parentState = iota // a directory
	parentMissing                    // nothing
	parentOther                      // a file, a symlink, ...
)

const whyParentNotDir = "a directory above it is no longer a directory in the source"

// checkParents checks that every directory above s's path is still a directory
// in the source (not removed, renamed away or replaced by a file or a symlink),
// or is one the plan creates. Missing ones are recorded in s.parents (outermost
// first), for ConflictKeepOurs to recreate.
func (t *Tree) checkParents(ctx context.Context, s *step, made map[string]bool, cache map[string]parentState) (bool, string, error) {
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
func (t *Tree) parentAt(ctx context.Context, p string, cache map[string]parentState) (parentState, error) {
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
func (t *Tree) changedInSource(ctx context.Context, s *step) (conflict bool, why string, err error) {
	fi, err := t.src.Lstat(ctx, s.c.Path)
	s.seenSet = true
	if code := vfs.CodeOf(err); code == vfs.CodeNotFound || code == vfs.CodeNotDir {
		// Nothing there (a parent may be a file the plan replaces by a directory).
		// Added: nothing in the way. Otherwise the source deleted it: a conflict
		// unless the sandbox deleted it too.
		s.gone = true
		if s.c.Old != nil && s.c.Kind != Deleted {
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
func inTheWay(n *Entry, fi fs.FileInfo) bool {
	return n != nil && !(n.IsRegular() && fi.Mode().IsRegular()) && !(n.IsDir() && fi.IsDir())
}

// sameAs reports whether the source's entry at p (whose Lstat is fi) is what e
// describes: type, permission bits, and a file's digest or a symlink's target.
// With names set, a directory must hold nothing the manifest does not list.
func (t *Tree) sameAs(ctx context.Context, p string, fi fs.FileInfo, e *Entry, names bool) (bool, error) {
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
func sameContent(ctx context.Context, src *dir.Dir, p string, fi fs.FileInfo, e *Entry, known func(string) bool) (bool, error) {
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
	d, _, err := hashFile(h)
	return d, err
}

// under reports whether p is q or lies beneath it.
func under(p, q string) bool {
	return p == q || strings.HasPrefix(p, q+"/")
}

// decide settles what is applied: conflicts under ConflictKeepTheirs are the
// source's, and steps depending on a step not applied are blocked; under
// RejectAbort any refusal or unsettled conflict aborts every pending step. It
// returns the error to report (nil when nothing is refused or in conflict).
func decide(plan []*step, opts SyncOptions) error {
	if opts.Conflict == ConflictKeepTheirs {
		for _, s := range plan {
			if s.state == stConflict {
				s.state, s.reason = stTheirs, "the source's version kept ("+s.reason+")"
			}
		}
	}
	var refused []Refusal
	var conflicts []string
	for _, s := range plan {
		switch s.state {
		case stRefused:
			refused = append(refused, Refusal{s.c, s.code, s.reason})
		case stConflict:
			conflicts = append(conflicts, s.c.Path)
		}
	}
	block(plan)
	var err error
	switch {
	case len(refused) > 0:
		err = refusalError("syncback", refused, len(conflicts))
	case len(conflicts) > 0:
		err = listError(vfs.CodeConflict, "syncback", "changed in the source since the checkout", conflicts)
	}
	if err != nil && opts.OnReject == RejectAbort {
		for _, s := range plan {
			if s.state == stPending || s.state == stBlocked {
				s.state, s.code, s.reason = stAborted, vfs.CodeOf(err), "not applied: other changes were refused or in conflict, and the sync was aborted"
			}
		}
	}
	return err
}

// block marks blocked the pending steps that depend on a step not applied: a
// step beneath a directory that is not created, a removal of a directory above
// a path that stays. It repeats until nothing more is blocked.
func block(plan []*step) {
	for {
		notMade, kept := notApplied(plan)
		changed := false
		for _, s := range plan {
			if s.state != stPending || s.started {
				continue
			}
			if why := blockedBy(s, notMade, kept); why != "" {
				s.state, s.code, s.reason = stBlocked, vfs.CodeConflict, why
				changed = true
			}
		}
		if !changed {
			return
		}
	}
}

// notApplied maps what the steps not applied leave as it is: notMade, each
// directory not created, and kept, every path that stays and every directory
// above one, to the step's path that caused it.
func notApplied(plan []*step) (notMade, kept map[string]string) {
	notMade, kept = map[string]string{}, map[string]string{}
	for _, s := range plan {
		switch s.state {
		case stPending, stApplied, stSettled:
			continue
		}
		if s.createsDir() || s.c.Kind == TypeChanged {
			notMade[s.c.Path] = s.c.Path
		}
		for p := path.Dir(s.c.Path); p != "." && p != "/"; p = path.Dir(p) {
			if _, ok := kept[p]; !ok {
				kept[p] = s.c.Path
			}
		}
		kept[s.c.Path] = s.c.Path
	}
	return notMade, kept
}

// blockedBy is why s cannot be applied (see notApplied), "" when it can: a
// directory above it is not made, or it removes a directory above a path
// that stays.
func blockedBy(s *step, notMade, kept map[string]string) string {
	if s.c.Kind != Deleted {
		for p := path.Dir(s.c.Path); p != "." && p != "/"; p = path.Dir(p) {
			if q, ok := notMade[p]; ok {
				return "not applied: it depends on " + q + ", which is not applied"
			}
		}
	}
	if s.removes() {
		if q, ok := kept[s.c.Path]; ok && q != s.c.Path {
			return "not applied: " + q + " stays, and is inside it"
		}
	}
	return ""
}

// fillReport lists every step of the plan in the report's views.
func fillReport(rep *SyncReport, plan []*step) {
	rep.Refused, rep.Conflicts, rep.Skipped, rep.Settled, rep.NotApplied = nil, nil, nil, nil, nil
	for _, s := range plan {
		if s.conflict {
			rep.Conflicts = append(rep.Conflicts, s.c.Path)
		}
		var cause Cause
		switch s.state {
		case stSettled:
			rep.Settled = append(rep.Settled, s.c)
			rep.Skipped = append(rep.Skipped, s.c)
			continue
		case stPending:
			continue // a dry run's
		case stApplied:
			continue // listed in order by the applier
		case stRefused:
			rep.Refused = append(rep.Refused, Refusal{s.c, s.code, s.reason})
			cause = CauseRefused
		case stConflict:
			cause = CauseConflict
		case stTheirs:
			rep.Skipped = append(rep.Skipped, s.c)
			cause = CauseTheirs
		case stBlocked:
			cause = CauseDepends
		case stAborted:
			cause = CauseAborted
		case stFailed:
			cause = CauseFailed
		case stStopped:
			cause = CauseStopped
		}
		code := s.code
		if code == "" {
			code = vfs.CodeConflict
		}
		rep.NotApplied = append(rep.NotApplied, Unapplied{s.c, cause, code, s.reason})
	}
	sort.Strings(rep.Conflicts)
}

// readCheckoutAt reads a regular file of the checkout whose root handle is root
// (never following a link, never opening anything else) and checks it still
// has the validated digest.
func readCheckoutAt(root int, rel string, want *Entry) ([]byte, error) {
	const op = "syncback"
	p := vfs.MustParse(rel)
	pfd, name, err := parentOf(root, rel)
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

// refusalError is the error of a sync with refusals: the first refusal's code,
// every refused path with its reason, and how many conflicts there were too.
func refusalError(op string, rs []Refusal, conflicts int) error {
	ps := make([]string, len(rs))
	for i, r := range rs {
		ps[i] = r.Change.Path + " (" + string(r.Code) + ": " + r.Reason + ")"
	}
	what := fmt.Sprintf("%d change(s) refused", len(rs))
	if conflicts > 0 {
		what += fmt.Sprintf(" and %d in conflict", conflicts)
	}
	e := listError(rs[0].Code, op, what, ps).(*vfs.Error)
	e.Path = rs[0].Change.Path
	return e
}
