package dir

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

var (
	defaultPolicy = policy.AllowAll
	discardSink   = audit.Discard
)

// scope is what every capability holds: the storage it names and the authority over
// it. Dir is a scope; a File is a scope (its parent directory) plus a leaf; a Handle
// keeps the scope it was opened through. scope values are immutable.
type scope struct {
	env  *env
	gate *gate
	ro   bool        // ReadOnly() attenuation: permanent
	b    vfs.Backend // the storage, rooted at this capability's root (pinned)
	base vfs.Path    // b's root, from the capability tree's root (for policy and audit)
	// locates says b is a vfs.Locator whose answers, re-based at locPrefix, are
	// b's root from the tree's root (see pin).
	locates   bool
	locPrefix vfs.Path
	// stater is b when it answers Stat with a status it keeps (see statAs),
	// asserted once here rather than on every Stat.
	stater fileInfoStater
	// kept is b when it answers a status call's resolution with the status
	// it keeps (see resolveCall).
	kept keptStater
	// regular is b when it reads a regular file whole without a handle (see
	// readRegular).
	regular regularReader
	// free is b when it can say it holds no symlink (see canonStat).
	free linkFreer
	// opens and lists say b resolves, decides and acts in one call for reads
	// (vfs.OpenResolver) and listings (vfs.ListResolver); see fuses.
	opens, lists bool
}

// setBackend makes b the scope's storage.
func (s *scope) setBackend(b vfs.Backend) {
	s.b = b
	s.stater, _ = b.(fileInfoStater)
	s.regular, _ = b.(regularReader)
	s.kept, _ = b.(keptStater)
	s.free, _ = b.(linkFreer)
	_, s.opens = b.(vfs.OpenResolver)
	_, s.lists = b.(vfs.ListResolver)
}

// fuses reports whether the scope's backend runs a fused call of sp (a read or a
// listing) in one call of its own. For a backend that does not, the fused
// form is vfs.ResolveOpen's or vfs.ResolveReadDir's fallback: the very steps
// of an unfused call (resolve, decide, act on the Resolved path), so runFull
// takes those, without the callbacks' allocations.
func (s *scope) fuses(sp *spec) bool {
	switch sp.op {
	case policy.OpRead:
		return s.opens
	case policy.OpList:
		return s.lists
	}
	return true
}

// destKind says how a call's second argument is interpreted.
type destKind uint8

const (
	destNone   destKind = iota
	destPath            // a second guest path (rename, copy, link)
	destTarget          // a symlink target, validated against the link's directory
)

// call is one public call on its way through run: its method's spec and what
// differs from call to call. Callers declare it as a local and hand run a
// closure that reads it: nothing retains a *call after run returns, so it stays
// on the caller's stack.
type call struct {
	sp   *spec
	path string // the guest's path, as written
	dest string // the guest's second path or symlink target
	// size is Request.Size plus one, so that the zero value means unknown (-1).
	size int64
	// innerRule is the rule that refused a path inside a composite call (set by
	// allowInner); the call is then audited as denied by that rule.
	innerRule string
	// prepare, when set, replaces path parsing in step 2 (Glob patterns); it fills
	// the call it was made for.
	prepare func() error
	// ad is set by step 4 for a fused read (sp.fused, on a backend that fuses):
	// step 4 decides on the guest's path, then leaves the canonical decision
	// and the Before hooks to admit, which openRead or readDir calls from
	// inside the resolution (fusedCall).
	ad *fusedAdmission

	p, q vfs.Path // parsed paths, relative to the scope's backend (set by the caller for sp.fixed)
	// rp and rq are the paths the operation acts on: p and q, or with a policy or
	// hooks to serve, their canonical locations, marked Resolved.
	rp, rq vfs.Path
	// base is the scope's root from the tree's root at the time of the call.
	base vfs.Path
	// got says what the resolution of a status call (sp.status) learnt: info,
	// that status, or that nothing is there; or for sp.kept, kept (the
	// backend's own, shared, immutable status, with got infoKept).
	got  infoState
	info vfs.Info
	kept fs.FileInfo
	// req is the request the policy and hooks see, made in step 4 only when the Dir
	// has a custom policy or hooks; nil otherwise.
	req *policy.Request
}

// addressed marks an error that fn has already given its final, guest-facing form
// (an error about a path deeper than the one the guest named, or the guest's own
// callback error). run returns the wrapped error unchanged.
type addressed struct{ err error }

func (a *addressed) Error() string { return a.err.Error() }
func (a *addressed) Unwrap() error { return a.err }

