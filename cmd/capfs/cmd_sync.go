//go:build linux

package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/run"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/vfs"
)

const syncLong = `Apply, show or drop a checkout capfs run kept: its changes were not applied
(--sync=never or ask, a command that failed under --sync=on-success, refused or
conflicting changes, --keep). capfs run prints the id of each checkout it
keeps.

  capfs sync --list          the kept checkouts, oldest first
  capfs sync [ID]            apply ID's changes to the work path it came from
                             (without ID: the one kept checkout of the work
                             path, when there is exactly one)
  capfs sync --diff ID       show its changes as a unified diff ($PAGER on a
                             terminal)
  capfs sync --dry-run ID    show what would be applied
  capfs sync --out DIR ID    write its changed files into a host directory
                             (for a run on --rev, a git or a memory mount)
  capfs sync --discard ID    remove it (--all: every kept checkout)

Run it with the same mounts as the run (in the same directory, with the same
--mount and --config flags): the changes go through the namespace's checks as
they would have at the end of the run: validation, the policy, conflicts with
what changed in the source since (--conflict, --on-reject), a journal. Once
every change is applied, the checkout and its record are removed; what is not
applied stays, and another capfs sync can try again.

Exit status: 0 when everything was applied (or shown, or removed); 3 when some
changes were refused or conflicted; 1 when the checkout is gone or cannot be
used; 2 for bad flags or an unknown id.`

func newSyncCmd(o *globalOptions) *cobra.Command {
	var (
		list, discard, all, diff, dryRun, jsonOut bool
		out, conflict, onReject, work             string
		showN                                     int
		lim                                       limitFlags
	)
	cmd := &cobra.Command{
		Use:   "sync [flags] [ID]",
		Short: "Apply, show or drop a checkout that capfs run kept",
		Long:  syncLong,
		Args:  cobra.MaximumNArgs(1),
	}
	f := cmd.Flags()
	f.BoolVar(&list, "list", false, "list the kept checkouts")
	f.BoolVar(&discard, "discard", false, "remove the kept checkout instead of applying it")
	f.BoolVar(&all, "all", false, "with --discard: every kept checkout")
	f.BoolVar(&diff, "diff", false, "show the changes as a unified diff")
	f.BoolVarP(&dryRun, "dry-run", "n", false, "show what would be applied, apply nothing")
	f.BoolVar(&jsonOut, "json", false, "print the summary as one JSON object on stderr")
	f.StringVar(&out, "out", "", "write the changed files into this host directory instead of applying them")
	f.StringVar(&conflict, "conflict", "fail", "when a changed path also changed in the source: fail, ours or theirs")
	f.StringVar(&onReject, "on-reject", "apply-rest", "when a change is refused or in conflict: apply-rest or abort")
	f.StringVarP(&work, "work", "w", "", "with no ID: the work path whose kept checkout to apply (default: the configured one, else project)")
	f.IntVar(&showN, "show", 10, "list at most this many changed paths (-1: all)")
	lim.add(cmd)
	for _, n := range []string{"max-procs", "max-memory", "tmp-size", "git", "bind-grants"} {
		_ = f.MarkHidden(n)
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		mode, reject, err := syncModes(conflict, onReject)
		if err != nil {
			return err
		}
		if err := lim.parse(); err != nil {
			return err
		}
		recs, _, err := run.ReadKept()
		if err != nil {
			return failed(fmt.Errorf("kept checkouts: %v", err))
		}
		w := cmd.ErrOrStderr()
		sf := syncFlags{diff: diff, dryRun: dryRun, out: out, conflict: mode, onReject: reject, lim: lim, json: jsonOut, show: showN}
		switch {
		case list:
			listRecords(w, cmd.OutOrStdout(), recs)
			return nil
		case discard && all:
			discardAll(w, recs)
			return nil
		case len(args) == 1:
			return syncByID(o, cmd, args, recs, sf, discard)
		case discard:
			return usageErrorf("--discard needs an ID (or --all)")
		}
		return action(o, func(ctx context.Context, cmd *cobra.Command, s *session, _ []string) error {
			return syncOfWork(ctx, s, cmd, recs, sf, work)
		})(cmd, args)
	}
	return cmd
}

// listRecords lists the kept checkouts recs on out (on w when there are none).
func listRecords(w, out io.Writer, recs []run.Kept) {
	if len(recs) == 0 {
		fmt.Fprintln(w, "capfs: sync: no kept checkouts")
		return
	}
	for _, rec := range recs {
		fmt.Fprintln(out, describeRecord(rec))
	}
}

