package dir

import (
	"context"
	"time"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

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
		if e.audited {
			if _, _, perr := s.parse(c); perr == nil { // best effort, for the audit record only
				ad.treePath, ad.treeDest = s.treePaths(c)
			}
		}
		return ad, nil, errAt(vfs.CodeRevoked, c.sp.method, c.path, c.destForErr(), "capability revoked")
	}
	// (2) Paths.
	if _, _, perr := s.parse(c); perr != nil {
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
	if _, rerr := s.resolveCall(ctx, c); rerr != nil {
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
