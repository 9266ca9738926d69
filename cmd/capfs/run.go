//go:build linux

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/run"
	"github.com/capfs/capfs/materialize/sandbox"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/vfs"
)

// sandboxRoot is where grants appear inside the sandbox: namespace path P is bound
// at sandboxRoot/P, so relative references between mounts keep working.
const sandboxRoot = "/capfs"

// exitRunFailed is run's exit code when the command could not be run at all (no
// working sandbox, a launch the sandbox refused, a failed start), as with
// container runners.
const exitRunFailed = 125

// exitNotExecutable and exitNotFound are run's exit codes when the command was
// found but cannot be executed, or was not found, as shells use them.
const (
	exitNotExecutable = 126
	exitNotFound      = 127
)

// exitInterrupted is run's exit code when capfs was interrupted (SIGINT) before
// the command started, or the command died of the interrupt.
const exitInterrupted = 130

// Sync modes (--sync).
const (
	syncAlways    = "always"
	syncOnSuccess = "on-success"
	syncNever     = "never"
	syncAsk       = "ask"
)

// runner is one `capfs run`.
type runner struct {
	s                *session
	stdin            io.Reader
	stdout, stderr   io.Writer
	work             string
	grants           []string
	env              []string
	allowUnsandboxed bool
	conflict         syncback.ConflictMode
	onReject         syncback.RejectMode
	keep             bool
	syncMode         string
	dryRun           bool
	jsonOut          bool
	show             int
	tty              string
	out              string
	rev              string
	commit           string // --commit BRANCH
	commitAt         commitTarget
	noCache          bool
	sig              *runSignals
	argv             []string
	syncLabel        string // the sync journal's label: which host directory the work path is
	lim              limitFlags
	sess             *run.Session // the run's mounts (materialize/run)
	paths            []vfs.Path   // the namespace path of each of sess's mounts
	checkoutBars     []*progress  // each mount's checkout progress bar (nil: none)
	workTree         *materialize.Tree
	workDir          *dir.Dir
	workPath         vfs.Path
	writeBack        bool            // the work mount keeps what is synced into it (physical, not --rev)
	mounts           []sandbox.Mount // sess's binds (run_cachemount.go redirects some before the launch)
	subs             []func() error  // Subs of mount backends made for zero-copy checkouts
	cacheKey         string          // the project's build cache key ("" = no caches)
	keptID           string          // the id the work checkout was kept under
	prefix           string          // the summary's command name ("" = run)
	lastMark         time.Time
	bars             []*progress // progress bars of a sync under way
	unheard          bool        // a message to stderr failed: nobody reads it (EPIPE)
	lazyFlag         *bool       // --lazy or --no-lazy as given (nil: the default)
	lazy             bool        // the work tree is a lazy FUSE mount (run_lazy.go)
	lazyWhy          string      // why lazy or not, for the summary
	git              gitRun      // the work tree's .git (run_git.go)
	shownNotes       []string    // host paths the sandbox's mountinfo shows, for the summary (run_cachemount.go)
}

func (r *runner) close() {
	if r.sess != nil {
		if err := r.sess.Close(); err != nil {
			fmt.Fprintf(r.stderr, "capfs: run: removing a checkout: %s\n", showError(err))
		}
		r.sess = nil
	}
	for _, c := range r.subs {
		c()
	}
	r.subs = nil
}

func (r *runner) run(ctx context.Context, argv []string) error {
	r.argv = argv
	defer r.trace("review")
	m, err := r.prepare(ctx)
	if err != nil {
		return err
	}

	// The mounts: the work tree, read-write (a checkout, or a lazy FUSE mount:
	// run_lazy.go), then the read-only grants (startMounts).
	if err := r.chooseLazy(r.lazyFlag); err != nil {
		r.say("capfs: run: %s\n", show(err.Error()))
		return exitStatus(exitRunFailed)
	}
	start := time.Now()
	if err := r.startMounts(ctx, m); err != nil {
		return err
	}
	setup := time.Since(start)
	r.trace("grants")

	// Run.
	runner, bw, err := r.sandboxRunner(r.s.Subject)
	if err != nil {
		return r.failedBeforeRun(err)
	}
	res, err := r.launch(ctx, runner, argv)
	if lerr := r.finishLazy(ctx); lerr != nil {
		return lerr
	}
	if err != nil {
		return r.startFailed(argv[0], err)
	}
	r.sayExited(res, setup, bw)
	code := r.review(ctx, res.ExitCode)
	r.olderKept()
	if r.s.AuditTag != "" {
		r.say("capfs: run: audit events tagged %s (what it changed: capfs audit --run %s --changes)\n", r.s.AuditTag, r.s.AuditTag)
	}
	r.say("capfs: audit log: %s\n", r.s.AuditPath)
	return exitStatus(code)
}