// discardAll removes every kept checkout of recs.
func discardAll(w io.Writer, recs []run.Kept) {
	n := 0
	for _, rec := range recs {
		if err := dropRecord(rec); err != nil {
			fmt.Fprintf(w, "capfs: sync: %s: %s\n", rec.ID, showError(err))
			continue
		}
		n++
	}
	fmt.Fprintf(w, "capfs: sync: removed %d kept checkout(s)\n", n)
}

// syncByID applies (or shows, or with discard removes) the kept checkout
// args[0] of recs.
func syncByID(o *globalOptions, cmd *cobra.Command, args []string, recs []run.Kept, sf syncFlags, discard bool) error {
	i := slices.IndexFunc(recs, func(rec run.Kept) bool { return rec.ID == args[0] })
	if i < 0 {
		return usageErrorf("no kept checkout %s (capfs sync --list lists them)", show(args[0]))
	}
	rec, w := recs[i], cmd.ErrOrStderr()
	if discard {
		if err := dropRecord(rec); err != nil {
			return failed(err)
		}
		fmt.Fprintf(w, "capfs: sync: removed the kept checkout %s\n", rec.ID)
		return nil
	}
	return action(o, func(ctx context.Context, cmd *cobra.Command, s *session, _ []string) error {
		return syncRecord(ctx, s, rec, sf, w, cmd)
	})(cmd, args)
}

// syncOfWork applies the one kept checkout of the work path (work, else the
// session's, else the default), or lists them when there are several.
func syncOfWork(ctx context.Context, s *session, cmd *cobra.Command, recs []run.Kept, sf syncFlags, work string) error {
	w := cmd.ErrOrStderr()
	wk := cmp.Or(work, s.Work, defaultWork)
	wp, err := vfs.ParseGuest(wk)
	if err != nil {
		return usageErrorf("--work %s: %s", wk, messageOrCode(err))
	}
	label := workLabel(s, wp.WithoutDirMark())
	var mine []run.Kept
	for _, rec := range recs {
		if rec.Label != "" && rec.Label == label {
			mine = append(mine, rec)
		}
	}
	switch len(mine) {
	case 0:
		fmt.Fprintf(w, "capfs: sync: no kept checkout of %s (capfs sync --list lists them all)\n", showPath(wp.String()))
		return nil
	case 1:
		return syncRecord(ctx, s, mine[0], sf, w, cmd)
	}
	fmt.Fprintf(w, "capfs: sync: %d kept checkouts of %s; name one:\n", len(mine), showPath(wp.String()))
	for _, rec := range mine {
		fmt.Fprintf(w, "  %s\n", describeRecord(rec))
	}
	return exitStatus(exitUsage)
}

type syncFlags struct {
	diff, dryRun, json bool
	out                string
	conflict           syncback.ConflictMode
	onReject           syncback.RejectMode
	lim                limitFlags
	show               int
}

// workLabel is the journal label of work path p in s ("" when it is not a
// physical mount's).
func workLabel(s *session, p vfs.Path) string {
	m, rel, ok := s.mountAt(p)
	if !ok || !m.WorkTree() || m.ReadOnly {
		return ""
	}
	return "physical:" + m.Host + "//" + rel.String()
}

// dropRecord removes a kept checkout and its record.
func dropRecord(rec run.Kept) error {
	if err := materialize.Discard(rec.Tree); err != nil {
		return err
	}
	return run.RemoveKept(rec.ID)
}

// syncRecord applies (or shows) the kept checkout rec through s.
func syncRecord(ctx context.Context, s *session, rec run.Kept, f syncFlags, w io.Writer, cmd *cobra.Command) error {
	wp, err := vfs.ParseGuest(rec.Work)
	if err != nil {
		return failed(err)
	}
	wp = wp.WithoutDirMark()
	d, err := syncSource(ctx, s, rec, wp, !f.diff && !f.dryRun && f.out == "")
	if err != nil {
		return err
	}
	t, err := materialize.Reopen(ctx, d, rec.Tree)
	if err != nil {
		if vfs.CodeOf(err) == vfs.CodeNotFound {
			fmt.Fprintf(w, "capfs: sync: the kept checkout %s is gone (a reboot empties /dev/shm); dropping its record\n", rec.ID)
			_ = run.RemoveKept(rec.ID)
		}
		return failed(err)
	}
	defer t.Close()
	r := &runner{s: s, stderr: w, stdout: cmd.OutOrStdout(), stdin: cmd.InOrStdin(), workPath: wp, workTree: t, workDir: d,
		conflict: f.conflict, onReject: f.onReject, lim: f.lim, jsonOut: f.json, show: f.show, syncLabel: rec.Label,
		argv: rec.Command, keptID: rec.ID, writeBack: rec.Label != "", prefix: "sync"}
	switch {
	case f.diff:
		t.Keep()
		changes, err := t.Diff(ctx)
		if err != nil {
			return err
		}
		return pageDiff(ctx, d, t.Path(), changes, cmd.OutOrStdout(), pagerOf{s.env.env("PAGER"), w})
	case f.out != "":
		return r.syncOut(ctx, rec, f.out)
	case f.dryRun:
		t.Keep()
		return r.syncDry(ctx)
	}
	return r.syncApply(ctx, rec)
}

