package main

import (
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
	conflict         materialize.ConflictMode
	onReject         materialize.RejectMode
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
	trees            []*materialize.Tree
	workTree         *materialize.Tree
	workDir          *dir.Dir
	workPath         vfs.Path
	writeBack        bool // the work mount keeps what is synced into it (physical, not --rev)
	mounts           []sandbox.Mount
	seenTargets      []vfs.Path
	subs             []func() error // Subs of mount backends made for zero-copy checkouts
	cacheKey         string         // the project's build cache key ("" = no caches)
	keptID           string         // the id the work checkout was kept under
	prefix           string         // the summary's command name ("" = run)
	lastMark         time.Time
	bars             []*progress // progress bars of a sync under way
	unheard          bool        // a message to stderr failed: nobody reads it (EPIPE)
	lazyFlag         *bool       // --lazy or --no-lazy as given (nil: the default)
	lazy             bool        // the work tree is a lazy FUSE mount (run_lazy.go)
	lazyWhy          string      // why lazy or not, for the summary
	lazyWork         *run.Lazy
	git              gitRun   // the work tree's .git (run_git.go)
	shownNotes       []string // host paths the sandbox's mountinfo shows, for the summary (run_cachemount.go)
}

func (r *runner) close() {
	for _, t := range r.trees {
		if err := t.Close(); err != nil {
			fmt.Fprintf(r.stderr, "capfs: run: removing a checkout: %s\n", showError(err))
		}
	}
	r.trees = nil
	for _, c := range r.subs {
		c()
	}
	r.subs = nil
}

