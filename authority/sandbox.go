//go:build linux

package authority

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/run"
	"github.com/capfs/capfs/materialize/sandbox"
	"github.com/capfs/capfs/materialize/syncback"
)

// DefaultMountpoint is where RunRequest binds grants inside the sandbox.
const DefaultMountpoint = "/grants"

// RunRequest asks Run to run a command for a subject on its grants.
type RunRequest struct {
	Subject Subject
	// Grants are the ids of the subject's grants to expose; nil means every
	// active grant of the subject whose root kind may be sandboxed (the others
	// are listed in RunReport.Skipped). Naming a grant of another subject, an
	// ended grant, or one over a secret root is an error.
	Grants []string
	Path   string
	Args   []string
	Env    []string
	// Dir is the working directory inside the sandbox ("": the first writable
	// grant's mount, else the mountpoint).
	Dir            string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// SandboxOptions configure Run.
type SandboxOptions struct {
	// Runner runs the launch (nil: sandbox.Default(), bubblewrap required).
	Runner *sandbox.Runner
	// Mountpoint is the directory grants appear under (default /grants): grant g
	// over root R at path P is at Mountpoint/R'/P, R' being R with every byte
	// other than a letter, digit, ".", "_" or "-" replaced by "_". P is the
	// grant's Path as asked for (a name inside the sandbox only); what is bound
	// there is the checkout of the grant's Dir, the directory P led to when it
	// was granted (Grant.Resolved).
	Mountpoint string
	// Checkout is the template for each grant's checkout (Base, Workers, Git,
	// Private); ReadOnly is set per grant.
	Checkout materialize.Options
	// Sync is the template for each writable grant's sync-back.
	Sync syncback.Options
	// Record, if not nil, names each writable grant's tree for a later
	// sync-back: work (how the caller names where it comes from) and the
	// sync-back journal's label. Its checkout, when kept past the run (a
	// sync-back that did not apply everything), is then recorded
	// (run.Record), for capfs sync to find.
	Record func(m GrantMount) (work, label string)
}

// GrantMount is one grant as the sandbox sees it.
type GrantMount struct {
	Grant  string `json:"grant"`
	Root   string `json:"root"`
	Target string `json:"target"`
	// Resolved is the grant's directory in the root (Grant.Resolved): where
	// the bound tree comes from and its changes go back to.
	Resolved string `json:"resolved,omitempty"`
	Writable bool   `json:"writable"`
	// Skipped lists what the grant's checkout left out of the sandbox and why
	// (paths relative to Resolved): names the policy hides, special files,
	// names no capfs path can hold. Nothing is left out silently.
	Skipped []materialize.Skip `json:"skipped,omitempty"`
	// Kept is the host path of the grant's checkout when it is kept past the
	// run (what its sync-back did not apply stays there); KeptID is its
	// record's id when SandboxOptions.Record made one.
	Kept   string `json:"kept,omitempty"`
	KeptID string `json:"kept_id,omitempty"`
}

// RunReport says what Run did.
type RunReport struct {
	// RunID tags every audit event of the run's checkouts and sync-backs
	// (audit.Event.Tag "run:<id> wrappers=<names>").
	RunID   string                      `json:"run_id"`
	Mounts  []GrantMount                `json:"mounts"`
	Skipped []string                    `json:"skipped,omitempty"` // grants not exposed, and why
	Result  *sandbox.Result             `json:"result"`
	Syncs   map[string]*syncback.Report `json:"syncs"`
}

// Run runs a command on a subject's grants, the way direct Dir access sees
// them: each grant is checked out through its own Dir (so its policy decides
// and its audit trail records every read, under the grant's id, on the
// canonical paths of the directory the grant led to: see Grant), read grants
// are bound read-only and writable ones (Write, Delete or Move) read-write;
// nothing else of the host's roots is visible. After the command exits, each
// writable grant's changes come back through that grant's Dir by
// [syncback.Run], so every change is decided by the grant (its access
// list, its expiry: a grant revoked or expired meanwhile refuses the whole
// sync-back, and its checkout is kept and named in the report) and audited
// under the grant's id, with Tag "run:<id> wrappers=<names>" naming the
// wrappers that ran the command.
//
// A grant over a secret root is never bound (an error if named). The report
// is returned with any error once the command has run.
func (a *Authority) Run(ctx context.Context, req RunRequest, opts SandboxOptions) (*RunReport, error) {
	if err := req.Subject.Validate(); err != nil {
		return nil, err
	}
	mp := opts.Mountpoint
	if mp == "" {
		mp = DefaultMountpoint
	}
	if !path.IsAbs(mp) || path.Clean(mp) != mp || mp == "/" {
		return nil, invalid("mountpoint %q must be a clean absolute path below /", mp)
	}
	var rid [6]byte
	_, _ = rand.Read(rid[:])
	rep := &RunReport{RunID: hex.EncodeToString(rid[:]), Syncs: map[string]*syncback.Report{}}
	grants, err := a.runGrants(req, rep)
	if err != nil {
		return nil, err
	}
	spec := &run.Spec{Runner: opts.Runner, Tag: "run:" + rep.RunID}
	for _, b := range grants {
		m, err := grantMount(b.g, mp, rep.Mounts)
		if err != nil {
			return nil, err
		}
		rep.Mounts = append(rep.Mounts, m)
		co, so := opts.Checkout, opts.Sync
		so.Subject = req.Subject.String()
		rm := run.Mount{Name: "grant " + b.g.ID, Dir: b.d, Target: m.Target, Writable: m.Writable, Checkout: co, Sync: so}
		if opts.Record != nil && m.Writable {
			rm.Work, rm.Sync.Label = opts.Record(m)
		}
		spec.Mounts = append(spec.Mounts, rm)
	}
	if len(spec.Mounts) == 0 {
		return rep, invalid("the subject has no grant to run on")
	}
	spec.Launch = sandbox.Launch{
		Path: req.Path, Args: req.Args, Env: req.Env, Dir: workDir(req.Dir, mp, rep.Mounts),
		Subject: req.Subject.String(), Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr,
	}
	rr, err := run.Run(ctx, spec)
	if rr == nil {
		return nil, fmt.Errorf("authority: %w", err)
	}
	rep.Result = rr.Result
	for i, mr := range rr.Mounts {
		rep.Mounts[i].Skipped = mr.Skipped
		rep.Mounts[i].Kept, rep.Mounts[i].KeptID = mr.Kept, mr.KeptID
		if mr.Synced {
			rep.Syncs[rep.Mounts[i].Grant] = mr.Sync
		}
	}
	return rep, err
}

// boundGrant is a grant Run exposes, and its Dir.
type boundGrant struct {
	g Grant
	d *dir.Dir
}

// runGrants selects and checks the grants req names (every active grant of
// the subject when it names none), noting in rep those left out.
func (a *Authority) runGrants(req RunRequest, rep *RunReport) ([]boundGrant, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := req.Grants
	if ids == nil {
		for _, g := range a.grants {
			if g.rec.Subject == req.Subject && g.rec.Status == Active {
				ids = append(ids, g.rec.ID)
			}
		}
		slices.Sort(ids)
	}
	var grants []boundGrant
	for _, id := range ids {
		g, err := a.runGrant(req, id, req.Grants != nil)
		if err != nil {
			return nil, err
		}
		if skip := runSkip(g); skip != "" {
			rep.Skipped = append(rep.Skipped, id+": "+skip)
			continue
		}
		grants = append(grants, boundGrant{g: g.snapshot(), d: g.dir})
	}
	return grants, nil
}

// runGrant returns grant id, which must be the subject's and active, and,
// when named, over a root that may be sandboxed; a.mu is held.
func (a *Authority) runGrant(req RunRequest, id string, named bool) (*grant, error) {
	g, ok := a.grants[id]
	switch {
	case !ok:
		return nil, fmt.Errorf("authority: grant %q: %w", id, fs.ErrNotExist)
	case g.rec.Subject != req.Subject:
		return nil, fmt.Errorf("authority: grant %q belongs to another subject: %w", id, fs.ErrPermission)
	case g.rec.Status != Active || g.dueAt(a.clock()):
		return nil, fmt.Errorf("authority: grant %q has ended: %w", id, fs.ErrPermission)
	}
	if spec, ok := specs[g.rec.Kind]; ok && !spec.Sandbox && named {
		return nil, fmt.Errorf("authority: grant %q is over a %s root, which is never bound into a sandbox: %w", id, g.rec.Kind, fs.ErrPermission)
	}
	return g, nil
}

// runSkip says why Run leaves grant g out, or "".
func runSkip(g *grant) string {
	if spec, ok := specs[g.rec.Kind]; ok && !spec.Sandbox {
		return "a " + string(g.rec.Kind) + " root is never bound into a sandbox"
	}
	if g.dir == nil {
		return "restored from the store but not yet Restored"
	}
	return ""
}

// grantMount is where grant g appears under mountpoint mp; it must not nest
// with one of the mounts made so far.
func grantMount(g Grant, mp string, made []GrantMount) (GrantMount, error) {
	target := path.Join(mp, mountName(g.Root))
	if g.Path != "." {
		target = path.Join(target, g.Path)
	}
	for _, m := range made {
		if run.Nested(m.Target, target) {
			return GrantMount{}, invalid("grants %s and %s would be bound at nested paths", m.Grant, g.ID)
		}
	}
	return GrantMount{Grant: g.ID, Root: g.Root, Target: target, Resolved: g.Resolved, Writable: g.Writable()}, nil
}

// workDir is the command's working directory: wd, else the first writable
// grant's mount, else the mountpoint.
func workDir(wd, mp string, ms []GrantMount) string {
	if wd != "" {
		return wd
	}
	for _, m := range ms {
		if m.Writable {
			return m.Target
		}
	}
	return mp
}

// mountName makes a root name a single path element.
func mountName(root string) string {
	b := []byte(root)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			b[i] = '_'
		}
	}
	s := string(b)
	if s == "." || s == ".." {
		s = "_" + s
	}
	return s
}
