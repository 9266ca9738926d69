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

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/sandbox"
	"github.com/capfs/capfs/policy"
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

const runLong = `Run CMD in a bubblewrap sandbox on a private checkout of the work mount, show
what it changed, and bring the changes back through the namespace's checks.

  1. The work path (--work, default "project", or the configuration's "work")
     is checked out read-write into a private 0700 directory (under
     $CAPFS_TMPDIR, else /dev/shm, else the temp dir). Every file is read
     through the capability: paths the policy denies (secrets) are left out.
     A progress bar shows on a terminal when the checkout takes over a second.
     Lazy mode (--lazy, the default where FUSE works; --no-lazy or
     CAPFS_RUN_LAZY=0 for a checkout): nothing is copied before CMD starts.
     The work path is a FUSE mount of a copy-on-write layer over it: files
     are read through the capability on first access, every change lands in
     a private upper directory (the "checkout" of the steps below; under
     $CAPFS_TMPDIR, else /dev/shm when 1 GiB is free there, else the temp
     dir), a write
     the policy refuses fails at once, and every .git is read-only (the work
     tree's shown after the history scan --git describes; nested ones hidden).
     The summary says which mode ran.
  2. Every other physical mount, and each --grant path (e.g. ref/head), is
     made visible read-only: a physical directory is bound without copying when
     the policy hides nothing in it, anything else is copied. A path inside, or
     holding, one already granted is left out. Git and memory mounts are
     visible only through --grant.
  3. CMD runs under bubblewrap: its own user namespace as a non-root uid, no
     network, a cleared environment (plus --env), /usr and /etc read-only, a
     private /tmp, and the per-project build caches (see "capfs cache";
     --no-cache leaves them out). Namespace path P appears at /capfs/P; the
     working directory is /capfs/<work path>. What the policy forbids to write
     (.git, persistence files such as .bashrc) is bound read-only. The sandbox
     is limited to --max-procs processes, --max-memory of memory and a /tmp of
     --tmp-size. No host path of yours shows inside (/proc/1/cmdline, the
     environment, /proc/self/mountinfo): the build caches, Go's module cache
     (at /opt/capfs/gomodcache) and a Go toolchain outside /usr (at
     /opt/capfs/go) come through a FUSE mount of capfs's own; what still
     shows (all of these without FUSE, a --no-lazy checkout under a
     $CAPFS_TMPDIR on a disk, --bind-grants) is named in the summary.
  4. The terminal: when capfs's standard input and output are a terminal (and
     --tty is not never), CMD gets a pseudo-terminal of its own as its
     controlling terminal: Ctrl-C and Ctrl-Z reach its foreground job as in a
     plain shell (Ctrl-Z stops a job of a shell run inside; a command run
     directly is alone in its session, where the terminal's stop is not
     delivered, as under docker run -t), window size changes follow, and capfs
     itself exits only when CMD does. Otherwise CMD has no controlling
     terminal, and a SIGINT capfs receives is passed on to it.
  5. The review. CMD's changes are scanned and validated (regular files,
     directories and relative symlinks that stay inside only; no FIFOs or
     devices; no setuid bits; the limits --max-files, --max-bytes,
     --max-depth and --max-file-size; the policy, e.g. nothing under
     .git/hooks) before anything is written, and summarised on stderr: counts
     by directory with sizes, the first --show paths, every refusal. --sync
     decides what happens next:
       on-success (the default)  apply when CMD exited 0; otherwise keep the
                                 changes in the checkout for "capfs sync"
       always                    apply whatever CMD's status
       never                     apply nothing; keep the changes for later
       ask                       show the summary and ask (y: apply, n:
                                 discard, k: keep for later, d: a diff in
                                 $PAGER); without a terminal, as never,
                                 exiting 3 when CMD exited 0
     --dry-run applies nothing and keeps nothing (unless --keep).
  6. The apply goes through the capability, each file atomically and with the
     time the sandbox gave it, under a journal kept outside the project (if
     capfs dies while applying, the next run finishes it); a directory whose
     entries CMD created and removed again gets the time CMD left on it, as a
     plain run would (go test's result cache looks at it). A path that also
     changed in the source since the checkout is a conflict (--conflict fail,
     ours or theirs). A refused or conflicting change is left out and the rest
     applied (--on-reject apply-rest, the default; abort applies nothing).
     Whatever is not applied stays in a kept checkout: its path and the
     commands to inspect it ("capfs sync --diff ID"), apply it ("capfs sync
     ID") or drop it ("capfs sync --discard ID") are printed. --keep keeps
     the checkout in every case.

A work mount that cannot be written back (a git revision, --rev REV, or a
memory mount, which vanishes when capfs exits) is run on in the same way, and
its changes are written into --out DIR (a host directory, created when
missing), or, for a git revision, committed with --commit BRANCH: one commit
whose parent is the revision, on a new branch, made through a git overlay
(the work tree, the index and HEAD are not touched; the policy still decides
every path). Without either they stay in a kept checkout. Nothing is lost
without a word.

Signals: SIGINT, SIGTERM and SIGHUP received by capfs are passed to CMD (a
second one kills it); a closed output pipe (SIGPIPE) does not stop capfs. When
capfs was signalled, nothing is synced back and the checkout is removed (kept
under --keep); no checkout is left behind in /dev/shm.

Exit status: CMD's own (128+N when it died of signal N); 126 when CMD cannot
be executed and 127 when it is not found, as shells do; 3 when some changes
were refused, conflicted or could not be applied; 125 when the command could
not be started at all (e.g. bubblewrap cannot work here: --allow-unsandboxed
runs it without isolation, audited as such); 2 for bad flags.`

