package dir

import (
	"context"
	"time"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

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