func (r *runner) run(ctx context.Context, argv []string) error {
	s := r.s
	r.argv = argv
	defer r.trace("review")
	work := r.work
	if work == "" {
		work = s.Work
	}
	if work == "" {
		work = defaultWork
	}
	wp, err := vfs.ParseGuest(work)
	if err != nil {
		return usageErrorf("--work %s: %s", work, messageOrCode(err))
	}
	r.workPath = wp.WithoutDirMark()
	m, rel, ok := s.mountAt(r.workPath)
	if !ok {
		return usageErrorf("--work %s: not inside any mount (see capfs mounts)", work)
	}
	workDir, err := r.workSource(ctx, m, rel)
	if err != nil {
		return err
	}
	r.workDir = workDir
	if r.out != "" && r.writeBack {
		return usageErrorf("--out %s: the work path %s is written back; --out is for --rev, git and memory work mounts", r.out, displayPath(r.workPath.String()))
	}
	if err := checkOut(r.out); err != nil {
		return err
	}
	if r.commit != "" {
		if r.writeBack || (m.Kind != kindGit && r.rev == "") {
			return usageErrorf("--commit %s: for --rev or a git work mount", r.commit)
		}
		if r.out != "" {
			return usageErrorf("--commit and --out: give one")
		}
		if r.commitAt, err = r.commitTargetOf(ctx, r.commit); err != nil {
			return err
		}
	}
	if r.writeBack && m.Kind == kindPhysical && m.Host != "" {
		r.syncLabel = "physical:" + m.Host + "//" + rel.String()
		r.recoverSyncs(ctx, workDir)
	}
	r.trace("session+recover")
	if !r.noCache {
		r.cacheKey = projectCacheKey(m, rel, r.rev)
	}

	// The work checkout, read-write (or a lazy FUSE mount: run_lazy.go).
	if err := r.chooseLazy(r.lazyFlag); err != nil {
		r.say("capfs: run: %s\n", show(err.Error()))
		return exitStatus(exitRunFailed)
	}
	start := time.Now()
	if r.lazy {
		if err := r.startLazy(ctx); err != nil {
			return r.failedBeforeRun(err)
		}
	} else {
		t, err := r.checkout(ctx, r.workPath, workDir, false, nil)
		if err != nil {
			return r.failedBeforeRun(err)
		}
		r.workTree = t
		r.checkoutGit(t)
		if r.keep {
			t.Keep()
		}
		r.addMount(t, r.workPath, true)
	}
	r.trace("checkout")

	// Read-only grants: the other physical mounts, then --grant paths.
	var ro []vfs.Path
	for _, om := range s.Mounts {
		if om.Kind == kindPhysical && om != m {
			ro = append(ro, om.Path)
		}
	}
	for _, g := range r.grants {
		gp, err := vfs.ParseGuest(g)
		if err != nil {
			return usageErrorf("--grant %s: %s", g, messageOrCode(err))
		}
		ro = append(ro, gp.WithoutDirMark())
	}
	sort.SliceStable(ro, func(i, j int) bool { return ro[i].Depth() < ro[j].Depth() })
	for _, p := range ro {
		if r.covered(p) {
			continue // inside (or holding) a grant already given
		}
		d, err := s.Root.ReadOnly().Sub(ctx, p.String())
		if err != nil {
			return r.failedBeforeRun(err)
		}
		t, err := r.checkout(ctx, p, d, true, r.hostFor(p))
		if err != nil {
			return r.failedBeforeRun(err)
		}
		r.addMount(t, p, false)
	}
	setup := time.Since(start)
	r.trace("grants")

	// Run.
	opts := r.lim.options()
	if r.cacheKey != "" {
		caches, err := cacheMounts(r.cacheKey)
		if err != nil {
			fmt.Fprintf(r.stderr, "capfs: run: build caches: %s (running without them)\n", show(err.Error()))
		} else {
			opts.Caches = caches
		}
	}
	r.useToolMount(&opts)
	r.noteShownMounts()
	bw := sandbox.Bubblewrap(opts)
	wrappers, err := r.lim.net.wrappers(bw, s.Subject, s.Audit, r.msgs())
	if err != nil {
		return r.failedBeforeRun(err)
	}
	runner := &sandbox.Runner{Wrappers: wrappers}
	runner.AllowUnsandboxed = r.allowUnsandboxed
	runner.Audit = s.Audit
	launch := &sandbox.Launch{
		Path:    argv[0],
		Args:    argv[1:],
		Dir:     sandboxTarget(r.workPath),
		Env:     append(append(r.gitEnv(), r.lim.net.env()...), r.env...),
		Mounts:  r.mounts,
		Subject: s.Subject,
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
	res, err := runner.Run(context.WithoutCancel(ctx), launch)
	r.sig.exited()
	r.trace("run")
	if term != nil {
		term.finish()
	}
	if r.cacheKey != "" {
		trimCache(r.cacheKey)
	}
	if lerr := r.finishLazy(ctx); lerr != nil {
		return lerr
	}
	if err != nil {
		return r.startFailed(argv[0], err)
	}
	how := "sandboxed"
	if !res.Sandboxed {
		how = "UNSANDBOXED"
	}
	r.say("capfs: run: %s exited with status %d (%s; wrappers: %s; setup %s, ran %s)\n", show(argv[0]), res.ExitCode, how,
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
	code := r.review(ctx, res.ExitCode)
	r.olderKept()
	if s.AuditTag != "" {
		r.say("capfs: run: audit events tagged %s (what it changed: capfs audit --run %s --changes)\n", s.AuditTag, s.AuditTag)
	}
	r.say("capfs: audit log: %s\n", s.AuditPath)
	return exitStatus(code)
}

// workSource returns the Dir the work checkout is made from and sets
// r.writeBack: a physical (or other writable) mount is written back; --rev, a
// git mount and a memory mount are not (their changes go to --out).
func (r *runner) workSource(ctx context.Context, m *mounted, rel vfs.Path) (*dir.Dir, error) {
	s := r.s
	if r.rev != "" {
		if m.Host == "" || (m.Kind != kindPhysical && m.Kind != kindGit) {
			return nil, usageErrorf("--rev %s: the work path %s is not in a physical or git mount", r.rev, displayPath(r.workPath.String()))
		}
		return r.revSource(ctx)
	}
	d, err := s.Root.Sub(ctx, r.workPath.String())
	if err != nil {
		return nil, err
	}
	switch {
	case m.Kind == kindGit || m.ReadOnly:
		// A read-only mount (a git revision): run on it, collect outputs.
		r.writeBack = false
		return s.Root.ReadOnly().Sub(ctx, r.workPath.String())
	case m.Kind == kindMemory:
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

// checkout materializes d (namespace path p), with a progress bar on stderr when
// it is a terminal and the checkout takes over a second.
func (r *runner) checkout(ctx context.Context, p vfs.Path, d *dir.Dir, readOnly bool, host vfs.Backend) (*materialize.Tree, error) {
	opts := materialize.Options{ReadOnly: readOnly, Host: host, Git: r.lim.git, Private: !r.lim.bindGrants, GitScanBudget: r.lim.gitScanBudget, GitScanCache: gitScanCache()}
	bar := newProgress(r.stderr, "checkout "+showPath(p.String()))
	if bar != nil {
		opts.Progress = bar.update
		defer bar.finish()
	}
	t, err := materialize.Checkout(ctx, d, opts)
	if err != nil {
		return nil, readdressUnder(err, p)
	}
	r.trees = append(r.trees, t)
	var hidden []materialize.Skip
	for _, sk := range t.Skipped() {
		if strings.HasPrefix(sk.Reason, "git directory emptied") {
			r.say("capfs: run: not in the sandbox: %s's contents: %s\n", showGuest(p, sk.Path), show(sk.Reason))
			continue
		}
		hidden = append(hidden, sk)
	}
	r.sayNotInSandbox(p, hidden)
	return t, nil
}

// addMount binds checkout t at the sandbox target of namespace path p.
func (r *runner) addMount(t *materialize.Tree, p vfs.Path, writable bool) {
	m := sandbox.Mount{Source: t.Path(), Target: sandboxTarget(p), Writable: writable}
	if writable {
		m.ReadOnly = t.ReadOnlyPaths()
	}
	if t.Bound() {
		m.File = t.BindFile()
	}
	r.mounts = append(r.mounts, m)
	r.seenTargets = append(r.seenTargets, p)
}

// covered reports whether p is, lies under, or holds a path already granted: the
// sandbox cannot nest binds, and a granted tree already shows what lies beneath it.
func (r *runner) covered(p vfs.Path) bool {
	for _, q := range r.seenTargets {
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

// joinGuest joins a namespace path and a path relative to it.
func joinGuest(p vfs.Path, rel string) string {
	if p.IsRoot() {
		return rel
	}
	if rel == "" || rel == "." {
		return p.String()
	}
	return p.String() + "/" + rel
}

// readdressUnder re-addresses an error whose path is relative to the Dir at p to the
// namespace root.
func readdressUnder(err error, p vfs.Path) error {
	var ve *vfs.Error
	if !errors.As(err, &ve) {
		return err
	}
	dest := ""
	if ve.Dest != "" {
		dest = joinGuest(p, ve.Dest)
	}
	return vfs.Readdress(err, "", joinGuest(p, ve.Path), dest)
}

// recoverSyncs finishes, before a new checkout, the sync-backs into this work
// path that were interrupted (capfs killed while applying): their journals
// carry r.syncLabel. Each is rolled forward through d and summarised.
func (r *runner) recoverSyncs(ctx context.Context, d *dir.Dir) {
	js, err := materialize.PendingJournals("")
	if err != nil {
		r.say("capfs: run: looking for interrupted sync-backs: %s\n", showError(err))
		return
	}
	for _, j := range js {
		if j.Busy || j.Label != r.syncLabel {
			continue
		}
		r.say("capfs: run: finishing the sync-back into %s interrupted at %s\n",
			showPath(r.workPath.String()), j.Created.Local().Format(time.DateTime))
		rep, err := materialize.Recover(ctx, d, j.Path, materialize.RecoverOptions{OnReject: r.onReject})
		printApplied(r.stderr, r.workPath, rep, err, -1)
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