func newRunCmd(o *globalOptions) *cobra.Command {
	var (
		work             string
		grants           []string
		env              []string
		allowUnsandboxed bool
		conflict         string
		onReject         string
		keep             bool
		syncMode         string
		dryRun           bool
		jsonOut          bool
		show             int
		tty              string
		out              string
		rev              string
		commit           string
		noCache          bool
		grantsFile       string
		lim              limitFlags
		lazy, noLazy     bool
	)
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARGS...]",
		Short: "Run a command in a sandbox on a checkout of the namespace, review its changes and sync them back",
		Long:  runLong,
		Example: `  capfs run -- make
  capfs run --sync=ask -- ./agent.sh
  capfs run --work project/sub --env CGO_ENABLED=0 -- go build ./...
  capfs run --rev v1.2.0 --out /tmp/build -- make
  capfs run --rev HEAD --commit try/fix -- ./fix.sh
  capfs -m src=physical:. -m deps=physical:../vendor,ro run --work src -- make test`,
		Args: cobra.MinimumNArgs(1),
	}
	f := cmd.Flags()
	f.StringVarP(&work, "work", "w", "", `namespace path checked out read-write (default "project")`)
	f.StringArrayVarP(&grants, "grant", "g", nil, "also show this namespace path read-only inside the sandbox (repeatable)")
	f.StringArrayVarP(&env, "env", "e", nil, "set KEY=VALUE in the command's environment (repeatable)")
	f.BoolVar(&allowUnsandboxed, "allow-unsandboxed", false, "run without isolation when bubblewrap cannot work here (audited)")
	f.StringVar(&conflict, "conflict", "fail", "when a changed path also changed in the source: fail, ours (sandbox wins) or theirs (source wins)")
	f.StringVar(&onReject, "on-reject", "apply-rest", "when a change is refused or left in conflict: apply-rest (apply what does not depend on it) or abort (apply nothing)")
	f.StringVar(&syncMode, "sync", syncOnSuccess, "when to apply the changes: on-success, always, never or ask")
	f.BoolVarP(&dryRun, "dry-run", "n", false, "show what would be applied, apply nothing (the checkout is removed unless --keep)")
	f.BoolVar(&keep, "keep", false, "keep the checkout in every case and print where (see capfs sync)")
	f.BoolVar(&keep, "keep-checkout", false, "same as --keep")
	_ = f.MarkHidden("keep-checkout")
	f.BoolVar(&jsonOut, "json", false, "print the change summary as one JSON object on stderr instead of text")
	f.IntVar(&show, "show", 10, "list at most this many changed paths in the summary (-1: all; refusals are always listed)")
	f.StringVar(&tty, "tty", "auto", "give the command a terminal of its own: auto (when capfs's stdin and stdout are one), always or never")
	f.StringVar(&out, "out", "", "for a work mount that cannot be written back (--rev, git, memory): write the changed files into this host directory")
	f.StringVar(&rev, "rev", "", "run on this git revision of the work path's repository instead of the work tree (its changes go to --out)")
	f.StringVar(&commit, "commit", "", "for --rev or a git work mount: write the changes as one commit on this new branch, started at the revision (the work tree, index and HEAD are not touched)")
	f.BoolVar(&noCache, "no-cache", false, "do not mount the per-project build caches (see capfs cache)")
	f.StringVar(&grantsFile, "grants", "", "run on exactly the grants of this grant-set JSON file (authority.GrantSet): each at /grants/ROOT/PATH, read-only unless it writes; nothing else visible")
	f.BoolVar(&lazy, "lazy", false, "give the command the work tree as a FUSE mount with a copy-on-write layer: nothing is copied before it starts (the default where FUSE works; "+envRunLazy+"=0 changes the default)")
	f.BoolVar(&noLazy, "no-lazy", false, "check the work tree out before the command starts (same as --lazy=false)")
	lim.add(cmd)
	f.SetInterspersed(false)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var mode materialize.ConflictMode
		switch conflict {
		case "fail":
			mode = materialize.ConflictFail
		case "ours":
			mode = materialize.ConflictKeepOurs
		case "theirs":
			mode = materialize.ConflictKeepTheirs
		default:
			return usageErrorf("--conflict %s: want fail, ours or theirs", conflict)
		}
		var reject materialize.RejectMode
		switch onReject {
		case "abort":
			reject = materialize.RejectAbort
		case "apply-rest":
			reject = materialize.RejectApplyRest
		default:
			return usageErrorf("--on-reject %s: want apply-rest or abort", onReject)
		}
		switch syncMode {
		case syncAlways, syncOnSuccess, syncNever, syncAsk:
		default:
			return usageErrorf("--sync %s: want on-success, always, never or ask", syncMode)
		}
		switch tty {
		case "auto", "always", "never":
		default:
			return usageErrorf("--tty %s: want auto, always or never", tty)
		}
		for _, kv := range env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return usageErrorf("--env %s: want KEY=VALUE", kv)
			}
		}
		if err := lim.parse(); err != nil {
			return err
		}
		lazyFlag, err := lazyFlagOf(cmd, lazy, noLazy)
		if err != nil {
			return err
		}
		// capfs handles its own signals while it runs (see runSignals); the
		// context of the session then ends only with them.
		sig := newRunSignals()
		defer sig.stop()
		if grantsFile != "" {
			for name, set := range map[string]bool{"--work": work != "", "--grant": len(grants) > 0, "--rev": rev != "", "--out": out != "", "--commit": commit != "", "--lazy (a grant set is checked out)": lazyFlag != nil && *lazyFlag} {
				if set {
					return usageErrorf("--grants runs on the grants alone: %s does not apply", name)
				}
			}
		}
		return action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
			r := &runner{
				s: s, stderr: cmd.ErrOrStderr(), stdout: cmd.OutOrStdout(), stdin: cmd.InOrStdin(),
				work: work, grants: grants, env: env, allowUnsandboxed: allowUnsandboxed, conflict: mode,
				onReject: reject, keep: keep, lim: lim, syncMode: syncMode, dryRun: dryRun,
				jsonOut: jsonOut, show: show, tty: tty, out: out, rev: rev, commit: commit, noCache: noCache, sig: sig,
				lazyFlag: lazyFlag,
			}
			defer r.close()
			if grantsFile != "" {
				return runOnGrants(sig.context(ctx), s, r, grantsFile, args)
			}
			return r.run(sig.context(ctx), args)
		})(cmd, args)
	}
	return cmd
}

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
	lazyWork         *lazyWork
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

