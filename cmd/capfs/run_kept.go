//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/run"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/vfs"
)

// keepForLater keeps the work checkout, records it for capfs sync, and prints
// where it is and what to do with it. It returns the id ("" when it could not
// be recorded; the checkout is kept all the same). Once per run.
func (r *runner) keepForLater(ctx context.Context, status int, reason string) string {
	t := r.workTree
	if t == nil {
		return ""
	}
	if r.unheard && !r.keep && t.Path() != "" {
		// Nobody reads stderr (a closed pipe): a checkout kept now would be
		// one nobody knows of. Only --keep keeps it.
		return ""
	}
	if r.keptID != "" {
		t.Keep()
		return r.keptID
	}
	rec := run.Kept{Work: r.workPath.String(), Command: r.argv, Status: status, Created: time.Now(), Reason: reason}
	if r.writeBack {
		rec.Label = r.syncLabel
	}
	rec, err := run.Record(t, rec)
	id := rec.ID
	r.keptID = id
	if r.jsonOut && err == nil {
		return id // the summary names it
	}
	r.sayKept(t.Path(), id, r.workPath.String(), r.writeBack, err)
	return id
}

// sayKept prints where a kept checkout is (at host path p, id id, from work),
// and how capfs sync applies (writeBack), shows or removes it; or why it
// could not be recorded (err).
func (r *runner) sayKept(p, id, work string, writeBack bool, err error) {
	r.say("capfs: run: the checkout is kept at %s (id %s)\n", show(p), id)
	if err != nil {
		r.say("capfs: run: it could not be recorded for capfs sync: %s\n", showError(err))
		return
	}
	r.say("    capfs sync --diff %s      show its changes\n", id)
	if writeBack {
		r.say("    capfs sync %s             apply them to %s\n", id, showPath(work))
	} else {
		r.say("    capfs sync --out DIR %s   write them into a host directory\n", id)
	}
	r.say("    capfs sync --discard %s   remove it\n", id)
}

// collect handles the changes of a work mount that is not written back (a git
// revision, --rev, a memory mount): into --out, else kept.
func (r *runner) collect(ctx context.Context, status int) int {
	held := r.dryRun || r.syncMode == syncNever || (r.syncMode == syncOnSuccess && status != 0)
	switch {
	case r.commit != "" && !held:
		return r.collectCommit(ctx, status)
	case (r.out == "" && r.commit == "") || held:
		return r.collectHeld(ctx, status)
	}
	return r.collectOut(ctx, status)
}

// collectCommit commits the changes on --commit's branch.
func (r *runner) collectCommit(ctx context.Context, status int) int {
	id, rep, err := r.commitTo(ctx, r.commitAt)
	if rep != nil {
		sum := newSummary(r.workPath, "committed on branch "+show(r.commit), &syncback.Report{Applied: append(rep.Written, rep.Deleted...), Refused: rep.Refused})
		r.printSummary(sum, nil)
	}
	if err != nil {
		r.say("capfs: run: --commit %s: %s\n", show(r.commit), showError(err))
		r.keepForLater(ctx, status, "")
		return exitSyncBack
	}
	r.say("capfs: run: committed %s on branch %s (git log %s)\n", id, show(r.commit), show(r.commit))
	if len(rep.Refused) > 0 {
		r.keepForLater(ctx, status, "")
		return exitSyncBack
	}
	if r.keep {
		r.keepForLater(ctx, status, "")
	}
	return status
}

// collectHeld shows the changes, which nothing writes (no --out or --commit,
// or held back), and keeps them.
func (r *runner) collectHeld(ctx context.Context, status int) int {
	changes, err := r.workTree.Diff(ctx)
	if err != nil {
		r.say("capfs: run: %s\n", showError(vfs.Under(err, r.workPath)))
		r.keepForLater(ctx, status, "")
		return exitSyncBack
	}
	rep := &syncback.Report{Applied: changes}
	why := "not written back: " + showPath(r.workPath.String()) + " " + r.notBackReason()
	sum := newSummary(r.workPath, why, rep)
	if sum.empty() {
		r.printSummary(sum, nil)
		return status
	}
	if r.dryRun && !r.keep {
		sum.Discarded = true
		r.printSummary(sum, nil)
		return status
	}
	r.printSummary(sum, nil)
	if r.out == "" && r.commit == "" {
		r.say("capfs: run: --out DIR writes such changes into a host directory, --commit BRANCH into a git branch\n")
	}
	r.keepForLater(ctx, status, "")
	return status
}