// run is the one enforcement path every public call takes, in this order:
//
//  1. revoked? -> revoked
//  2. parse the guest path(s) -> invalid_path, path_outside_sandbox
//  3. a write op on a read-only or locked capability -> read_only
//  4. the policy decides (Ask goes to the Asker; no Asker denies) -> fs_permission_denied
//  5. hooks' Before, in order; an error refuses the call
//  6. fn, the backend operation
//  7. hooks' After, in reverse order
//  8. exactly one audit event, whatever happened
//
// Errors returned to the guest are *vfs.Error addressed to the paths as the guest
// wrote them (or, from composite operations, to the Dir-relative path that failed).
//
// With the default options (policy.AllowAll, no hooks, audit.Discard) steps 4, 5, 7
// and 8 can neither refuse nor be observed, so run takes a path that skips them:
// no request, no request id, no clock reading, no event. With a policy engine
// alone (a quiet env), a call with nothing inside it to decide takes runQuiet:
// steps 1 to 4 and 6, in a straight line.
func (s *scope) run(ctx context.Context, c *call, fn func(ctx context.Context) error) error {
	e := s.env
	if e.plain {
		st := s.gate.state()
		if st&revokedBit != 0 {
			return errAt(vfs.CodeRevoked, c.sp.method, c.path, c.destForErr(), "capability revoked")
		}
		if err := s.parse(c); err != nil {
			return err
		}
		if c.sp.writes && (s.ro || st&lockedBit != 0) {
			return errAt(vfs.CodeReadOnly, c.sp.method, c.path, c.destForErr(), "capability is read-only")
		}
		if err := fn(ctx); err != nil {
			return s.address(c, err)
		}
		return nil
	}
	if e.quiet && s.straight(c.sp) {
		return s.runQuiet(ctx, c, fn)
	}
	err := s.runFull(ctx, c, fn)
	if e.quiet {
		// What a quiet call borrowed (see isQuiet), given back here rather
		// than by defers in runFull, whose many returns keep defers off the
		// open-coded path. Nothing holds them once runFull has returned.
		if c.ad != nil {
			c.ad.release()
			c.ad = nil
		}
		if c.req != nil {
			quietRequests.Put(c.req)
			c.req = nil
		}
	}
	return err
}

// straight reports whether a call of sp runs through runQuiet in a quiet env:
// it decides nothing inside it (no request to keep for fn), acts (not a
// Check), and is not a read the backend fuses with its decision.
func (s *scope) straight(sp *spec) bool {
	return !sp.inner && !sp.checkOnly && !(sp.fused && s.fuses(sp))
}

// runQuiet is runFull for a quiet env (only a *policy.Engine sees requests:
// no hooks, no audit, no Asker) and a straight call (see straight): steps 1
// to 4 and 6, the request on the stack, the Engine called directly.
func (s *scope) runQuiet(ctx context.Context, c *call, fn func(ctx context.Context) error) error {
	st := s.gate.state()
	if st&revokedBit != 0 {
		return errAt(vfs.CodeRevoked, c.sp.method, c.path, c.destForErr(), "capability revoked")
	}
	if err := s.parse(c); err != nil {
		return err
	}
	if !c.sp.writes {
		return s.decideAct(ctx, c, fn)
	}
	if s.ro || st&lockedBit != 0 {
		return errAt(vfs.CodeReadOnly, c.sp.method, c.path, c.destForErr(), "capability is read-only")
	}
	// Decide and act under the tree lock, as runFull does.
	if c.sp.structural {
		s.env.tmu.Lock()
		defer s.env.tmu.Unlock()
	} else {
		s.env.tmu.RLock()
		defer s.env.tmu.RUnlock()
	}
	return s.decideAct(ctx, c, fn)
}

// decideAct is runQuiet's step 4, on the paths as written and on the canonical
// paths they reach, then step 6.
func (s *scope) decideAct(ctx context.Context, c *call, fn func(ctx context.Context) error) error {
	base, werr := s.where(ctx)
	if werr != nil {
		return readdress(werr, c.sp.method, c.path, c.destForErr())
	}
	c.base = base
	eng := s.env.policy.(*policy.Engine)
	if !allowsLex(eng, c) {
		lexPath, lexDest := c.treePaths()
		return s.refuseQuiet(ctx, eng, c, lexPath, lexDest)
	}
	if err := s.resolveCall(ctx, c); err != nil {
		return s.address(c, err)
	}
	// A path resolved to itself decides as it did (the tree path depends on
	// the raw path alone).
	if c.rp.Raw() == c.p.Raw() && c.rq.Raw() == c.q.Raw() {
		return s.act(ctx, c, fn)
	}
	lexPath, lexDest := treePathsOf(c.base, c.p, c.q, c.sp.kind)
	if path, dest := c.treePaths(); path != lexPath || dest != lexDest {
		if !allowsEngine(eng, c.sp, path, dest, c.size-1) {
			return s.refuseQuiet(ctx, eng, c, path, dest)
		}
	}
	return s.act(ctx, c, fn)
}

// act is step 6: fn, its error given the guest's view.
func (s *scope) act(ctx context.Context, c *call, fn func(ctx context.Context) error) error {
	if err := fn(ctx); err != nil {
		return s.address(c, err)
	}
	return nil
}

