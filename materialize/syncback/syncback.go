//go:build linux

package syncback

import (
	"context"
	"slices"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// ConflictMode says what [Run] does with a path that changed in the source
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

// RejectMode says what [Run] does with the rest of its plan when some
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

// Options configures [Run].
type Options struct {
	Conflict ConflictMode
	// OnReject says what happens to the other changes when some are refused or
	// in an unsettled conflict: RejectAbort (the default) applies none,
	// RejectApplyRest applies those that do not depend on one.
	OnReject RejectMode
	Limits   materialize.Limits
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
	// number done and the total, from the goroutine running [Run].
	Progress func(done, total int)
	// Label is recorded in the journal for the caller to recognise its source
	// after a crash ([Pending]): for instance the source's host path. It
	// is host-private: never put in an error.
	Label string
}

// Report says what [Run] (or [Recover]) did. Every change the scan found
// is in exactly one of Applied, NotApplied and Settled; Refused, Conflicts and
// Skipped are views kept for callers that want them.
type Report struct {
	Applied    []materialize.Change  // applied, in the order applied (for a DryRun: what would be)
	NotApplied []Unapplied           // not applied, each with its cause; the checkout is kept when this is not empty
	Settled    []materialize.Change  // nothing to do: a change of special bits only, a deletion the source had made too
	Refused    []materialize.Refusal // changes validation refused
	Conflicts  []string              // paths changed in the source since the checkout, sorted
	Skipped    []materialize.Change  // not applied without an error: ConflictKeepTheirs, and the Settled ones
	// Checkout is the host path of the checkout when it was kept (NotApplied is
	// not empty, or Tree.Keep was called), for the host to inspect; "" when
	// Close will remove it. It is host-private: show it to the host's user,
	// never to a guest.
	Checkout string
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
	Change materialize.Change
	Cause  Cause
	Code   vfs.Code
	Reason string
}

// Run brings the checkout's changes (see [materialize.Tree.Diff]) back into
// the source Dir as one plan: all of it is validated and reported before
// anything is written, then it is applied under a journal.
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
// fs_permission_denied) and then of [Options].Policy when set. Each check is
// in the Dir's audit trail as "check.<op>". Setuid, setgid and sticky bits are
// stripped, not refused. Then every step is compared with the source as it is
// now, through the Dir (Lstat, the digest of a file, a symlink's target, the
// names in a directory to delete, and every directory above a path to write):
// a path the source changed since the checkout, and a path written beneath a
// directory the source removed, renamed or replaced, is a conflict, handled by
// [Options].Conflict; the calls keeping ours adds (removing what the source
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
// [materialize.Tree.SyncDirTimes]: go test's result cache looks at it); other
// directories keep
// the times the apply gave them. Just before each
// step the source's entry is looked at again (an Lstat compared with what
// validation saw, the full comparison when it differs): a step whose base
// changed meanwhile is not applied (a conflict), and neither are the steps
// that depend on it; under RejectAbort the sync stops there. Dir.Check covers
// everything but the Dir's hooks and backend, so a call can still fail: a hook
// refusing it, the backend failing (a full disk), the host revoking or locking
// the Dir. Run then stops (finishing only the steps it had begun, such as
// a directory's mode), returns the error, and lists that step and the ones
// after it in NotApplied. If the process dies while applying (a crash,
// kill -9), each file is wholly old or wholly new, and Recover (given the
// journal [Pending] finds) finishes the plan.
//
// The report lists every change: Applied, NotApplied (with its cause), or
// Settled. When NotApplied is not empty the checkout is kept (Close leaves it;
// [Report].Checkout names it for the host) and the error is non-nil, except for
// changes ConflictKeepTheirs left out on purpose, which are listed without an
// error. Applied changes are recorded in the Manifest, so a later Diff no
// longer reports them and a later Run does not apply them again; the
// changes not applied are still pending there.
//
// A ReadOnly checkout has nothing to sync: with no changes Run returns an
// empty report, otherwise read_only naming them.
func Run(ctx context.Context, tr *materialize.Tree, opts Options) (*Report, error) {
	const op = "syncback"
	if tr == nil {
		return nil, vfs.NewError(vfs.CodeInvalidPath, op, vfs.Root, "nil checkout")
	}
	if err := tr.Live(op); err != nil {
		return nil, err
	}
	return newCheckout(tr).run(ctx, opts)
}

// checkout is the Tree a sync runs on, with what the sync reads of it often.
type checkout struct {
	*materialize.Tree
	src      *dir.Dir              // the source: every change goes through it
	manifest *materialize.Manifest // the base every change is compared with
	path     string                // the checkout's host path (host-private)
}

// newCheckout reads what a sync needs of tr once.
func newCheckout(tr *materialize.Tree) *checkout {
	return &checkout{Tree: tr, src: tr.Source(), manifest: tr.Manifest(), path: tr.Path()}
}

// run is Run on a live checkout.
func (t *checkout) run(ctx context.Context, opts Options) (*Report, error) {
	const op = "syncback"
	lim := opts.Limits.WithDefaults()
	rep := &Report{}
	changes, hit, err := t.DiffWithin(ctx, lim)
	if err != nil {
		if !opts.DryRun {
			t.SetSyncKept(true) // what the scan could not read may be changes
		}
		return nil, err
	}
	if t.ReadOnly() {
		return rep, readOnlyChanges(op, changes)
	}
	if hit != nil {
		return rep, t.refuseAtLimit(op, rep, changes, hit, opts.DryRun)
	}
	v := &validator{ctx: ctx, src: t.src, opts: opts, lim: lim}
	plan, err := t.plan(v, changes)
	if err != nil {
		t.stopped(rep, changes, err, opts.DryRun)
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
	t.Advance(synced(plan))
	t.keepFor(rep, false)
	if applyErr != nil {
		return rep, applyErr
	}
	if problem == nil && len(rep.NotApplied) == 0 {
		t.SyncDirTimes(ctx)
	}
	return rep, problem
}

// readOnlyChanges is a ReadOnly checkout's Run error: read_only naming
// the changes, nil when there are none.
func readOnlyChanges(op string, changes []materialize.Change) error {
	if len(changes) == 0 {
		return nil
	}
	return listError(vfs.CodeReadOnly, op, "read-only checkout has changes", paths(changes))
}

// refuseAtLimit reports every change not applied because the scan stopped at
// hit, the change that crossed a limit, which is refused.
func (t *checkout) refuseAtLimit(op string, rep *Report, changes []materialize.Change, hit *materialize.LimitHit, dryRun bool) error {
	rep.Refused = []materialize.Refusal{{Change: hit.Change, Code: vfs.CodeQuota, Reason: hit.Reason}}
	for _, c := range changes {
		u := Unapplied{c, CauseLimit, vfs.CodeQuota, "not applied: the changes exceed the limits at " + hit.Change.Path}
		if c.Path == hit.Change.Path {
			u = Unapplied{c, CauseRefused, vfs.CodeQuota, hit.Reason}
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
func pendingChanges(plan []*step) []materialize.Change {
	var out []materialize.Change
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
func (t *checkout) applyPlan(ctx context.Context, opts Options, plan []*step, rep *Report) (applyErr, err error) {
	ops := opsOf(plan)
	if len(ops) == 0 {
		return nil, nil
	}
	j, err := t.startJournal(opts, plan, ops)
	if err != nil {
		stopPending(plan, stStopped, vfs.CodeOf(err), "not applied: no journal could be written")
		return nil, err
	}
	a := &applier{src: t.src, read: t.ReadFile, onReject: opts.OnReject, fast: true, j: j, plan: plan, progress: opts.Progress}
	applyErr = a.run(ctx, ops, nil, rep)
	if err := j.finish(); err != nil && applyErr == nil {
		applyErr = err
	}
	return applyErr, nil
}

// synced lists the changes the source now has: the steps applied and the
// deletions it had already made.
func synced(plan []*step) []materialize.Change {
	var done []materialize.Change
	for _, s := range plan {
		if s.state == stApplied || (s.state == stSettled && s.c.Kind == materialize.Deleted) {
			done = append(done, s.c)
		}
	}
	return done
}

// startJournal writes the plan's journal, flushed, before anything is applied.
func (t *checkout) startJournal(opts Options, plan []*step, ops []op) (*journal, error) {
	jdir, err := openJournalDir(opts.JournalDir, t.path)
	if err != nil {
		return nil, err
	}
	return writeJournal(jdir, opts.Label, t.path, plan, ops)
}

// stopped reports every change as not applied, because the sync-back
// stopped before its plan was made (err: a source the Dir no longer
// reaches, a revoked grant), and keeps the checkout that holds them.
func (t *checkout) stopped(rep *Report, changes []materialize.Change, err error, dryRun bool) {
	for _, c := range changes {
		rep.NotApplied = append(rep.NotApplied, Unapplied{Change: c, Cause: CauseStopped, Code: vfs.CodeOf(err), Reason: messageOf(err)})
	}
	t.keepFor(rep, dryRun)
}

// keepFor keeps the checkout when rep leaves changes unapplied (and lets Close
// remove it again when a later sync applied everything), and reports where.
func (t *checkout) keepFor(rep *Report, dryRun bool) {
	if !dryRun {
		t.SetSyncKept(len(rep.NotApplied) > 0)
	}
	if t.Kept() {
		rep.Checkout = t.path
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

// parentState is what the source has at a directory above a path to write.
type parentState int

const (
	parentDir     parentState = iota // a directory
	parentMissing                    // nothing
	parentOther                      // a file, a symlink, ...
)
