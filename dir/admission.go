package dir

import (
	"context"
	"sync"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

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