// allowsEngine is decideAll's answer for a quiet env, from the Engine called
// directly on the only fields of a request it reads (Engine.AllowsPath): the
// call of sp on path and dest, leaving size bytes, and for an open that also
// reads, the path read.
func allowsEngine(eng *policy.Engine, sp *spec, path, dest string, size int64) bool {
	if !eng.AllowsPath(sp.op, path, dest, size) {
		return false
	}
	return !sp.alsoRead || sp.op == policy.OpRead || eng.AllowsPath(policy.OpRead, path, "", -1)
}

// allowsLex is allowsEngine on c's paths as the guest wrote them, from the
// tree's root. A one-path call beneath the tree's root (a pinned Sub) asks
// Engine.AllowsUnder, which needs the path from the root built only where it
// cannot answer from the walk of the directory it keeps.
func allowsLex(eng *policy.Engine, c *call) bool {
	if c.sp.kind != destNone || c.base.IsRoot() {
		path, dest := c.treePaths()
		return allowsEngine(eng, c.sp, path, dest, c.size-1)
	}
	base, rel := c.base.String(), c.p.WithoutDirMark().Unresolved().String()
	if !eng.AllowsUnder(c.sp.op, base, rel, c.size-1) {
		return false
	}
	return !c.sp.alsoRead || c.sp.op == policy.OpRead || eng.AllowsUnder(policy.OpRead, base, rel, -1)
}

// refuseQuiet is the error of a quiet call of c that allowsEngine refused on
// path and dest: the refusing decision, Ask refused as env.decide refuses it
// without an Asker.
func (s *scope) refuseQuiet(ctx context.Context, eng *policy.Engine, c *call, path, dest string) error {
	r := policy.Request{Subject: s.env.subject, Op: c.sp.op, Path: path, Dest: dest, GuestPath: c.path, Size: c.size - 1}
	d := eng.Decide(ctx, &r)
	if d.Effect == policy.Allow { // the read of an open that also reads refused it
		r.Op, r.Dest, r.Size = policy.OpRead, "", -1
		d = eng.Decide(ctx, &r)
	}
	return errAt(vfs.CodePermission, c.sp.method, c.path, c.destForErr(), denyReason(noAsker(d)))
}

// noAsker is the refusal of d, a decision other than Allow, where no Asker
// settles Ask (see env.decide).
func noAsker(d policy.Decision) policy.Decision {
	if d.Effect == policy.Ask && d.Reason == "" {
		d.Reason = "requires approval, and no approver is configured"
	}
	return d
}

// runFull is run with a policy, hooks or an audit sink to serve.
func (s *scope) runFull(ctx context.Context, c *call, fn func(ctx context.Context) error) (err error) {
	e := s.env
	var start time.Time
	if e.audited {
		start = time.Now()
	}
	var id string
	if !e.quiet {
		id = newRequestID()
	}
	// ad holds what the audit record reports (the paths from the tree's root,
	// once parsed; the outcome and rule) and the state of steps 4 and 5, which a
	// fused read runs from inside the backend's call (see admission.admit).
	// It lives on the stack; a fused read moves it to the heap (see step 4).
	adv := admission{e: e, outcome: audit.Failed}
	ad := &adv
	finished := false
	if e.audited {
		defer func() {
			s.record(ctx, c, ad, start, id, finished, err)
		}()
	}
	var unlock func()
	ad, unlock, err = s.admitFull(ctx, c, ad, id)
	if unlock != nil {
		defer unlock()
	}
	if err != nil || c.sp.checkOnly {
		finished = true
		return err
	}
	// (6) The operation.
	err = s.address(c, fn(ctx))
	if err != nil && c.innerRule != "" {
		// A path inside the composite call was refused: the trail names that rule.
		ad.outcome, ad.rule = audit.Denied, c.innerRule
	}
	// (7) After hooks, for those whose Before ran.
	for i := ad.ran - 1; i >= 0; i-- {
		e.hooks[i].After(ctx, c.req, err)
	}
	finished = true
	return err
}

// record writes runFull's audit event for c.
func (s *scope) record(ctx context.Context, c *call, ad *admission, start time.Time, id string, finished bool, err error) {
	e := s.env
	ev := audit.Event{
		Time:      start,
		RequestID: id,
		Subject:   e.subject,
		Op:        c.auditOp(),
		Path:      ad.treePath,
		Dest:      ad.treeDest,
		GuestPath: auditGuestPath(c.path),
		Outcome:   audit.OK,
		Rule:      ad.rule,
		Tag:       audit.RequestTag(ctx),
	}
	switch {
	case !finished && err == nil:
		// A policy, hook or backend panicked: record the call, let the panic go on.
		ev.Outcome, ev.Code = audit.Failed, "panic"
	case err != nil:
		ev.Outcome = ad.outcome
		ev.Code = string(codeOf(err))
	}
	ev.Duration = time.Since(start)
	e.audit.Record(ctx, ev)
}

