package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strings"

	"golang.org/x/term"

	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/run"
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
func (r *runner) syncOptions(dry bool) (materialize.SyncOptions, error) {
	pol, err := r.lim.syncPolicy()
	if err != nil {
		return materialize.SyncOptions{}, err
	}
	o := materialize.SyncOptions{Conflict: r.conflict, OnReject: r.onReject, Label: r.syncLabel,
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
	rep, serr := r.workTree.SyncBack(ctx, opts)
	r.finishBars()
	if rep == nil {
		r.say("capfs: sync-back: %s\n", showError(readdressUnder(serr, r.workPath)))
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
	rep, serr := r.workTree.SyncBack(ctx, opts)
	if rep == nil {
		r.say("capfs: sync-back: %s\n", showError(readdressUnder(serr, r.workPath)))
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
	rep, serr := r.workTree.SyncBack(ctx, opts)
	if rep == nil {
		r.say("capfs: sync-back: %s\n", showError(readdressUnder(serr, r.workPath)))
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
func (r *runner) prompt(ctx context.Context, status int, lines <-chan string, rep *materialize.SyncReport, sum *summary) int {
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
			if err := pageDiff(ctx, r.workDir, r.workTree.Path(), changesOf(rep), r.stdout); err != nil {
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
func changesOf(rep *materialize.SyncReport) []materialize.Change {
	return append([]materialize.Change(nil), rep.Applied...)
}

// pageDiff writes changes as a unified diff (source → checkout) through $PAGER
// (default "less -FRX") on a terminal, else to w.
func pageDiff(ctx context.Context, src *dir.Dir, checkout string, changes []materialize.Change, w io.Writer) error {
	cb, err := physical.New(checkout)
	if err != nil {
		return err
	}
	defer cb.Close()
	gc := gitChanges(changes)
	out, pager, err := startPager(w)
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

// startPager starts $PAGER (default "less -FRX") on w when w is a terminal,
// and returns where to write: the pager's input, else w itself (pager nil).
func startPager(w io.Writer) (io.Writer, *exec.Cmd, error) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return w, nil, nil
	}
	p := os.Getenv("PAGER")
	if p == "" {
		p = "less -FRX"
	}
	pager := exec.Command("/bin/sh", "-c", p)
	pager.Stdout, pager.Stderr = f, os.Stderr
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

// summary is a run's change summary, printed compactly (counts by directory,
// the first paths, every refusal) or as JSON (--json, every path).
type summary struct {
	Work       string         `json:"work"`
	Verb       string         `json:"result"`
	Counts     map[string]int `json:"counts"`
	Bytes      int64          `json:"bytes_written"`
	Dirs       []dirCount     `json:"directories"`
	Changes    []changeLine   `json:"changes"`
	Refused    []refusalLine  `json:"refused,omitempty"`
	Conflicts  []string       `json:"conflicts,omitempty"`
	NotApplied []refusalLine  `json:"not_applied,omitempty"`
	Theirs     []string       `json:"kept_source_version,omitempty"`
	Kept       string         `json:"kept_id,omitempty"`
	Checkout   string         `json:"checkout,omitempty"`
	Discarded  bool           `json:"discarded,omitempty"`
	Out        string         `json:"out,omitempty"`

	at     vfs.Path
	show   int
	prefix string // "run" or "sync"
}

type dirCount struct {
	Dir      string `json:"dir"`
	Added    int    `json:"added,omitempty"`
	Modified int    `json:"modified,omitempty"`
	Deleted  int    `json:"deleted,omitempty"`
	Other    int    `json:"other,omitempty"`
	Bytes    int64  `json:"bytes,omitempty"`
}

type changeLine struct {
	Kind string `json:"kind"`
	Path string `json:"path"`
	Type string `json:"type,omitempty"` // "dir", "symlink"; "" for a file
	Size int64  `json:"size,omitempty"`

	exec bool // a regular file with an execute bit, after the change
}

type refusalLine struct {
	Kind   string `json:"kind"`
	Path   string `json:"path"`
	Cause  string `json:"cause,omitempty"`
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// newSummary builds the summary of rep (Applied: applied, or would be).
func newSummary(at vfs.Path, verb string, rep *materialize.SyncReport) *summary {
	s := &summary{Work: at.String(), Verb: verb, Counts: map[string]int{}, at: at}
	dirs := map[string]*dirCount{}
	for _, c := range rep.Applied {
		s.Counts[string(c.Kind)]++
		if c.Kind != materialize.Touched { // a time alone: counted, not listed
			s.addChange(c, dirs)
		}
	}
	for _, d := range dirs {
		s.Dirs = append(s.Dirs, *d)
	}
	sort.Slice(s.Dirs, func(i, j int) bool {
		a, b := s.Dirs[i], s.Dirs[j]
		na, nb := a.Added+a.Modified+a.Deleted+a.Other, b.Added+b.Modified+b.Deleted+b.Other
		if na != nb {
			return na > nb
		}
		return a.Dir < b.Dir
	})
	s.addUnapplied(rep)
	return s
}

// addChange lists change c and counts it in its directory's line of dirs.
func (s *summary) addChange(c materialize.Change, dirs map[string]*dirCount) {
	var size int64
	if c.New != nil && c.New.IsRegular() && c.Kind != materialize.Deleted {
		size = c.New.Size
		if c.Kind != materialize.ModeChanged {
			s.Bytes += size
		}
	}
	exec := c.New != nil && c.New.IsRegular() && c.Kind != materialize.Deleted && c.New.Mode&0o111 != 0
	s.Changes = append(s.Changes, changeLine{Kind: string(c.Kind), Path: joinGuest(s.at, c.Path), Type: changeType(c), Size: size, exec: exec})
	d := path.Dir(c.Path)
	dc := dirs[d]
	if dc == nil {
		dc = &dirCount{Dir: joinGuest(s.at, d)}
		dirs[d] = dc
	}
	switch c.Kind {
	case materialize.Added:
		dc.Added++
	case materialize.Modified:
		dc.Modified++
	case materialize.Deleted:
		dc.Deleted++
	default:
		dc.Other++
	}
	dc.Bytes += size
}

// changeType is the summary's type of what c changes: "dir", "symlink", or
// "" for a file.
func changeType(c materialize.Change) string {
	e := c.New
	if e == nil {
		e = c.Old
	}
	switch {
	case e == nil:
		return ""
	case e.IsDir():
		return "dir"
	case e.IsSymlink():
		return "symlink"
	}
	return ""
}

// addUnapplied lists what rep refused, found in conflict or did not apply.
func (s *summary) addUnapplied(rep *materialize.SyncReport) {
	at := s.at
	for _, rf := range rep.Refused {
		s.Refused = append(s.Refused, refusalLine{string(rf.Change.Kind), joinGuest(at, rf.Change.Path), "refused", string(rf.Code), rf.Reason})
	}
	for _, c := range rep.Conflicts {
		s.Conflicts = append(s.Conflicts, joinGuest(at, c))
	}
	for _, u := range rep.NotApplied {
		switch u.Cause {
		case materialize.CauseRefused:
		case materialize.CauseTheirs:
			s.Theirs = append(s.Theirs, joinGuest(at, u.Change.Path))
		case materialize.CauseConflict:
			if !containsString(rep.Conflicts, u.Change.Path) {
				s.NotApplied = append(s.NotApplied, refusalLine{string(u.Change.Kind), joinGuest(at, u.Change.Path), string(u.Cause), string(u.Code), u.Reason})
			}
		default:
			s.NotApplied = append(s.NotApplied, refusalLine{string(u.Change.Kind), joinGuest(at, u.Change.Path), string(u.Cause), string(u.Code), u.Reason})
		}
	}
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (s *summary) cmd() string {
	if s.prefix == "" {
		return "run"
	}
	return s.prefix
}

func (s *summary) empty() bool {
	return len(s.Changes) == 0 && len(s.Refused) == 0 && len(s.Conflicts) == 0 && len(s.NotApplied) == 0 && len(s.Theirs) == 0 && s.Counts[string(materialize.Touched)] == 0
}

// maxDirs is how many directories the text summary counts before "N more".
const maxDirs = 8

// printSummary prints s on stderr (text, or JSON with --json), then err when
// nothing else said what went wrong.
func (r *runner) printSummary(s *summary, err error) {
	if s.show == 0 {
		s.show = r.show
	}
	if r.prefix != "" {
		s.prefix = r.prefix
	}
	if r.jsonOut {
		if s.Changes == nil {
			s.Changes = []changeLine{}
		}
		if s.Dirs == nil {
			s.Dirs = []dirCount{}
		}
		b, _ := json.Marshal(s)
		r.say("%s\n", b)
		return
	}
	writeSummary(r.msgs(), s, err)
}

func writeSummary(w io.Writer, s *summary, err error) {
	if s.empty() {
		fmt.Fprintf(w, "capfs: %s: no changes in %s\n", s.cmd(), showPath(s.Work))
	} else {
		fmt.Fprintf(w, "capfs: %s: %s in %s: %s\n", s.cmd(), s.Verb, showPath(s.Work), s.countsLine())
		if len(s.Dirs) > 1 && s.show >= 0 && len(s.Changes) > s.show {
			writeDirs(w, s.Dirs)
		}
		writeChanges(w, tellingFirst(s.Changes), s.show)
	}
	writeUnapplied(w, s)
	if err != nil && len(s.Refused)+len(s.Conflicts)+len(s.NotApplied) == 0 {
		fmt.Fprintf(w, "capfs: sync-back: %s\n", showError(err))
	}
	if s.Discarded {
		fmt.Fprintf(w, "capfs: run: the changes are discarded (--keep keeps them for capfs sync)\n")
	}
	if s.Out != "" {
		fmt.Fprintf(w, "capfs: run: written into %s\n", show(s.Out))
	}
}

// countsLine is the summary's first line's counts: of each kind, the bytes
// written, the refusals and conflicts.
func (s *summary) countsLine() string {
	var parts []string
	for _, k := range []struct {
		kind  materialize.ChangeKind
		label string
	}{{materialize.Added, "added"}, {materialize.Modified, "modified"}, {materialize.Deleted, "deleted"},
		{materialize.TypeChanged, "changed type"}, {materialize.ModeChanged, "changed mode"}, {materialize.Touched, "touched"}} {
		if n := s.Counts[string(k.kind)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k.label))
		}
	}
	line := strings.Join(parts, ", ")
	if line == "" {
		line = "nothing"
	}
	if s.Bytes > 0 {
		line += " (" + humanBytes(s.Bytes) + " written)"
	}
	if n := len(s.Refused); n > 0 {
		line += fmt.Sprintf("; %d refused", n)
	}
	if n := len(s.Conflicts); n > 0 {
		line += fmt.Sprintf("; %d in conflict", n)
	}
	return line
}

// writeDirs writes the counts of the first maxDirs directories.
func writeDirs(w io.Writer, dirs []dirCount) {
	for i, d := range dirs {
		if i == maxDirs {
			fmt.Fprintf(w, "    ... %d more directories\n", len(dirs)-maxDirs)
			break
		}
		var c []string
		for _, kv := range []struct {
			n int
			l string
		}{{d.Added, "added"}, {d.Modified, "modified"}, {d.Deleted, "deleted"}, {d.Other, "other"}} {
			if kv.n > 0 {
				c = append(c, fmt.Sprintf("%d %s", kv.n, kv.l))
			}
		}
		size := ""
		if d.Bytes > 0 {
			size = " (" + humanBytes(d.Bytes) + ")"
		}
		fmt.Fprintf(w, "    %s/: %s%s\n", show(d.Dir), strings.Join(c, ", "), size)
	}
}

// writeChanges writes the first n changes (n < 0: all), one a line.
func writeChanges(w io.Writer, cs []changeLine, n int) {
	for i, c := range cs {
		if n >= 0 && i >= n {
			fmt.Fprintf(w, "  ... and %d more (--show -1 lists every path, --json prints them all)\n", len(cs)-i)
			break
		}
		size := ""
		if c.Size > 0 {
			size = "  " + humanBytes(c.Size)
		}
		name := show(c.Path)
		switch c.Type {
		case "dir":
			name += "/"
		case "symlink":
			name += "@"
		}
		fmt.Fprintf(w, "  %s %s%s\n", changeLetter(materialize.ChangeKind(c.Kind)), name, size)
	}
}

// writeUnapplied writes every refusal, conflict, change not applied, and
// path whose source version was kept.
func writeUnapplied(w io.Writer, s *summary) {
	for _, rf := range s.Refused {
		fmt.Fprintf(w, "capfs: refused: %s %s: %s (%s)\n", rf.Kind, show(rf.Path), show(rf.Reason), rf.Code)
	}
	for _, c := range s.Conflicts {
		fmt.Fprintf(w, "capfs: conflict: %s changed in the source and in the sandbox (--conflict ours or theirs settles it)\n", show(c))
	}
	for _, u := range s.NotApplied {
		fmt.Fprintf(w, "capfs: not applied: %s %s: %s (%s)\n", u.Kind, show(u.Path), show(u.Reason), u.Cause)
	}
	for _, p := range s.Theirs {
		fmt.Fprintf(w, "capfs: kept the source's version of %s\n", show(p))
	}
}

// maxSkipLines is how many paths left out of a checkout, of one kind, are
// listed one a line; more are counted on one line.
const maxSkipLines = 3

// sayNotInSandbox reports the paths of the checkout of p left out of the
// sandbox: one a line when there are few of a kind (code) or with --show -1,
// else one line with the count and the first two.
func (r *runner) sayNotInSandbox(p vfs.Path, skips []materialize.Skip) {
	byCode := map[vfs.Code][]string{}
	var codes []vfs.Code
	for _, sk := range skips {
		if byCode[sk.Code] == nil {
			codes = append(codes, sk.Code)
		}
		byCode[sk.Code] = append(byCode[sk.Code], showGuest(p, sk.Path))
	}
	for _, c := range codes {
		paths := byCode[c]
		if len(paths) <= maxSkipLines || r.show < 0 {
			for _, q := range paths {
				r.say("capfs: run: not in the sandbox: %s (%s)\n", q, c)
			}
			continue
		}
		what := fmt.Sprintf("paths (%s)", c)
		if c == vfs.CodePermission {
			what = "paths the policy hides"
		}
		r.say("capfs: run: not in the sandbox: %d %s (%s, %s and %d more; --show -1 lists them)\n",
			len(paths), what, paths[0], paths[1], len(paths)-2)
	}
}

// tellingFirst returns the changes in the order the text summary lists them,
// the most telling first: executables, then shallower paths, then files other
// than build intermediates (object files, archives, bytecode), then by path. A
// build's binary and top-level outputs thus come before its object files.
func tellingFirst(cs []changeLine) []changeLine {
	out := slices.Clone(cs)
	slices.SortStableFunc(out, func(a, b changeLine) int {
		if a.exec != b.exec {
			if a.exec {
				return -1
			}
			return 1
		}
		if da, db := strings.Count(a.Path, "/"), strings.Count(b.Path, "/"); da != db {
			return cmp.Compare(da, db)
		}
		if ia, ib := intermediate(a.Path), intermediate(b.Path); ia != ib {
			if ib {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Path, b.Path)
	})
	return out
}

// intermediateExts are the extensions of build intermediates: what compilers
// leave beside the outputs that matter.
var intermediateExts = map[string]bool{
	".o": true, ".obj": true, ".a": true, ".lo": true, ".la": true, ".d": true,
	".pyc": true, ".pyo": true, ".class": true, ".gcno": true, ".gcda": true,
	".dep": true, ".tmp": true, ".rlib": true, ".rmeta": true,
}

// intermediate reports whether p names a build intermediate.
func intermediate(p string) bool {
	return intermediateExts[strings.ToLower(path.Ext(p))]
}

// printApplied prints a recovered sync's report.
func printApplied(w io.Writer, at vfs.Path, rep *materialize.SyncReport, err error, n int) {
	if rep == nil {
		if err != nil {
			fmt.Fprintf(w, "capfs: sync-back: %s\n", showError(readdressUnder(err, at)))
		}
		return
	}
	s := newSummary(at, "applied", rep)
	s.show = n
	if s.show == 0 {
		s.show = 10
	}
	writeSummary(w, s, err)
}

// humanBytes shows n bytes in binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