// prepare finds the work path's mount (returned) and Dir, checks --out and
// --commit against it, finishes the sync-backs into it that were
// interrupted, and finds its build cache.
func (r *runner) prepare(ctx context.Context) (*mounted, error) {
	m, rel, err := r.workMount()
	if err != nil {
		return nil, err
	}
	if r.workDir, err = r.workSource(ctx, m, rel); err != nil {
		return nil, err
	}
	if err := r.checkOutputs(ctx, m); err != nil {
		return nil, err
	}
	if r.writeBack && m.WorkTree() {
		r.syncLabel = "physical:" + m.Host + "//" + rel.String()
		r.recoverSyncs(ctx, r.workDir)
	}
	r.trace("session+recover")
	if !r.noCache {
		r.cacheKey = projectCacheKey(m, rel, r.rev)
	}
	return m, nil
}

// workMount sets r.workPath (--work, else the session's, else the default)
// and returns its mount and its path in the mount.
func (r *runner) workMount() (*mounted, vfs.Path, error) {
	work := cmp.Or(r.work, r.s.Work, defaultWork)
	wp, err := vfs.ParseGuest(work)
	if err != nil {
		return nil, vfs.Path{}, usageErrorf("--work %s: %s", work, messageOrCode(err))
	}
	r.workPath = wp.WithoutDirMark()
	m, rel, ok := r.s.mountAt(r.workPath)
	if !ok {
		return nil, vfs.Path{}, usageErrorf("--work %s: not inside any mount (see capfs mounts)", work)
	}
	return m, rel, nil
}

// checkOutputs checks --out and --commit against the work mount m.
func (r *runner) checkOutputs(ctx context.Context, m *mounted) error {
	if r.out != "" && r.writeBack {
		return usageErrorf("--out %s: the work path %s is written back; --out is for --rev, git and memory work mounts", r.out, displayPath(r.workPath.String()))
	}
	if err := checkOut(r.out); err != nil {
		return err
	}
	if r.commit == "" {
		return nil
	}
	if r.writeBack || (!m.Revision() && r.rev == "") {
		return usageErrorf("--commit %s: for --rev or a git work mount", r.commit)
	}
	if r.out != "" {
		return usageErrorf("--commit and --out: give one")
	}
	var err error
	r.commitAt, err = r.commitTargetOf(ctx, r.commit)
	return err
}

// sandboxRunner is the run's sandbox, for subject: bubblewrap with the
// limits, the build caches and the tool mount, wrapped for --net.
func (r *runner) sandboxRunner(subject string) (*sandbox.Runner, *sandbox.BubblewrapWrapper, error) {
	opts := r.lim.options()
	if r.cacheKey != "" {
		caches, err := r.cacheMounts()
		if err != nil {
			fmt.Fprintf(r.stderr, "capfs: run: build caches: %s (running without them)\n", show(err.Error()))
		} else {
			opts.Caches = caches
		}
	}
	r.useToolMount(&opts)
	r.noteShownMounts()
	bw := sandbox.Bubblewrap(opts)
	wrappers, err := r.lim.net.wrappers(bw, subject, r.s.Audit, r.msgs())
	if err != nil {
		return nil, nil, err
	}
	runner := &sandbox.Runner{Wrappers: wrappers}
	runner.AllowUnsandboxed = r.allowUnsandboxed
	runner.Audit = r.s.Audit
	return runner, bw, nil
}

// launch runs argv on the run's mounts (run.Session.Launch), with a terminal
// of its own when asked for, and capfs's signals passed on.
func (r *runner) launch(ctx context.Context, runner *sandbox.Runner, argv []string) (*sandbox.Result, error) {
	launch := &sandbox.Launch{
		Path:    argv[0],
		Args:    argv[1:],
		Dir:     sandboxTarget(r.workPath),
		Env:     append(append(r.gitEnv(), r.lim.net.env()...), r.env...),
		Subject: r.s.Subject,
		Stdin:   r.stdin,
		Stdout:  r.stdout,
		Stderr:  r.stderr,
		Signals: r.sig.forward,
	}
	term, err := r.startTerminal(launch)
	if err != nil {
		fmt.Fprintf(r.stderr, "capfs: run: no terminal for the command: %s\n", show(err.Error()))
	}
	r.trace("caches")
	r.sig.running()
	res, err := r.sess.Launch(context.WithoutCancel(ctx), runner, launch)
	r.sig.exited()
	r.trace("run")
	if term != nil {
		term.finish()
	}
	if r.cacheKey != "" {
		r.trimCache()
	}
	return res, err
}