// admitFull is runFull's steps 1 to 5. It returns the admission the rest of
// the call reports to (ad, or a fused read's), and the tree lock's release
// when it took the lock.
func (s *scope) admitFull(ctx context.Context, c *call, ad *admission, id string) (_ *admission, unlock func(), err error) {
	e := s.env
	// (1) Revocation comes first: a revoked capability reveals nothing, not even
	// whether a path is well formed.
	st := s.gate.state()
	if st&revokedBit != 0 {
		ad.outcome, ad.rule = audit.Denied, "revoked"
		if e.audited && s.parse(c) == nil { // best effort, for the audit record only
			ad.treePath, ad.treeDest = s.treePaths(c)
		}
		return ad, nil, errAt(vfs.CodeRevoked, c.sp.method, c.path, c.destForErr(), "capability revoked")
	}
	// (2) Paths.
	if perr := s.parse(c); perr != nil {
		return ad, nil, perr
	}
	if e.audited { // for the record of a refusal before step 4; step 4 sets them again
		ad.treePath, ad.treeDest = s.treePaths(c)
	}
	// (3) Attenuation and the host's write lock.
	if c.sp.writes && (s.ro || st&lockedBit != 0) {
		ad.outcome, ad.rule = audit.Denied, "read-only"
		return ad, nil, errAt(vfs.CodeReadOnly, c.sp.method, c.path, c.destForErr(), "capability is read-only")
	}
	// (4) Policy, on the paths as written and on the canonical paths they reach.
	if !e.customPolicy && len(e.hooks) == 0 {
		// The default policy allows every request; nothing else needs one.
		ad.rule = allowAllRule
		return ad, nil, nil
	}
	if e.customPolicy && c.sp.writes && !c.sp.checkOnly {
		// Decide and act under the tree lock: a structural change cannot
		// interleave with another call's decision and action.
		unlock = e.lockTree(c.sp.structural)
	}
	ad, err = s.decideFull(ctx, c, ad, id)
	return ad, unlock, err
}

// lockTree takes the tree lock, exclusively for a structural change, and
// returns its release.
func (e *env) lockTree(structural bool) func() {
	if structural {
		e.tmu.Lock()
		return e.tmu.Unlock
	}
	e.tmu.RLock()
	return e.tmu.RUnlock
}

// decideFull is step 4 and, through admit, step 5 of runFull.
func (s *scope) decideFull(ctx context.Context, c *call, ad *admission, id string) (*admission, error) {
	e := s.env
	base, werr := s.where(ctx)
	if werr != nil {
		return ad, readdress(werr, c.sp.method, c.path, c.destForErr())
	}
	c.base = base
	ad.lexPath, ad.lexDest = c.treePaths()
	ad.treePath, ad.treeDest = ad.lexPath, ad.lexDest
	if e.quiet {
		// Nothing keeps the request past the call: it is borrowed.
		c.req = quietRequests.Get().(*policy.Request) // given back by run
	} else {
		c.req = new(policy.Request)
	}
	*c.req = policy.Request{ID: id, Subject: e.subject, Op: c.sp.op, Path: ad.lexPath, Dest: ad.lexDest, GuestPath: c.path, Size: c.size - 1}
	d, ok := policy.Decision{Effect: policy.Allow, Rule: allowAllRule}, true
	if e.customPolicy {
		// The guest's own paths first: a refused name reveals nothing more.
		d, ok = e.decideAll(ctx, c.sp, c.req)
	}
	ad.rule = d.Rule
	if !ok {
		ad.outcome = audit.Denied
		return ad, errAt(vfs.CodePermission, c.sp.method, c.path, c.destForErr(), denyReason(d))
	}
	if c.sp.fused && !c.sp.checkOnly && !c.p.MustBeDir() && s.fuses(c.sp) {
		// The canonical decision and the Before hooks run inside the
		// backend's resolution (fusedCall), on the very object it acts on.
		// One allocation holds the admission and the little of the call
		// that admit needs (the call itself stays on the stack).
		var h *fusedAdmission
		if e.quiet {
			h = fusedAdmissions.Get().(*fusedAdmission) // given back by run
		} else {
			h = newFusedAdmission()
		}
		h.admission, h.args, h.decided, h.aerr = *ad, c.admitArgs(), false, nil
		h.admission.args = &h.args
		c.ad = h
		return &h.admission, nil
	}
	if rerr := s.resolveCall(ctx, c); rerr != nil {
		return ad, s.address(c, rerr)
	}
	if len(e.hooks) > 0 || !c.sameTree(ad) { // else admit would find nothing to do
		args := c.admitArgs()
		if aerr := ad.admit(ctx, &args); aerr != nil {
			return ad, aerr
		}
	}
	return ad, nil
}

// sameTree reports whether the paths c acts on (c.rp, c.rq) are, from the
// tree's root, the paths ad decided (the guest's): then admit, with no hook
// to run, has nothing to decide or record.
func (c *call) sameTree(ad *admission) bool {
	path, dest := c.treePaths()
	return path == ad.lexPath && dest == ad.lexDest
}

// quietRequests holds the requests of quiet envs' calls (see env.isQuiet),
// reused from call to call.
var quietRequests = sync.Pool{New: func() any { return new(policy.Request) }}

