package dir

import (
	"context"
	"io/fs"
	"time"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// The specs of the calls in this file: a link's own times, decided as a
// chtimes of the link's own path (as Lchown is a chown of it), and the
// storage's figures, decided as a stat of the path.
var (
	specLchtimes     = mk(spec{op: policy.OpChtimes, method: "Lchtimes", fol: followNone})
	specStatFS       = mk(spec{op: policy.OpStat, method: "StatFS", emptyIsDot: true})
	specViewLchtimes = mk(spec{op: policy.OpChtimes, method: "lchtimes", fol: followNone, fixed: true})
	specViewStatFS   = mk(spec{op: policy.OpStat, method: "statfs", fixed: true})
)

// Lchtimes is Chtimes of path's own entry: a final symlink's times are set,
// not its target's (utimensat with AT_SYMLINK_NOFOLLOW). It is a write
// (policy.OpChtimes) decided on the entry's canonical path, refused by a
// read-only Dir (read_only), and audited. It works where the backend can set
// a link's times (vfs.LinkTimer: physical, memory, sqlite) and fails with
// not_supported elsewhere.
func (d *Dir) Lchtimes(ctx context.Context, path string, atime, mtime time.Time) error {
	c := &call{sp: specLchtimes, path: path}
	return d.do(ctx, c, func(ctx context.Context) error {
		return vfs.Lchtimes(ctx, d.s.b, c.rp, atime, mtime)
	})
}

// StatFS reports the capacity of the storage that holds path ("" is the
// Dir's root): its bytes and entries, total and free. It is a read of path
// (policy.OpStat), audited. In a Dir over a vfs.Namespace it is the figures
// of the mount path reaches. It fails with not_supported where the backend
// knows no capacity (vfs.StatFSer: memory and sqlite without a quota).
func (d *Dir) StatFS(ctx context.Context, path string) (vfs.FSStat, error) {
	var st vfs.FSStat
	c := &call{sp: specStatFS, path: path}
	err := d.do(ctx, c, func(ctx context.Context) error {
		var err error
		st, err = vfs.StatFS(ctx, d.s.b, c.rp)
		return err
	})
	return st, err
}

// Lchtimes implements vfs.LinkTimer as Dir.Lchtimes does.
func (v *backendView) Lchtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	return v.do(ctx, specViewLchtimes, p, func(ctx context.Context, rp vfs.Path) error {
		return vfs.Lchtimes(ctx, v.d.s.b, rp, atime, mtime)
	})
}

// StatFS implements vfs.StatFSer as Dir.StatFS does.
func (v *backendView) StatFS(ctx context.Context, p vfs.Path) (vfs.FSStat, error) {
	var st vfs.FSStat
	err := v.do(ctx, specViewStatFS, p, func(ctx context.Context, rp vfs.Path) error {
		var err error
		st, err = vfs.StatFS(ctx, v.d.s.b, rp)
		return err
	})
	return st, err
}

// Chmod changes the permission bits (and sticky bit) of the open file,
// whatever names it has now (fchmod). It is a write: refused on a revoked
// (revoked), read-only or write-locked (read_only) capability as Write is,
// decided by the policy as a chmod of the path the Handle was opened with,
// and audited. setuid and setgid are refused (fs_permission_denied) as by
// Dir.Chmod. It fails with not_supported where the backend's files cannot
// (vfs.AttrFile).
func (h *Handle) Chmod(mode fs.FileMode) error {
	m, err := chmodMode(mode)
	if err != nil {
		return errAt(vfs.CodePermission, "Chmod", h.name, "", err.Error())
	}
	return h.setattr("Chmod", policy.OpChmod, func() error { return vfs.FileChmod(h.f, m) })
}

// Chtimes changes the times of the open file, whatever names it has now
// (futimens); a zero time leaves that time unchanged. It is checked,
// decided and audited as Chmod is, as a chtimes.
func (h *Handle) Chtimes(atime, mtime time.Time) error {
	return h.setattr("Chtimes", policy.OpChtimes, func() error { return vfs.FileChtimes(h.f, atime, mtime) })
}

// setattr is the enforced call of a change of the open file's status (op):
// the Handle's write check, the policy's decision and the Before hooks on
// the path it was opened with (GitGuard among them: no fchmod makes a hook
// executable that chmod could not), act, the After hooks, and the audit
// event.
func (h *Handle) setattr(method string, op policy.Op, act func() error) error {
	if err := h.check(method, true); err != nil {
		return err
	}
	if h.closed.Load() {
		return errAt(vfs.CodeClosed, method, h.name, "", "")
	}
	e := h.s.env
	ctx := context.Background()
	start := time.Now()
	ev := audit.Event{
		Time: start, RequestID: newRequestID(), Subject: e.subject, Op: string(op),
		Path: h.s.treePath(h.p), GuestPath: auditGuestPath(h.name), Outcome: audit.OK,
	}
	r := policy.Request{ID: ev.RequestID, Subject: e.subject, Op: op, Path: ev.Path, GuestPath: h.p.String(), Size: -1}
	ran, err := h.admit(ctx, method, &r, &ev)
	if err == nil {
		err = h.err(method, act())
		if err != nil {
			ev.Outcome, ev.Code = audit.Failed, string(codeOf(err))
		}
	}
	for i := ran - 1; i >= 0; i-- {
		e.hooks[i].After(ctx, &r, err)
	}
	h.record(ctx, &ev, start)
	return err
}

// admit is setattr's decision: the policy, then the Before hooks, which it
// returns the number of that ran (their After is due). A refusal is noted
// in ev.
func (h *Handle) admit(ctx context.Context, method string, r *policy.Request, ev *audit.Event) (int, error) {
	e := h.s.env
	if e.customPolicy {
		d, ok := e.decide(ctx, r)
		ev.Rule = d.Rule
		if !ok {
			ev.Outcome, ev.Code = audit.Denied, string(vfs.CodePermission)
			return 0, errAt(vfs.CodePermission, method, h.name, "", denyReason(d))
		}
	}
	for i, hk := range e.hooks {
		if herr := hk.Before(ctx, r); herr != nil {
			err := hookError(herr, method, h.name, "")
			ev.Outcome, ev.Code, ev.Rule = audit.Denied, string(codeOf(err)), hookRule(hk)
			return i, err
		}
	}
	return len(e.hooks), nil
}

// record writes ev, a Handle call that began at start, to the audit trail.
func (h *Handle) record(ctx context.Context, ev *audit.Event, start time.Time) {
	if e := h.s.env; e.audited {
		ev.Duration = time.Since(start)
		e.audit.Record(ctx, *ev)
	}
}

// Chmod implements vfs.AttrFile as Handle.Chmod does. [vfs.WrapFile]
// keeps it where the backend's file has it.
func (f handleFile) Chmod(mode fs.FileMode) error { return f.Handle.Chmod(mode) }

// Chtimes implements vfs.AttrFile as Handle.Chtimes does.
func (f handleFile) Chtimes(atime, mtime time.Time) error { return f.Handle.Chtimes(atime, mtime) }
