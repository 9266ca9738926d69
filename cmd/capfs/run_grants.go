//go:build linux

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"time"

	"github.com/capfs/capfs/authority"
	"github.com/capfs/capfs/materialize/run"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// runOnGrants is "capfs run --grants FILE -- CMD": the command runs on exactly the
// grants of a grant set (the JSON authority.GrantSet an authority serializes),
// through authority.Run. Each grant names a root, which is the namespace mount of
// that path ("project", "ref/head", ...); it appears at /grants/ROOT/PATH inside
// the sandbox, read-only unless the grant writes; nothing else of the namespace
// is visible. Every read of a checkout and every change of a sync-back is decided
// by that grant's own access list (and the session's policy) and audited under
// the grant's id, with the run's id and wrappers in the event's tag. The grants
// are made afresh in a private authority for this run from the file's records:
// their ids are new, and each one's reason names the id it came from.
//
// Each grant is decided where its path leads, as every path of capfs run is: the
// path is resolved to the canonical directory it reaches in its root (a link
// committed in the project, keys -> .ssh, leads to .ssh), decided there by the
// session's policy and the GitGuard, and the grant's checkout, bind and
// sync-back act on that directory, with canonical paths in every decision and
// audit event. A record that says where its path led when it was granted
// (resolved) must lead there still, or the run is refused.
//
// The file stays the authority while the command runs: when it changes so that
// it no longer grants one of them (the grant is gone, revoked or expired, or the
// file is removed), that grant is revoked at once, and the sync-back then
// refuses its changes.
func runOnGrants(ctx context.Context, s *session, r *runner, file string, args []string) error {
	set, err := readGrantFile(file)
	if err != nil {
		return usageErrorf("--grants %s: %v", file, err)
	}
	a, err := grantsAuthority(ctx, s)
	if err != nil {
		return err
	}
	ids, from, err := grantAll(ctx, a, set, file)
	if err != nil {
		return err
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go watchGrantFile(wctx, file, a, from, r.stderr)
	runner, _, err := r.sandboxRunner(set.Subject.String())
	if err != nil {
		return err
	}
	opts := authority.SandboxOptions{Runner: runner}
	opts.Checkout.Git, opts.Checkout.GitScanCache = r.lim.git, r.gitScanCache()
	opts.Record = func(m authority.GrantMount) (string, string) { return grantWork(s, m) }
	rep, err := a.Run(ctx, authority.RunRequest{
		Subject: set.Subject, Grants: ids, Path: args[0], Args: args[1:], Env: append(r.lim.net.env(), r.env...),
		Stdin: r.stdin, Stdout: r.stdout, Stderr: r.stderr,
	}, opts)
	if rep != nil {
		r.sayGrantsRun(rep, from)
	}
	return grantsStatus(rep, err)
}

// grantWork is where grant mount m's tree comes from in s's namespace (its
// root is the mount of that name), and its sync-back journal's label.
func grantWork(s *session, m authority.GrantMount) (work, label string) {
	work = path.Join(m.Root, m.Resolved)
	if p, err := vfs.ParseGuest(work); err == nil {
		label = workLabel(s, p)
	}
	return work, label
}

// grantsAuthority is a private authority for a run on grants, with each of
// the session's mounts as a root of the same name.
func grantsAuthority(ctx context.Context, s *session) (*authority.Authority, error) {
	pol, err := grantsPolicy(ctx, s)
	if err != nil {
		return nil, failed(fmt.Errorf("--grants: %v", err))
	}
	a := authority.New(authority.WithPolicy(pol), authority.WithAudit(s.Audit), authority.WithGitGuard(gitGuardOptions(s.Policy)...))
	for _, m := range s.Mounts {
		name := m.Path.String()
		if err := a.Register(name, m.Backend); err != nil {
			return nil, failed(fmt.Errorf("--grants: mount %s: %v", show(name), err))
		}
	}
	return a, nil
}

// grantAll makes in a a grant for each of set's (read from file), and
// returns their ids and, for each, the id of the grant it came from.
func grantAll(ctx context.Context, a *authority.Authority, set authority.GrantSet, file string) ([]string, map[string]string, error) {
	var ids []string
	from := map[string]string{}
	for _, g := range set.Grants {
		id, err := grantOne(ctx, a, set.Subject, g, file)
		if err != nil {
			return nil, nil, err
		}
		ids = append(ids, id)
		from[id] = g.ID
	}
	if len(ids) == 0 {
		return nil, nil, usageErrorf("--grants %s: the set grants nothing", file)
	}
	return ids, from, nil
}

// grantOne makes in a the grant of record g (read from file) for subject,
// and returns its id.
func grantOne(ctx context.Context, a *authority.Authority, subject authority.Subject, g authority.Grant, file string) (string, error) {
	if known := a.Roots(); !slices.Contains(known, g.Root) {
		return "", usageErrorf("--grants %s: grant %s is over root %q, which no mount provides (mounts: %v)", file, show(g.ID), show(g.Root), known)
	}
	req := authority.GrantRequest{Subject: subject, Root: g.Root, Path: g.Path, Resolved: g.Resolved, Access: g.Access,
		Reason: "from grant " + g.ID + ": " + g.Reason, Source: g.Source}
	if !g.Expires.IsZero() {
		if !g.Expires.After(time.Now()) {
			return "", usageErrorf("--grants %s: grant %s expired at %s", file, show(g.ID), g.Expires.Format(time.RFC3339))
		}
		req.Expires = g.Expires
	}
	_, ng, err := a.Grant(ctx, req)
	if err != nil {
		if errors.Is(err, fs.ErrInvalid) || errors.Is(err, fs.ErrNotExist) {
			return "", usageErrorf("--grants %s: grant %s: %v", file, show(g.ID), err)
		}
		return "", failed(fmt.Errorf("--grants: grant %s: %v", show(g.ID), err))
	}
	return ng.ID, nil
}

// sayGrantsRun prints what a run on grants bound, skipped and synced back.
func (r *runner) sayGrantsRun(rep *authority.RunReport, from map[string]string) {
	for _, m := range rep.Mounts {
		mode := "read-only"
		if m.Writable {
			mode = "read-write"
		}
		fmt.Fprintf(r.stderr, "capfs: run: grant %s (from %s) at %s (%s), %s\n", show(m.Grant), show(from[m.Grant]), show(m.Target), show(path.Join(m.Root, m.Resolved)), mode)
		if p, err := vfs.ParseGuest(path.Join(m.Root, m.Resolved)); err == nil {
			r.sayNotInSandbox(p, m.Skipped)
		}
		if m.Kept != "" {
			var err error
			if m.KeptID == "" {
				err = errors.New("no record was made")
			}
			work, label := grantWork(r.s, m)
			r.sayKept(m.Kept, cmp.Or(m.KeptID, run.KeptID(m.Kept)), work, label != "", err)
		}
	}
	for _, sk := range rep.Skipped {
		fmt.Fprintf(r.stderr, "capfs: run: skipped %s\n", show(sk))
	}
	gids := slices.Sorted(maps.Keys(rep.Syncs))
	for _, id := range gids {
		sr := rep.Syncs[id]
		if sr == nil {
			continue
		}
		fmt.Fprintf(r.stderr, "capfs: run: grant %s: %d applied, %d refused, %d not applied\n", show(id), len(sr.Applied), len(sr.Refused), len(sr.NotApplied))
		for _, rf := range sr.Refused {
			fmt.Fprintf(r.stderr, "  refused %s: %s (%s)\n", show(rf.Change.Path), show(rf.Reason), rf.Code)
		}
	}
	for _, n := range r.shownNotes {
		fmt.Fprintf(r.stderr, "capfs: run: /proc/self/mountinfo inside shows %s\n", n)
	}
	fmt.Fprintf(r.stderr, "capfs: run: audit events are tagged run:%s; audit log: %s\n", rep.RunID, show(r.s.AuditPath))
}

// grantsStatus is the exit status of a run on grants that returned rep and
// err.
func grantsStatus(rep *authority.RunReport, err error) error {
	if err != nil {
		if rep != nil && rep.Result != nil {
			// The command ran; its changes were refused at sync-back (a grant
			// revoked or expired meanwhile, a policy refusal): exit 3, as run does.
			return &cliError{code: 3, err: fmt.Errorf("run on grants: %v", err)}
		}
		return failed(fmt.Errorf("run on grants: %v", err))
	}
	if rep.Result != nil && rep.Result.ExitCode != 0 {
		return exitStatus(rep.Result.ExitCode)
	}
	for _, sr := range rep.Syncs {
		if sr != nil && (len(sr.Refused) > 0 || len(sr.NotApplied) > 0) {
			return exitStatus(3)
		}
	}
	return nil
}

// grantsPolicy is the session's policy for the grants' Dirs, whose paths are
// from their root (the mount), not from the namespace: the rules the session
// derived from each writable physical project's git configuration
// (policy.ForProject: core.hooksPath, ...) name namespace paths, so they are
// derived again from the mount's own root. A project's rules then also decide
// the same paths in the other roots, which can only refuse more.
func grantsPolicy(ctx context.Context, s *session) (policy.Policy, error) {
	p := s.Policy
	sa, wrapped := p.(*secretAllow)
	if wrapped {
		p = sa.inner
	}
	eng, ok := p.(*policy.Engine)
	if !ok {
		return s.Policy, nil
	}
	for _, m := range s.Mounts {
		if !m.WorkTree() || m.ReadOnly {
			continue
		}
		rules, err := policy.ForProject(ctx, m.Host, "")
		if err == nil {
			eng, err = eng.With(rules...)
		}
		if err != nil {
			return nil, fmt.Errorf("mount %s: git configuration: %v", show(m.Path.String()), err)
		}
	}
	if wrapped {
		return allowSecrets(eng, sa.globs)
	}
	return eng, nil
}

// watchGrantFile polls the grant-set file while a run on its grants lasts, and
// revokes in a every grant (new id -> the file's id, in from) the file no longer
// grants: missing, not active, expired, or the file gone or unreadable as a set.
func watchGrantFile(ctx context.Context, file string, a *authority.Authority, from map[string]string, warn io.Writer) {
	last, _ := os.Stat(file)
	revoked := map[string]bool{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st, err := os.Stat(file)
		if err == nil && last != nil && st.ModTime().Equal(last.ModTime()) && st.Size() == last.Size() {
			continue
		}
		last = st
		var live map[string]bool
		if err == nil {
			live = liveGrants(file)
		}
		for id, old := range from {
			if live[old] || revoked[id] {
				continue
			}
			revoked[id] = true
			if err := a.Revoke(id); err == nil {
				fmt.Fprintf(warn, "capfs: run: grant %s (from %s) revoked: the grant file no longer grants it\n", show(id), show(old))
			}
		}
	}
}

// liveGrants lists the ids of the grants file grants now: active and not
// expired (none when it cannot be read as a set).
func liveGrants(file string) map[string]bool {
	live := map[string]bool{}
	set, err := readGrantFile(file)
	if err != nil {
		return live
	}
	now := time.Now()
	for _, g := range set.Grants {
		if g.Status == authority.Active && (g.Expires.IsZero() || g.Expires.After(now)) {
			live[g.ID] = true
		}
	}
	return live
}

// readGrantFile reads and parses a grant-set file, reading no more than
// authority.MaxGrantSetBytes (and one byte to tell a larger file): the file is
// an outside input, parsed by the one parser, authority.ParseGrantSet.
func readGrantFile(file string) (authority.GrantSet, error) {
	f, err := os.Open(file)
	if err != nil {
		return authority.GrantSet{}, cause(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, authority.MaxGrantSetBytes+1))
	if err != nil {
		return authority.GrantSet{}, cause(err)
	}
	return authority.ParseGrantSet(data)
}