// isQuiet reports whether nothing but e's policy, a *policy.Engine, ever sees
// a call's policy.Request: no hooks, no audit, no Asker. The Engine keeps no
// request and reads no ID, so such a call's request needs no ID and is reused
// once the call returns (runFull).
func (e *env) isQuiet() bool {
	_, engine := e.policy.(*policy.Engine)
	return engine && len(e.hooks) == 0 && !e.audited && e.asker == nil
}

// admission is the state runFull shares with the second half of step 4 (the
// decision on the canonical paths) and step 5 (the Before hooks), which a fused
// read runs from inside the backend's resolution.
type admission struct {
	e                  *env
	lexPath, lexDest   string // the paths as the guest wrote them, from the tree's root
	treePath, treeDest string // the paths the audit record reports
	rule               string
	outcome            audit.Outcome
	ran                int // hooks whose Before ran (their After is owed)
	// args is what admit needs of a fused read's call, which it works on from
	// inside the backend's resolution (its req is the call's); nil otherwise.
	args *admitArgs
}

// fusedAdmission is a fused read's admission with its admitArgs, allocated
// together, and the callback the backend's resolution calls (decide), made
// once with it: runFull allocates it, or for a quiet env (see isQuiet) takes
// one from fusedAdmissions and gives it back when the call returns.
type fusedAdmission struct {
	admission
	args admitArgs
	// ctx is the call's context, for decide; decided and aerr are what the
	// callback did (see fusedCall).
	ctx     context.Context
	decided bool
	aerr    error
	decide  func(vfs.Location) error
}

func newFusedAdmission() *fusedAdmission {
	h := new(fusedAdmission)
	h.decide = h.decideAt
	return h
}

// fusedAdmissions holds quiet calls' fused admissions, reused.
var fusedAdmissions = sync.Pool{New: func() any { return newFusedAdmission() }}

// decideAt is the resolution's callback: admit on the location it reached.
func (h *fusedAdmission) decideAt(loc vfs.Location) error {
	h.decided = true
	h.args.rp = loc.Path
	h.aerr = h.admit(h.ctx, &h.args)
	return h.aerr
}

// release clears h and gives it back to fusedAdmissions.
func (h *fusedAdmission) release() {
	decide := h.decide
	*h = fusedAdmission{decide: decide}
	fusedAdmissions.Put(h)
}

// admitArgs is the part of a call that admit reads: small enough to copy, so
// that a fused read keeps its call on the stack and allocates only this.
type admitArgs struct {
	sp           *spec
	path, dest   string
	base, rp, rq vfs.Path
	req          *policy.Request
}

// admitArgs returns what admit needs of c.
func (c *call) admitArgs() admitArgs {
	return admitArgs{sp: c.sp, path: c.path, dest: c.dest, base: c.base, rp: c.rp, rq: c.rq, req: c.req}
}

// treePaths is call.treePaths.
func (c *admitArgs) treePaths() (path, dest string) {
	return treePathsOf(c.base, c.rp, c.rq, c.sp.kind)
}

// destForErr is call.destForErr.
func (c *admitArgs) destForErr() string { return destForErr(c.sp.kind, c.dest) }

// admit decides on c's canonical paths (c.rp, c.rq) where they differ from the
// guest's, then runs the Before hooks (unless c only checks). Its errors are in
// their final, guest-facing form.
func (ad *admission) admit(ctx context.Context, c *admitArgs) error {
	e := ad.e
	ad.treePath, ad.treeDest = c.treePaths()
	if ad.treePath != ad.lexPath || ad.treeDest != ad.lexDest {
		c.req.Path, c.req.Dest = ad.treePath, ad.treeDest
		if e.customPolicy {
			d, ok := e.decideAll(ctx, c.sp, c.req)
			ad.rule = d.Rule
			if !ok {
				ad.outcome = audit.Denied
				return errAt(vfs.CodePermission, c.sp.method, c.path, c.destForErr(), denyReason(d))
			}
		}
	}
	if c.sp.checkOnly {
		return nil
	}
	// (5) Before hooks.
	for _, h := range e.hooks {
		if herr := h.Before(ctx, c.req); herr != nil {
			ad.outcome, ad.rule = audit.Denied, hookRule(h)
			err := hookError(herr, c.sp.method, c.path, c.destForErr())
			for i := ad.ran - 1; i >= 0; i-- {
				e.hooks[i].After(ctx, c.req, err)
			}
			ad.ran = 0
			return err
		}
		ad.ran++
	}
	return nil
}

// decideAll decides r, and for an open that also reads, r as a read.
func (e *env) decideAll(ctx context.Context, sp *spec, r *policy.Request) (policy.Decision, bool) {
	d, ok := e.decide(ctx, r)
	if ok && sp.alsoRead && sp.op != policy.OpRead {
		if rd, rok := e.decideAsRead(ctx, r); !rok {
			return rd, false
		}
	}
	return d, ok
}