// sayExited prints how the command exited, how it ran, and how the work tree
// reached it.
func (r *runner) sayExited(res *sandbox.Result, setup time.Duration, bw *sandbox.BubblewrapWrapper) {
	how := "sandboxed"
	if !res.Sandboxed {
		how = "UNSANDBOXED"
	}
	r.say("capfs: run: %s exited with status %d (%s; wrappers: %s; setup %s, ran %s)\n", show(r.argv[0]), res.ExitCode, how,
		strings.Join(res.Wrappers, ", "), roundDur(setup), roundDur(res.Duration))
	if res.Sandboxed {
		r.say("capfs: run: limits: %s\n", bw.Limits())
		for _, n := range r.shownNotes {
			r.say("capfs: run: /proc/self/mountinfo inside shows %s\n", n)
		}
	}
	if res.ExitCode != 0 {
		r.say("%s", r.lim.net.hint())
	}
	r.say("capfs: run: work tree: %s\n", r.workMode())
	r.sayGit()
}

// workSource returns the Dir the work checkout is made from and sets
// r.writeBack: a physical (or other writable) mount is written back; --rev, a
// git mount and a memory mount are not (their changes go to --out).
func (r *runner) workSource(ctx context.Context, m *mounted, rel vfs.Path) (*dir.Dir, error) {
	s := r.s
	if r.rev != "" {
		if m.HostDir() == "" {
			return nil, usageErrorf("--rev %s: the work path %s is not in a physical or git mount", r.rev, displayPath(r.workPath.String()))
		}
		return r.revSource(ctx)
	}
	d, err := s.Root.Sub(ctx, r.workPath.String())
	if err != nil {
		return nil, err
	}
	switch {
	case m.Revision() || m.ReadOnly:
		// A read-only mount (a git revision): run on it, collect outputs.
		r.writeBack = false
		return s.Root.ReadOnly().Sub(ctx, r.workPath.String())
	case m.Ephemeral():
		r.writeBack = false
	default:
		r.writeBack = true
	}
	return d, nil
}

// trace prints, when $CAPFS_TRACE is set, the time since the last mark
// (phases of a run, for finding where start-up time goes).
func (r *runner) trace(phase string) {
	if !traceOn {
		return
	}
	now := time.Now()
	if r.lastMark.IsZero() {
		r.lastMark = processStart
	}
	fmt.Fprintf(r.stderr, "capfs: trace: %-16s %s\n", phase, roundDur(now.Sub(r.lastMark)))
	r.lastMark = now
}

var (
	traceOn      = os.Getenv("CAPFS_TRACE") != ""
	processStart = time.Now()
)

// failedBeforeRun reports an error of the set-up (checkout): interrupted, or
// the error itself.
func (r *runner) failedBeforeRun(err error) error {
	if s := r.sig.caught(); s != nil {
		r.say("capfs: run: interrupted by %s before the command started; nothing was run\n", signalName(s))
		return exitStatus(signalStatus(s))
	}
	return err
}

// startFailed reports a run that did not start.
func (r *runner) startFailed(prog string, err error) error {
	s := r.s
	if sg := r.sig.caught(); sg != nil && vfs.CodeOf(err) == vfs.CodeCanceled {
		r.say("capfs: run %s: interrupted by %s; nothing synced back\ncapfs: audit log: %s\n", show(prog), signalName(sg), s.AuditPath)
		return exitStatus(signalStatus(sg))
	}
	code := exitRunFailed
	switch {
	case errors.Is(err, sandbox.ErrUnavailable):
		r.say("capfs: run: %s\ncapfs: run: %s\n", showMessage(err), sandboxHint())
	case vfs.CodeOf(err) == vfs.CodeNotFound:
		r.say("capfs: run: %s: command not found\n", show(prog))
		code = exitNotFound
	case vfs.CodeOf(err) == vfs.CodePermission || vfs.CodeOf(err) == vfs.CodeNotSupported:
		r.say("capfs: run: %s: cannot be executed: %s\n", show(prog), showError(err))
		code = exitNotExecutable
	default:
		r.say("capfs: run %s: %s\n", show(prog), showError(err))
	}
	r.say("capfs: audit log: %s\n", s.AuditPath)
	return exitStatus(code)
}