// collectOut writes the changes into --out.
func (r *runner) collectOut(ctx context.Context, status int) int {
	rep, err := exportTo(ctx, r.workTree, r.out, r.s, r.lim.sync)
	if rep != nil {
		sum := newSummary(r.workPath, "written into --out", &syncback.Report{Applied: rep.Written, Refused: rep.Refused})
		if len(rep.Written) > 0 {
			sum.Out = r.out
		}
		r.printSummary(sum, err)
		r.sayNotRepresented(rep.Deleted)
	}
	if err != nil || (rep != nil && len(rep.Refused) > 0) {
		if err != nil && rep == nil {
			r.say("capfs: run: --out %s: %s\n", show(r.out), showError(err))
		}
		r.keepForLater(ctx, status, "")
		return exitSyncBack
	}
	if r.keep {
		r.keepForLater(ctx, status, "")
	}
	return status
}

// sayNotRepresented lists the deletions --out cannot hold.
func (r *runner) sayNotRepresented(deleted []materialize.Change) {
	if len(deleted) == 0 {
		return
	}
	r.say("capfs: run: %d path(s) deleted in the sandbox are not represented in %s:\n", len(deleted), show(r.out))
	for i, c := range deleted {
		if r.show >= 0 && i >= r.show {
			r.say("  ... and %d more\n", len(deleted)-i)
			break
		}
		r.say("  D %s\n", showGuest(r.workPath, c.Path))
	}
}

// notBackReason says why the work path is not written back.
func (r *runner) notBackReason() string {
	switch {
	case r.rev != "":
		return "is the git revision " + show(r.rev)
	default:
		m, _, _ := r.s.mountAt(r.workPath)
		if m != nil && m.Ephemeral() {
			return "is a memory mount, gone when capfs exits"
		}
		return "is read-only"
	}
}

// checkOut checks --out before anything runs: a directory that does not exist
// yet, or an empty one.
func checkOut(out string) error {
	if out == "" {
		return nil
	}
	ents, err := os.ReadDir(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return usageErrorf("--out %s: %v", out, cause(err))
	case len(ents) > 0:
		return usageErrorf("--out %s: not empty (give a new or empty directory)", out)
	}
	return nil
}

// exportTo writes t's changes into host directory out, through a Dir with the
// session's policy.
func exportTo(ctx context.Context, t *materialize.Tree, out string, s *session, lim materialize.Limits) (*materialize.ExportReport, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	b, err := physical.New(out)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	d, _ := dir.New(b, dir.WithPolicy(s.Policy), dir.WithAudit(s.Audit), dir.WithSubject(s.Subject))
	return t.Export(ctx, d, lim)
}

// revSource opens the git revision r.rev of the repository holding the work
// path where it leads (a physical mount's directory, or a git mount's
// repository) as a read-only Dir of the work path, deciding namespace paths
// under the session's policy and git guard (see [runner.workRepo]).
func (r *runner) revSource(ctx context.Context) (*dir.Dir, error) {
	r.writeBack = false
	if err := checkGitName("--rev", r.rev); err != nil {
		return nil, err
	}
	pl, err := r.workRepo(ctx, "--rev", r.rev)
	if err != nil {
		return nil, err
	}
	g, err := gitree.Open(pl.repo, r.rev)
	if err != nil {
		return nil, usageErrorf("--rev %s: %s", r.rev, messageOrCode(err))
	}
	r.subs = append(r.subs, g.Close)
	var b vfs.Backend = g
	if !pl.tree.IsRoot() {
		if b, err = g.Sub(ctx, pl.tree); err != nil {
			return nil, usageErrorf("--rev %s: %s", r.rev, messageOrCode(err))
		}
	}
	d, err := r.revDir(ctx, vfs.ReadOnly(b), pl, true)
	if err != nil {
		return nil, usageErrorf("--rev %s: the work path %s: %s", r.rev, displayPath(r.workPath.String()), messageOrCode(err))
	}
	return d, nil
}

// olderKept mentions the other checkouts kept for this work path, so that
// none is forgotten in /dev/shm.
func (r *runner) olderKept() {
	if r.syncLabel == "" || r.unheard {
		return
	}
	recs, _, err := run.ReadKept()
	if err != nil {
		return
	}
	n := 0
	for _, rec := range recs {
		if rec.Label == r.syncLabel && rec.ID != r.keptID {
			n++
		}
	}
	if n > 0 {
		r.say("capfs: run: %d earlier kept checkout(s) of %s: capfs sync --list\n", n, showPath(r.workPath.String()))
	}
}

// describeRecord is one line about a kept checkout for capfs sync --list.
func describeRecord(rec run.Kept) string {
	cmd := strings.Join(rec.Command, " ")
	if len(cmd) > 60 {
		cmd = cmd[:57] + "..."
	}
	return fmt.Sprintf("%s  %s  %s  exit %d  %s", rec.ID, rec.Created.Local().Format(time.DateTime), showPath(rec.Work), rec.Status, show(cmd))
}