// decideAsRead decides r as a read (no Dest, size unknown). It is apart from
// decideAll so that decideAll's frame holds no Request to clear.
//
//go:noinline
func (e *env) decideAsRead(ctx context.Context, r *policy.Request) (policy.Decision, bool) {
	if e.quiet {
		// Only the Engine sees r, and keeps nothing: r itself is asked as a
		// read, then restored, rather than copied to the heap.
		saved := *r
		r.Op, r.Dest, r.Size = policy.OpRead, "", -1
		rd, rok := e.decide(ctx, r)
		*r = saved
		return rd, rok
	}
	rr := *r
	rr.Op, rr.Dest, rr.Size = policy.OpRead, "", -1
	return e.decide(ctx, &rr)
}

// resolveCall sets c.rp and c.rq to the canonical locations of c.p and c.q.
func (s *scope) resolveCall(ctx context.Context, c *call) error {
	if c.sp.kept && s.kept != nil && c.sp.kind == destNone && c.sp.fol != followEntry && !c.p.IsResolved() {
		// The common case of a status call on a backend that keeps its
		// answers: one lookup, no status built (see keptStater).
		fol := c.sp.fol == followFinal || c.p.MustBeDir()
		if loc, fi, ok := s.kept.ResolveKeptStat(ctx, c.p, fol); ok {
			c.rp, c.got, c.kept = loc.Path.WithDirMark(c.p.MustBeDir()), infoKept, fi
			return nil
		}
	}
	var info vfs.Info
	var want *vfs.Info
	if c.sp.status {
		want = &info
	}
	rp, got, err := s.canonStat(ctx, c.p, c.sp.fol, want)
	if err != nil {
		return err
	}
	c.rp = rp
	if c.sp.status {
		c.got, c.info = got, info
	}
	return s.resolveDest(ctx, c)
}

// resolveDest sets c.rq to the canonical location of c.q, for a call with a
// second path or a symlink target.
func (s *scope) resolveDest(ctx context.Context, c *call) error {
	switch c.sp.kind {
	case destPath:
		fq := c.sp.fol
		if c.sp.op == policy.OpCopy {
			fq = followFinal // Copy writes through a link at its destination, as WriteFile
		}
		rq, err := s.canon(ctx, c.q, fq)
		if err != nil {
			return &addressed{readdress(err, c.sp.method, c.path, c.dest)}
		}
		c.rq = rq
	case destTarget:
		// The link's target: what the new name will reach.
		rq, err := s.canon(ctx, c.q, followFinal)
		if err != nil {
			return err
		}
		c.rq = rq
	}
	return nil
}

// allowAllRule is the rule the default policy names in its decisions.
var allowAllRule = defaultPolicy.Decide(context.Background(), &policy.Request{}).Rule

// parse fills c.p and c.q (step 2), and c.rp and c.rq with the same paths.
func (s *scope) parse(c *call) error {
	// The paths are kept in locals and stored once, at the end: read back right
	// after being stored field by field, they stalled the processor (a load
	// spanning several stores cannot be forwarded from them).
	p, q := c.p, c.q
	switch {
	case c.prepare != nil:
		if err := c.prepare(); err != nil {
			return err
		}
		p, q = c.p, c.q
	case !c.sp.fixed:
		raw := c.path
		if raw == "" && c.sp.emptyIsDot {
			raw = "."
		}
		var err error
		if p, err = vfs.ParseGuest(raw); err != nil {
			return reop(err, c.sp.method)
		}
		if c.sp.single && !vfs.ValidName(raw) {
			return errAt(vfs.CodeInvalidPath, c.sp.method, raw, "", "a single name is required here (no \"/\")")
		}
		if c.sp.kind == destPath {
			if q, err = vfs.ParseGuest(c.dest); err != nil {
				return reopDest(err, c.sp.method, c.path)
			}
		}
	}
	if c.sp.kind == destTarget {
		var err error
		if q, err = linkTarget(p, c.dest); err != nil {
			return readdress(err, c.sp.method, c.path, "")
		}
	}
	c.p, c.q, c.rp, c.rq = p, q, p, q
	return nil
}

// treePaths returns the parsed paths of c from the capability tree's root, as the
// policy and the audit trail see them.
func (s *scope) treePaths(c *call) (path, dest string) {
	path = s.treePath(c.p)
	if c.sp.kind != destNone {
		dest = s.treePath(c.q)
	}
	return path, dest
}

// treePaths returns the paths c acts on (rp, rq) from the tree's root at c.base.
func (c *call) treePaths() (path, dest string) {
	return treePathsOf(c.base, c.rp, c.rq, c.sp.kind)
}

// treePathsOf returns rp and rq (rq only for a call with a second path) from
// the tree's root, base being the scope's root there.
func treePathsOf(base, rp, rq vfs.Path, kind destKind) (path, dest string) {
	path = base.Join(rp.WithoutDirMark().Unresolved()).String()
	if kind != destNone {
		dest = base.Join(rq.WithoutDirMark().Unresolved()).String()
	}
	return path, dest
}