// say prints to stderr; a closed stderr (SIGPIPE ignored) loses the message
// but nothing else.
func (r *runner) say(format string, a ...any) {
	fmt.Fprintf(r.msgs(), format, a...)
}

// msgs is stderr for capfs's own messages: a write that fails because the
// reader went away (EPIPE) is remembered (r.unheard), so that nothing is kept
// on the strength of a message nobody read.
func (r *runner) msgs() io.Writer { return &watchWriter{w: r.stderr, r: r} }

type watchWriter struct {
	w io.Writer
	r *runner
}

func (w *watchWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil && errors.Is(err, syscall.EPIPE) {
		w.r.unheard = true
	}
	return n, err
}

// startMounts makes the run's mounts (run.Start): the work tree, read-write
// (a checkout, or a lazy FUSE mount: run_lazy.go), then the read-only grants:
// the other physical mounts (m is the work path's), then --grant paths.
func (r *runner) startMounts(ctx context.Context, m *mounted) error {
	ms, err := r.mountSpecs(ctx, m)
	if err != nil {
		return err
	}
	sess, err := run.Start(ctx, &run.Spec{Mounts: ms, Ready: r.ready})
	for _, b := range r.checkoutBars {
		if b != nil {
			b.finish()
		}
	}
	if err != nil {
		return r.failedBeforeRun(r.startError(err))
	}
	r.sess, r.mounts = sess, sess.Binds()
	return nil
}

// mountSpecs lists the run's mounts, recording each one's namespace path in
// r.paths: the work path, then each read-only grant not covered by one
// before it (the sandbox cannot nest binds, and a granted tree already shows
// what lies beneath it).
func (r *runner) mountSpecs(ctx context.Context, m *mounted) ([]run.Mount, error) {
	work := run.Mount{Name: r.workPath.String(), Dir: r.workDir, Target: sandboxTarget(r.workPath), Writable: true}
	if r.lazy {
		work.Lazy = r.lazyOptions(ctx)
		r.checkoutBars = append(r.checkoutBars, nil)
	} else {
		work.Checkout = r.checkoutOptions(r.workPath, nil)
	}
	ms, seen := []run.Mount{work}, []vfs.Path{r.workPath}
	ro, err := r.readOnlyPaths(m)
	if err != nil {
		return nil, err
	}
	for _, p := range ro {
		if covered(seen, p) {
			continue
		}
		d, err := r.s.Root.ReadOnly().Sub(ctx, p.String())
		if err != nil {
			return nil, r.failedBeforeRun(err)
		}
		ms = append(ms, run.Mount{Name: p.String(), Dir: d, Target: sandboxTarget(p), Checkout: r.checkoutOptions(p, r.hostFor(p))})
		seen = append(seen, p)
	}
	r.paths = seen
	return ms, nil
}

// readOnlyPaths lists the paths granted read-only, shallowest first: the
// physical mounts other than m, then --grant paths.
func (r *runner) readOnlyPaths(m *mounted) ([]vfs.Path, error) {
	var ro []vfs.Path
	for _, om := range r.s.Mounts {
		if om.WorkTree() && om != m {
			ro = append(ro, om.Path)
		}
	}
	for _, g := range r.grants {
		gp, err := vfs.ParseGuest(g)
		if err != nil {
			return nil, usageErrorf("--grant %s: %s", g, messageOrCode(err))
		}
		ro = append(ro, gp.WithoutDirMark())
	}
	sort.SliceStable(ro, func(i, j int) bool { return ro[i].Depth() < ro[j].Depth() })
	return ro, nil
}

// checkoutOptions are the options of the checkout of namespace path p (host:
// the backend serving it directly, for a zero-copy read-only checkout), with a
// progress bar on stderr when it is a terminal and the checkout takes over a
// second.
func (r *runner) checkoutOptions(p vfs.Path, host vfs.Backend) materialize.Options {
	opts := materialize.Options{Host: host, Git: r.lim.git, Private: !r.lim.bindGrants, GitScanBudget: r.lim.gitScanBudget, GitScanCache: r.gitScanCache()}
	bar := newProgress(r.stderr, "checkout "+showPath(p.String()))
	if bar != nil {
		opts.Progress = bar.update
	}
	r.checkoutBars = append(r.checkoutBars, bar)
	return opts
}