// limitFlags are run's flags for the sandbox's and the sync's limits, .git and
// binds.
type limitFlags struct {
	maxProcs                   int
	maxMemory, tmpSize, gitArg string
	maxFiles                   int
	maxBytes, maxDepthArg      string
	maxFileSize                string
	bindGrants                 bool
	memory, tmp                int64
	git                        materialize.GitPolicy
	sync                       materialize.Limits
	fileSize                   int64 // 0: no limit
	gitScanBudget              int
	net                        netFlags
}

func (l *limitFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&l.maxProcs, "max-procs", sandbox.DefaultProcLimit(), "most processes and threads in the sandbox (0: no limit; default 1024, or 128 per CPU when more)")
	f.StringVar(&l.maxMemory, "max-memory", "", `most memory for the sandbox, e.g. 2G (0: no limit; default: half of RAM)`)
	f.StringVar(&l.tmpSize, "tmp-size", sandbox.FormatSize(sandbox.DefaultTmpSize), "size of the sandbox's /tmp, in memory (0: the kernel's default, half of RAM)")
	f.IntVar(&l.maxFiles, "max-files", materialize.DefaultMaxFiles, "most files and directories the sync may create or rewrite (0: no limit)")
	f.StringVar(&l.maxBytes, "max-bytes", sandbox.FormatSize(materialize.DefaultMaxBytes), "most bytes of file contents the sync may write (0: no limit)")
	f.StringVar(&l.maxDepthArg, "max-depth", fmt.Sprint(materialize.DefaultMaxDepth), "deepest path, in components, the sync may write (0: no limit)")
	f.StringVar(&l.maxFileSize, "max-file-size", "0", "largest single file the sync may write, e.g. 100M (0: no limit beyond --max-bytes)")
	f.StringVar(&l.gitArg, "git", "auto", "the work tree's .git, read-only: auto (shown unless its history names a path the policy hides or is past --git-scan-budget), omit, or keep (as auto, but shown past the budget)")
	f.IntVar(&l.gitScanBudget, "git-scan-budget", materialize.DefaultGitScanBudget, "most tree objects a .git's history scan reads (past it, --git auto leaves the .git out as too large to check; keep shows it)")
	l.net.add(f)
	f.BoolVar(&l.bindGrants, "bind-grants", false, "bind read-only physical grants without copying (faster; their host paths show in the sandbox's /proc/self/mountinfo)")
}