// treePath returns p (relative to the scope's backend) from the tree's root.
func (s *scope) treePath(p vfs.Path) string {
	return s.base.Join(p.WithoutDirMark()).String()
}

// destForErr is the second path an error names: the destination of two-path calls;
// a symlink target is not a path of the tree, so it is left out.
func (c *call) destForErr() string { return destForErr(c.sp.kind, c.dest) }

// resolvedStat is the answer of a status call (spec.status) that its resolution
// already holds: known reports that it does, with the status of what c.rp is,
// or the not_found error when the resolution found nothing there (the entry,
// or for a followed link its target). Otherwise the call looks c.rp up.
func (c *call) resolvedStat(follow bool) (vfs.Info, bool, error) {
	switch c.got {
	case infoFilled:
		return c.info, true, nil
	case infoAbsent:
		op := "lstat"
		if follow {
			op = "stat"
		}
		return vfs.Info{}, true, vfs.NewError(vfs.CodeNotFound, op, c.rp, "")
	}
	return vfs.Info{}, false, nil
}

// destForErr returns dest if it is a second path (not a symlink's target), else "".
func destForErr(kind destKind, dest string) string {
	if kind == destPath {
		return dest
	}
	return ""
}

// address turns fn's error into the guest's view of it.
func (s *scope) address(c *call, err error) error {
	if err == nil {
		return nil
	}
	var a *addressed
	if errors.As(err, &a) {
		return a.err
	}
	return readdress(err, c.sp.method, c.path, c.destForErr())
}

// decide asks the policy, and the Asker for Ask decisions. ok reports whether the
// call may proceed.
func (e *env) decide(ctx context.Context, r *policy.Request) (d policy.Decision, ok bool) {
	d = e.policy.Decide(ctx, r)
	switch d.Effect {
	case policy.Allow:
		return d, true
	case policy.Ask:
		if e.asker == nil {
			if d.Reason == "" {
				d.Reason = "requires approval, and no approver is configured"
			}
			return d, false
		}
		yes, err := e.asker.Ask(ctx, r, d)
		if err != nil || !yes {
			if d.Reason == "" {
				d.Reason = "approval refused"
			}
			return d, false
		}
		return d, true
	}
	return d, false
}

// allowInner decides a path touched inside a composite call (a file under the
// directory RemoveAll removes, an entry Walk visits). It uses the call's ID and op;
// it is skipped when the Dir has no custom policy. Nothing is audited separately.
func (s *scope) allowInner(ctx context.Context, c *call, op policy.Op, p vfs.Path, dest *vfs.Path) (policy.Decision, bool) {
	if !s.env.customPolicy {
		return policy.Decision{Effect: policy.Allow}, true
	}
	r := *c.req
	r.Op = op
	lexPath := c.base.Join(p.WithoutDirMark().Unresolved()).String()
	lexDest := ""
	r.Path = lexPath
	r.Dest = ""
	// An entry listed beneath a canonical directory is canonical itself; a path
	// named otherwise (a Glob's) is decided where it leads too.
	if !p.IsResolved() {
		if rp, err := s.canon(ctx, p, followEntry); err == nil {
			r.Path = c.base.Join(rp.WithoutDirMark().Unresolved()).String()
		}
	}
	if dest != nil {
		lexDest = c.base.Join(dest.WithoutDirMark().Unresolved()).String()
		r.Dest = lexDest
		if !dest.IsResolved() {
			if rq, err := s.canon(ctx, *dest, followEntry); err == nil {
				r.Dest = c.base.Join(rq.WithoutDirMark().Unresolved()).String()
			}
		}
	}
	r.GuestPath = p.String()
	r.Size = -1
	d, ok := s.env.decideBoth(ctx, &r, lexPath, lexDest)
	if !ok {
		c.noteInner(d)
	}
	return d, ok
}

// allowEntry decides op on an entry of the directory c lists: its path as
// listed (lex) and its canonical path (canon, Resolved: the directory's
// canonical path and the name, which a status does not follow). Like
// allowInner, it records a refusing rule for the audit. The caller has a
// custom policy and c.req.
func (s *scope) allowEntry(ctx context.Context, c *call, op policy.Op, lex, canon vfs.Path) (policy.Decision, bool) {
	r := *c.req
	r.Op = op
	r.Path = c.base.Join(canon.WithoutDirMark().Unresolved()).String()
	lexPath := r.Path
	if lex.Raw() != canon.Raw() {
		lexPath = c.base.Join(lex.WithoutDirMark().Unresolved()).String()
	}
	r.Dest = ""
	r.GuestPath = lex.String()
	r.Size = -1
	d, ok := s.env.decideBoth(ctx, &r, lexPath, "")
	if !ok {
		c.noteInner(d)
	}
	return d, ok
}