// syncSource is the Dir a kept checkout is synced through: its work path,
// writable when it came from this namespace's mount of it (which apply
// needs); else read-only, or an empty Dir when the path is not here.
func syncSource(ctx context.Context, s *session, rec run.Kept, wp vfs.Path, apply bool) (*dir.Dir, error) {
	label := workLabel(s, wp)
	if apply && (rec.Label == "" || label != rec.Label) {
		if rec.Label == "" {
			return nil, usageErrorf("the kept checkout %s came from a work path that is not written back (--rev, git or memory): --out DIR writes its changes into a host directory", rec.ID)
		}
		return nil, usageErrorf("the kept checkout %s came from %s of another namespace: run capfs sync with the mounts of that run (same directory, --mount and --config)", rec.ID, showPath(rec.Work))
	}
	if label == rec.Label && rec.Label != "" {
		return s.Root.Sub(ctx, wp.String())
	}
	d, err := s.Root.ReadOnly().Sub(ctx, wp.String())
	if err != nil {
		// The work path is not in this namespace: compare with nothing.
		return emptyDir(s)
	}
	return d, nil
}

// syncOut writes the kept checkout's changes into host directory out.
func (r *runner) syncOut(ctx context.Context, rec run.Kept, out string) error {
	t := r.workTree
	if err := checkOut(out); err != nil {
		return err
	}
	rep, err := exportTo(ctx, t, out, r.s, r.lim.sync)
	if rep != nil {
		sum := newSummary(r.workPath, "written into --out", &syncback.Report{Applied: rep.Written, Refused: rep.Refused})
		sum.Out = out
		r.printSummary(sum, err)
	}
	t.Keep()
	if err != nil || len(rep.Refused) > 0 {
		return exitStatus(exitSyncBack)
	}
	fmt.Fprintf(r.stderr, "capfs: sync: the checkout %s is still kept (capfs sync --discard %s removes it)\n", rec.ID, rec.ID)
	return nil
}

// syncDry shows what the kept checkout would apply.
func (r *runner) syncDry(ctx context.Context) error {
	opts, err := r.syncOptions(true)
	if err != nil {
		return failed(err)
	}
	rep, serr := syncback.Run(ctx, r.workTree, opts)
	if rep == nil {
		return serr
	}
	r.printSummary(newSummary(r.workPath, "would apply", rep), serr)
	return nil
}

// syncApply applies the kept checkout rec; what is not applied stays kept,
// with its record brought up to date.
func (r *runner) syncApply(ctx context.Context, rec run.Kept) error {
	t, w := r.workTree, r.stderr
	opts, err := r.syncOptions(false)
	if err != nil {
		return failed(err)
	}
	rep, serr := syncback.Run(ctx, t, opts)
	if rep == nil {
		return serr
	}
	r.printSummary(newSummary(r.workPath, "applied", rep), serr)
	if t.Kept() {
		// Record the manifest as it is now (what was applied is no longer a change).
		if st, err := t.MarshalState(); err == nil {
			rec.Tree = st
			if kd, err := run.KeptDir(); err == nil {
				_ = run.WriteKept(kd, rec)
			}
		}
		fmt.Fprintf(w, "capfs: sync: what was not applied stays in %s (id %s)\n", show(t.Path()), rec.ID)
	} else {
		_ = run.RemoveKept(rec.ID)
		fmt.Fprintf(w, "capfs: sync: every change applied; the kept checkout %s is removed\n", rec.ID)
	}
	if serr != nil {
		return exitStatus(exitSyncBack)
	}
	return nil
}

// emptyDir is an empty read-only Dir under the session's policy: the source a
// kept checkout is compared with when its work path is not in this namespace.
func emptyDir(s *session) (*dir.Dir, error) {
	d, _ := dir.New(vfs.ReadOnly(memory.New()), dir.WithPolicy(s.Policy))
	return d, nil
}