// ready takes mount i's view once made (run.Spec.Ready): it clears the
// checkout's progress bar, says what the checkout left out, and for the work
// tree records what became of its .git and keeps it under --keep.
func (r *runner) ready(i int, v *run.View) error {
	if b := r.checkoutBars[i]; b != nil {
		b.finish()
	}
	if i+1 < len(r.checkoutBars) && r.checkoutBars[i+1] != nil {
		r.checkoutBars[i+1].start = time.Now() // the next checkout starts now
	}
	if i == 0 {
		defer r.trace("checkout")
	}
	if v.Tree == nil {
		return nil // lazy: nothing walked, nothing left out
	}
	r.sayLeftOut(r.paths[i], v.Tree)
	if i == 0 {
		r.workTree = v.Tree
		r.checkoutGit(v.Tree)
		if r.keep {
			v.Tree.Keep()
		}
	}
	return nil
}

// startError is the error run.Start returned, as run says it: a checkout's
// re-addressed to the namespace root.
func (r *runner) startError(err error) error {
	var me *run.MountError
	if !errors.As(err, &me) {
		return err
	}
	if me.Op == "checkout" {
		return vfs.Under(me.Err, r.paths[me.Index])
	}
	return me.Err
}

// sayLeftOut says what checkout t of namespace path p left out of the
// sandbox.
func (r *runner) sayLeftOut(p vfs.Path, t *materialize.Tree) {
	var hidden []materialize.Skip
	for _, sk := range t.Skipped() {
		if strings.HasPrefix(sk.Reason, "git directory emptied") {
			r.say("capfs: run: not in the sandbox: %s's contents: %s\n", showGuest(p, sk.Path), show(sk.Reason))
			continue
		}
		hidden = append(hidden, sk)
	}
	r.sayNotInSandbox(p, hidden)
}

// covered reports whether p is, lies under, or holds one of the paths seen.
func covered(seen []vfs.Path, p vfs.Path) bool {
	for _, q := range seen {
		if p.HasPrefix(q) || q.HasPrefix(p) {
			return true
		}
	}
	return false
}

// hostFor returns the backend serving namespace path p directly (the mount's
// backend, Sub'd to p), for a zero-copy read-only checkout; nil when another mount
// lies beneath p (the namespace then shows more than the backend does).
func (r *runner) hostFor(p vfs.Path) vfs.Backend {
	m, rel, ok := r.s.mountAt(p)
	if !ok {
		return nil
	}
	for _, om := range r.s.Mounts {
		if om != m && om.Path.HasPrefix(p) {
			return nil
		}
	}
	if rel.IsRoot() {
		return m.Backend
	}
	b, err := m.Backend.Sub(context.Background(), rel)
	if err != nil {
		return nil
	}
	r.subs = append(r.subs, closerOf(b))
	return b
}

// sandboxTarget is where namespace path p appears inside the sandbox.
func sandboxTarget(p vfs.Path) string {
	if p.IsRoot() {
		return sandboxRoot
	}
	return path.Join(sandboxRoot, p.String())
}

// recoverSyncs finishes, before a new checkout, the sync-backs into this work
// path that were interrupted (capfs killed while applying): their journals
// carry r.syncLabel. Each is rolled forward through d and summarised.
func (r *runner) recoverSyncs(ctx context.Context, d *dir.Dir) {
	err := run.Recover(ctx, d, r.syncLabel, syncback.RecoverOptions{OnReject: r.onReject}, func(j syncback.JournalInfo) func(*syncback.Report, error) {
		r.say("capfs: run: finishing the sync-back into %s interrupted at %s\n",
			showPath(r.workPath.String()), j.Created.Local().Format(time.DateTime))
		return func(rep *syncback.Report, err error) { printApplied(r.stderr, r.workPath, rep, err, -1) }
	})
	if err != nil {
		r.say("capfs: run: looking for interrupted sync-backs: %s\n", showError(err))
	}
}

func changeLetter(k materialize.ChangeKind) string {
	switch k {
	case materialize.Added:
		return "A"
	case materialize.Modified:
		return "M"
	case materialize.Deleted:
		return "D"
	case materialize.TypeChanged:
		return "T"
	case materialize.ModeChanged:
		return "P"
	case materialize.Touched:
		return "U"
	}
	return "?"
}

func roundDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}