func (l *limitFlags) parse() error {
	size := func(flag, v string, unset int64) (int64, error) {
		if v == "" {
			return unset, nil
		}
		n, err := sandbox.ParseSize(strings.ReplaceAll(v, " ", ""))
		if err != nil {
			return 0, usageErrorf("--%s %s: %v", flag, v, err)
		}
		if n == 0 {
			return -1, nil
		}
		return n, nil
	}
	var err error
	if l.memory, err = size("max-memory", l.maxMemory, 0); err != nil {
		return err
	}
	if l.tmp, err = size("tmp-size", l.tmpSize, 0); err != nil {
		return err
	}
	if l.sync.MaxBytes, err = size("max-bytes", l.maxBytes, 0); err != nil {
		return err
	}
	if l.fileSize, err = size("max-file-size", l.maxFileSize, 0); err != nil {
		return err
	}
	if l.fileSize < 0 {
		l.fileSize = 0
	}
	if l.maxProcs < 0 {
		return usageErrorf("--max-procs %d: want 0 (no limit) or more", l.maxProcs)
	}
	if l.gitScanBudget <= 0 {
		return usageErrorf("--git-scan-budget %d: want 1 or more", l.gitScanBudget)
	}
	switch {
	case l.maxFiles < 0:
		return usageErrorf("--max-files %d: want 0 (no limit) or more", l.maxFiles)
	case l.maxFiles == 0:
		l.sync.MaxFiles = -1
	default:
		l.sync.MaxFiles = l.maxFiles
	}
	var depth int
	if _, err := fmt.Sscan(l.maxDepthArg, &depth); err != nil || depth < 0 {
		return usageErrorf("--max-depth %s: want 0 (no limit) or more", l.maxDepthArg)
	}
	if depth == 0 {
		depth = -1
	}
	l.sync.MaxDepth = depth
	switch l.gitArg {
	case "auto":
		l.git = materialize.GitAuto
	case "omit":
		l.git = materialize.GitOmit
	case "keep":
		l.git = materialize.GitKeep
	default:
		return usageErrorf("--git %s: want auto, omit or keep", l.gitArg)
	}
	return l.net.parse()
}

// options returns the bubblewrap options with the limits.
func (l *limitFlags) options() sandbox.BubblewrapOptions {
	o := sandbox.DefaultOptions()
	o.MaxProcs, o.MaxMemory, o.TmpSize = l.maxProcs, l.memory, l.tmp
	if o.MaxProcs == 0 {
		o.MaxProcs = -1
	}
	o.ShareNet = l.net.mode == netHost
	return o
}

// syncPolicy is the extra policy of the sync: the largest file (nil when
// --max-file-size is not set).
func (l *limitFlags) syncPolicy() (policy.Policy, error) {
	if l.fileSize <= 0 {
		return nil, nil
	}
	return policy.New(policy.Config{MaxFileSize: l.fileSize, SecretPatterns: []string{}, PersistencePatterns: []string{}})
}