// auditEntryRefusal records, as its own denied event, the refusal of op on an
// entry of the directory c lists (lex as listed, canon canonical) that the call
// reports in its result rather than failing with it.
func (s *scope) auditEntryRefusal(ctx context.Context, c *call, op policy.Op, lex, canon vfs.Path, d policy.Decision) {
	e := s.env
	if !e.audited {
		return
	}
	e.audit.Record(ctx, audit.Event{
		Time: time.Now(), RequestID: newRequestID(), Subject: e.subject, Op: string(op),
		Path: c.base.Join(canon.WithoutDirMark().Unresolved()).String(), GuestPath: auditGuestPath(lex.String()),
		Outcome: audit.Denied, Code: string(vfs.CodePermission), Rule: d.Rule, Tag: audit.RequestTag(ctx),
	})
}

// noteInner records the rule that refused a path inside a composite call (the
// first one), so the call is audited as denied by it.
func (c *call) noteInner(d policy.Decision) {
	if c.innerRule == "" {
		c.innerRule = d.Rule
		if c.innerRule == "" {
			c.innerRule = "policy"
		}
	}
}

// innerDenied is the error for a composite call refused because of a path inside it.
func innerDenied(method string, p vfs.Path, d policy.Decision) error {
	return &addressed{errAt(vfs.CodePermission, method, p.String(), "", denyReason(d))}
}

func denyReason(d policy.Decision) string {
	if d.Reason != "" {
		return d.Reason
	}
	if d.Rule != "" {
		return "denied by policy rule " + d.Rule
	}
	return "denied by policy"
}

func hookRule(h Hook) string {
	if n, ok := h.(interface{ Name() string }); ok {
		return "hook:" + n.Name()
	}
	return "hook"
}

// hookError is the guest's view of a hook's refusal: a *vfs.Error keeps its code;
// anything else is fs_permission_denied, with the hook's error as the cause (the
// host can match it with errors.Is).
func hookError(herr error, method, path, dest string) error {
	var ve *vfs.Error
	if errors.As(herr, &ve) {
		return vfs.Readdress(ve, method, path, dest)
	}
	e := errAt(vfs.CodePermission, method, path, dest, "refused by a hook")
	e.Err = herr
	return e
}

// errAt builds a *vfs.Error addressed to guest paths.
func errAt(code vfs.Code, op, path, dest, msg string) *vfs.Error {
	e := vfs.NewError(code, op, vfs.Root, msg)
	e.Path = printable(path)
	e.Dest = printable(dest)
	return e
}

// readdress gives err the guest's paths. A non-*vfs.Error becomes canceled (for
// context errors) or io_error, without its text, which might hold a host path.
func readdress(err error, op, path, dest string) error {
	if err == nil {
		return nil
	}
	var ve *vfs.Error
	if errors.As(err, &ve) {
		return vfs.Readdress(ve, op, printable(path), printable(dest))
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: printable(path), Dest: printable(dest), Err: err}
	}
	e := errAt(vfs.CodeIO, op, path, dest, "i/o error")
	return e
}

// reop changes only the Op of a *vfs.Error (parse errors already carry a printable
// form of the guest's path).
func reop(err error, op string) error {
	var ve *vfs.Error
	if errors.As(err, &ve) {
		return vfs.Readdress(ve, op, ve.Path, ve.Dest)
	}
	return err
}

// reopDest re-addresses a parse error of a destination path: Path is the source as
// written, Dest the (printable) destination.
func reopDest(err error, op, src string) error {
	var ve *vfs.Error
	if errors.As(err, &ve) {
		return vfs.Readdress(ve, op, printable(src), ve.Path)
	}
	return err
}

// printable keeps error and audit text readable: NUL bytes are spelled out and very
// long paths are cut.
func printable(s string) string {
	if len(s) > 512 {
		s = s[:512] + "…"
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", `\x00`)
	}
	return s
}

func auditGuestPath(s string) string { return printable(s) }

// canceled reports a context error as a *vfs.Error.
func canceled(op string, p vfs.Path, err error) error {
	return &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
}

// linkTarget validates a symlink target for a link at p and returns the path it
// names, relative to the capability's root. Absolute targets, and targets that climb
// above the root from the link's directory, are path_outside_sandbox: host tools
// would follow them once the tree is materialized.
func linkTarget(p vfs.Path, target string) (vfs.Path, error) {
	return vfs.SymlinkTarget(p, target)
}

// sized returns the call field for a write that leaves n bytes in the file.
func sized(n int) int64 { return int64(n) + 1 }

// codeOf is vfs.CodeOf without its allocation (errors.AsType keeps the target on
// the stack); the hot paths call it on nil and not_found errors.
func codeOf(err error) vfs.Code {
	if e, ok := errors.AsType[*vfs.Error](err); ok {
		return e.Code
	}
	return ""
}

// auditOp is the op an audit event names: the policy op, or for Dir.Check
// "check." and the op checked, so the trail never shows a check as the operation.
func (c *call) auditOp() string {
	if c.sp.checkOnly {
		return "check." + string(c.sp.op)
	}
	return string(c.sp.op)
}
