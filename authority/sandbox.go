package authority

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/sandbox"
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
	Sync materialize.SyncOptions
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
}

// RunReport says what Run did.
type RunReport struct {
	// RunID tags every audit event of the run's checkouts and sync-backs
	// (audit.Event.Tag "run:<id> wrappers=<names>").
	RunID   string                             `json:"run_id"`
	Mounts  []GrantMount                       `json:"mounts"`
	Skipped []string                           `json:"skipped,omitempty"` // grants not exposed, and why
	Result  *sandbox.Result                    `json:"result"`
	Syncs   map[string]*materialize.SyncReport `json:"syncs"`
}

// Run runs a command on a subject's grants, the way direct Dir access sees
// them: each grant is checked out through its own Dir (so its policy decides
// and its audit trail records every read, under the grant's id, on the
// canonical paths of the directory the grant led to: see Grant), read grants
// are bound read-only and writable ones (Write, Delete or Move) read-write;
// nothing else of the host's roots is visible. After the command exits, each
// writable grant's changes come back through that grant's Dir by
// materialize's SyncBack, so every change is decided by the grant (its access
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
	runner := opts.Runner
	if runner == nil {
		runner = sandbox.Default()
	}
	var rid [6]byte
	_, _ = rand.Read(rid[:])
	rep := &RunReport{RunID: hex.EncodeToString(rid[:]), Syncs: map[string]*materialize.SyncReport{}}

	type bound struct {
		g    Grant
		d    *dir.Dir
		tree *materialize.Tree
	}
	var grants []bound
	a.mu.Lock()
	ids := req.Grants
	if ids == nil {
		for _, g := range a.grants {
			if g.rec.Subject == req.Subject && g.rec.Status == Active {
				ids = append(ids, g.rec.ID)
			}
		}
		slices.Sort(ids)
	}
	for _, id := range ids {
		g, ok := a.grants[id]
		switch {
		case !ok:
			a.mu.Unlock()
			return nil, fmt.Errorf("authority: grant %q: %w", id, fs.ErrNotExist)
		case g.rec.Subject != req.Subject:
			a.mu.Unlock()
			return nil, fmt.Errorf("authority: grant %q belongs to another subject: %w", id, fs.ErrPermission)
		case g.rec.Status != Active || g.dueAt(a.clock()):
			a.mu.Unlock()
			return nil, fmt.Errorf("authority: grant %q has ended: %w", id, fs.ErrPermission)
		}
		if spec, ok := specs[g.rec.Kind]; ok && !spec.Sandbox {
			if req.Grants != nil {
				a.mu.Unlock()
				return nil, fmt.Errorf("authority: grant %q is over a %s root, which is never bound into a sandbox: %w", id, g.rec.Kind, fs.ErrPermission)
			}
			rep.Skipped = append(rep.Skipped, id+": a "+string(g.rec.Kind)+" root is never bound into a sandbox")
			continue
		}
		if g.dir == nil {
			rep.Skipped = append(rep.Skipped, id+": restored from the store but not yet Restored")
			continue
		}
		grants = append(grants, bound{g: g.snapshot(), d: g.dir})
	}
	a.mu.Unlock()

	defer func() {
		for _, b := range grants {
			if b.tree != nil {
				b.tree.Close()
			}
		}
	}()
	var mounts []sandbox.Mount
	for i := range grants {
		b := &grants[i]
		target := path.Join(mp, mountName(b.g.Root))
		if b.g.Path != "." {
			target = path.Join(target, b.g.Path)
		}
		for _, m := range rep.Mounts {
			if m.Target == target || strings.HasPrefix(target, m.Target+"/") || strings.HasPrefix(m.Target, target+"/") {
				return nil, invalid("grants %s and %s would be bound at nested paths", m.Grant, b.g.ID)
			}
		}
		co := opts.Checkout
		co.ReadOnly = !b.g.Writable()
		tctx := audit.WithRequestTag(ctx, "run:"+rep.RunID+" checkout")
		t, err := materialize.Checkout(tctx, b.d, co)
		if err != nil {
			return nil, fmt.Errorf("authority: checkout of grant %s: %w", b.g.ID, err)
		}
		b.tree = t
		m := sandbox.Mount{Source: t.Path(), Target: target, Writable: b.g.Writable()}
		if m.Writable {
			m.ReadOnly = t.ReadOnlyPaths()
		}
		if t.Bound() {
			m.File = t.BindFile()
		}
		mounts = append(mounts, m)
		rep.Mounts = append(rep.Mounts, GrantMount{Grant: b.g.ID, Root: b.g.Root, Target: target, Resolved: b.g.Resolved, Writable: m.Writable, Skipped: t.Skipped()})
	}
	wd := req.Dir
	if wd == "" {
		wd = mp
		for _, m := range rep.Mounts {
			if m.Writable {
				wd = m.Target
				break
			}
		}
	}
	launch := &sandbox.Launch{
		Path: req.Path, Args: req.Args, Env: req.Env, Dir: wd, Mounts: mounts,
		Subject: req.Subject.String(), Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr,
	}
	if len(mounts) == 0 {
		return rep, invalid("the subject has no grant to run on")
	}
	res, err := runner.Run(ctx, launch)
	rep.Result = res
	if err != nil {
		return rep, err
	}
	tag := "run:" + rep.RunID + " wrappers=" + strings.Join(res.Wrappers, ",")
	var errs []error
	for _, b := range grants {
		if !b.g.Writable() {
			continue
		}
		so := opts.Sync
		so.Subject = req.Subject.String()
		sr, err := b.tree.SyncBack(audit.WithRequestTag(ctx, tag), so)
		rep.Syncs[b.g.ID] = sr
		if err != nil {
			errs = append(errs, fmt.Errorf("sync-back of grant %s: %w", b.g.ID, err))
		} else if sr != nil && len(sr.NotApplied) > 0 {
			errs = append(errs, fmt.Errorf("sync-back of grant %s: %d changes not applied: %w", b.g.ID, len(sr.NotApplied), fs.ErrPermission))
		}
	}
	return rep, errors.Join(errs...)
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
