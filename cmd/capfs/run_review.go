//go:build linux

package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"sort"
	"strings"

	"golang.org/x/term"

	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/run"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/vfs"
)

// review decides, once the command exited with status, what becomes of its
// changes (see --sync), prints the summary, and returns capfs's exit status.
func (r *runner) review(ctx context.Context, status int) int {
	if sg := r.sig.caught(); sg != nil {
		r.say("capfs: run: interrupted by %s: nothing synced back\n", signalName(sg))
		if r.keep {
			r.keepForLater(ctx, status, "interrupted")
		}
		if status == 0 {
			status = signalStatus(sg)
		}
		return status
	}
	if !r.writeBack {
		return r.collect(ctx, status)
	}
	switch {
	case r.dryRun:
		return r.hold(ctx, status, "would apply (--dry-run)", r.keep)
	case r.syncMode == syncAlways:
		return r.apply(ctx, status)
	case r.syncMode == syncOnSuccess && status == 0:
		return r.apply(ctx, status)
	case r.syncMode == syncOnSuccess:
		return r.hold(ctx, status, fmt.Sprintf("not applied: %s exited with status %d (--sync=on-success)", show(r.argv[0]), status), true)
	case r.syncMode == syncNever:
		return r.hold(ctx, status, "not applied (--sync=never)", true)
	default:
		return r.ask(ctx, status)
	}
}

// syncOptions are the options of this run's sync-back.
func (r *runner) syncOptions(dry bool) (syncback.Options, error) {
	pol, err := r.lim.syncPolicy()
	if err != nil {
		return syncback.Options{}, err
	}
	o := syncback.Options{Conflict: r.conflict, OnReject: r.onReject, Label: r.syncLabel,
		Limits: r.lim.sync, DryRun: dry, PolicyRoot: r.workPath.String(), Subject: r.s.Subject}
	if !dry {
		if bar := newProgress(r.stderr, "sync-back "+showPath(r.workPath.String())); bar != nil {
			o.Progress = bar.steps
			r.bars = append(r.bars, bar)
		}
	}
	if pol != nil {
		o.Policy = pol
	}
	return o, nil
}

// apply syncs the changes back and prints what it did.
func (r *runner) apply(ctx context.Context, status int) int {
	opts, err := r.syncOptions(false)
	if err != nil {
		r.say("capfs: run: %s\n", show(err.Error()))
		return exitRunFailed
	}
	rep, serr := syncback.Run(ctx, r.workTree, opts)
	r.finishBars()
	if rep == nil {
		r.say("capfs: sync-back: %s\n", showError(vfs.Under(serr, r.workPath)))
		r.keepForLater(ctx, status, "sync-back failed")
		return exitSyncBack
	}
	sum := newSummary(r.workPath, "applied", rep)
	kept := rep.Checkout != "" || r.keep
	if kept {
		sum.Kept, sum.Checkout = run.KeptID(r.workTree.Path()), r.workTree.Path()
	}
	r.printSummary(sum, serr)
	if kept {
		r.keepForLater(ctx, status, "")
	}
	if serr != nil {
		return exitSyncBack
	}
	return status
}

// hold validates the changes without applying them, prints them (verb says
// why they are not applied), and keeps the checkout for capfs sync when keep
// is set and there is something to keep.
func (r *runner) hold(ctx context.Context, status int, verb string, keep bool) int {
	code, _ := r.holdKept(ctx, status, verb, keep)
	return code
}

// holdKept is hold, also reporting whether there were changes to hold.
func (r *runner) holdKept(ctx context.Context, status int, verb string, keep bool) (int, bool) {
	opts, err := r.syncOptions(true)
	if err != nil {
		r.say("capfs: run: %s\n", show(err.Error()))
		return exitRunFailed, false
	}
	rep, serr := syncback.Run(ctx, r.workTree, opts)
	if rep == nil {
		r.say("capfs: sync-back: %s\n", showError(vfs.Under(serr, r.workPath)))
		r.keepForLater(ctx, status, "")
		return exitSyncBack, true
	}
	sum := newSummary(r.workPath, verb, rep)
	if sum.empty() && !r.keep {
		r.printSummary(sum, nil)
		return status, false
	}
	keep = keep || r.keep
	if keep {
		sum.Kept, sum.Checkout = run.KeptID(r.workTree.Path()), r.workTree.Path()
	} else {
		sum.Discarded = true
	}
	r.printSummary(sum, serr)
	if keep {
		r.keepForLater(ctx, status, "")
	}
	return status, !sum.empty()
}

// ask shows what would be applied and asks, on the terminal, what to do.
func (r *runner) ask(ctx context.Context, status int) int {
	in, ok := r.stdin.(*os.File)
	ef, eok := r.stderr.(*os.File)
	if !ok || !eok || !term.IsTerminal(int(in.Fd())) || !term.IsTerminal(int(ef.Fd())) {
		// Nobody could be asked: the changes are kept, and a command that
		// succeeded exits 3 (left a change unapplied), as README says.
		r.say("capfs: run: --sync=ask needs a terminal: nothing applied\n")
		code, held := r.holdKept(ctx, status, "not applied (--sync=ask without a terminal)", true)
		if held && code == 0 {
			code = exitSyncBack
		}
		return code
	}
	opts, err := r.syncOptions(true)
	if err != nil {
		r.say("capfs: run: %s\n", show(err.Error()))
		return exitRunFailed
	}
	rep, serr := syncback.Run(ctx, r.workTree, opts)
	if rep == nil {
		r.say("capfs: sync-back: %s\n", showError(vfs.Under(serr, r.workPath)))
		r.keepForLater(ctx, status, "")
		return exitSyncBack
	}
	sum := newSummary(r.workPath, "would apply", rep)
	r.printSummary(sum, serr)
	if sum.empty() {
		return status
	}
	if len(rep.Applied) == 0 {
		r.keepForLater(ctx, status, "")
		return status
	}
	return r.prompt(ctx, status, readLines(in), rep, sum)
}

// readLines sends each line read from in, trimmed and in lower case, until
// in ends.
func readLines(in io.Reader) <-chan string {
	lines := make(chan string)
	go func() {
		br := bufio.NewReader(in)
		for {
			s, err := br.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- strings.TrimSpace(strings.ToLower(s))
		}
	}()
	return lines
}

// prompt asks whether to apply rep (summarised in sum) until an answer
// decides: yes applies, no discards, keep (or the end of the input, or ctx
// ending) keeps for later; diff and list show more and ask again.
func (r *runner) prompt(ctx context.Context, status int, lines <-chan string, rep *syncback.Report, sum *summary) int {
	for {
		r.say("capfs: apply %d change(s) to %s? [y]es, [n]o (discard), [k]eep for later, [d]iff, [l]ist: ", len(rep.Applied), showPath(r.workPath.String()))
		var ans string
		select {
		case <-ctx.Done():
			r.say("\n")
			r.keepForLater(ctx, status, "")
			return status
		case s, ok := <-lines:
			if !ok {
				r.say("\n")
				r.keepForLater(ctx, status, "")
				return status
			}
			ans = s
		}
		switch ans {
		case "y", "yes":
			return r.apply(ctx, status)
		case "n", "no":
			r.say("capfs: run: discarded; %s is unchanged\n", showPath(r.workPath.String()))
			return status
		case "k", "keep":
			r.keepForLater(ctx, status, "")
			return status
		case "d", "diff":
			if err := pageDiff(ctx, r.workDir, r.workTree.Path(), changesOf(rep), r.stdout, pagerOf{r.s.env.env("PAGER"), r.stderr}); err != nil {
				r.say("capfs: run: diff: %s\n", showError(err))
			}
		case "l", "list":
			full := *sum
			full.show = -1
			r.printSummary(&full, nil)
		}
	}
}

// finishBars clears the progress bars shown.
func (r *runner) finishBars() {
	for _, b := range r.bars {
		b.finish()
	}
	r.bars = nil
}

// changesOf lists the changes a report would apply.
func changesOf(rep *syncback.Report) []materialize.Change {
	return append([]materialize.Change(nil), rep.Applied...)
}

// pageDiff writes changes as a unified diff (source → checkout) through $PAGER
// (default "less -FRX") on a terminal, else to w.
func pageDiff(ctx context.Context, src *dir.Dir, checkout string, changes []materialize.Change, w io.Writer, pg pagerOf) error {
	cb, err := physical.New(checkout)
	if err != nil {
		return err
	}
	defer cb.Close()
	gc := gitChanges(changes)
	out, pager, err := startPager(w, pg)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(out)
	derr := gitree.UnifiedDiff(ctx, src.Backend(), cb, gc, bw)
	ferr := bw.Flush()
	if pager != nil {
		if c, ok := out.(io.Closer); ok {
			c.Close()
		}
		_ = pager.Wait()
	}
	if derr != nil {
		return derr
	}
	if pager == nil {
		return ferr
	}
	return nil
}

// gitChanges are the changes a diff shows (files and symlinks, and
// directories that changed type), as gitree's, sorted by path.
func gitChanges(changes []materialize.Change) []gitree.Change {
	mode := func(e *materialize.Entry) fs.FileMode {
		switch {
		case e == nil:
			return 0
		case e.IsSymlink():
			return fs.ModeSymlink | 0o777
		case e.IsDir():
			return 0
		}
		return e.Mode.Perm()
	}
	var gc []gitree.Change
	for _, c := range changes {
		isDir := (c.Old != nil && c.Old.IsDir()) || (c.New != nil && c.New.IsDir())
		if isDir && c.Kind != materialize.TypeChanged {
			continue
		}
		g := gitree.Change{Path: c.Path, OldMode: mode(c.Old), NewMode: mode(c.New)}
		switch {
		case g.OldMode == 0 && g.NewMode == 0:
			continue
		case g.OldMode == 0:
			g.Kind = gitree.Added
		case g.NewMode == 0:
			g.Kind = gitree.Deleted
		default:
			g.Kind = gitree.Modified
		}
		gc = append(gc, g)
	}
	sort.Slice(gc, func(i, j int) bool { return gc[i].Path < gc[j].Path })
	return gc
}

// pagerOf is where a diff is paged: the command ($PAGER, "": the default)
// and where it writes its own messages.
type pagerOf struct {
	cmd    string
	stderr io.Writer
}

// startPager starts pg's pager (default "less -FRX") on w when w is a
// terminal, and returns where to write: the pager's input, else w itself
// (pager nil).
func startPager(w io.Writer, pg pagerOf) (io.Writer, *exec.Cmd, error) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return w, nil, nil
	}
	p := cmp.Or(pg.cmd, "less -FRX")
	pager := exec.Command("/bin/sh", "-c", p)
	pager.Stdout, pager.Stderr = f, pg.stderr
	pager.Stdin = nil
	pw, err := pager.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := pager.Start(); err != nil {
		return w, nil, nil
	}
	return pw, pager, nil
}
