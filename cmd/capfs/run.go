package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
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

// exitInterrupted is run's exit code when capfs was interrupted (SIGINT, SIGTERM)
// while the command ran: the command is killed and nothing is synced back.
const exitInterrupted = 130

func newRunCmd(o *globalOptions) *cobra.Command {
	var (
		work             string
		grants           []string
		env              []string
		allowUnsandboxed bool
		conflict         string
		onReject         string
		keepCheckout     bool
		lim              limitFlags
	)
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARGS...]",
		Short: "Run a command in a sandbox on a checkout of the namespace and sync its changes back",
		Long: `Run CMD in a bubblewrap sandbox on a private checkout of the work mount, then
bring its changes back through the namespace's checks.

  1. The work path (--work, default "project", or the configuration's "work")
     is checked out read-write into a private 0700 directory (under
     $CAPFS_TMPDIR, else /dev/shm, else the temp dir). Every file is read
     through the capability: paths the policy denies (secrets) are left out.
  2. Every other physical mount, and each --grant path (e.g. ref/head), is
     made visible read-only: a physical directory is bound without copying when
     the policy hides nothing in it, anything else is copied. A path inside, or
     holding, one already granted is left out: the grant already shows it, and
     binds cannot nest. Git and memory mounts are visible only through --grant.
  3. CMD runs under bubblewrap: its own user namespace as a non-root uid, no
     network, a cleared environment (plus --env), /usr and /etc read-only, a
     private /tmp. Namespace path P appears at /capfs/P; the working directory
     is /capfs/<work path>, e.g. /capfs/project. What the policy forbids to
     write (.git, persistence files such as .bashrc or .vscode/) is bound
     read-only: a write there fails at once (EROFS). A .git whose history names
     a path the policy hides is left empty (--git). No host path of the
     project shows in the sandbox's /proc/self/mountinfo (unless
     --bind-grants; as root, each checkout on /dev/shm is a tmpfs of its own,
     so a kept one is discarded with umount). The sandbox is limited to --max-procs processes,
     --max-memory of memory and a /tmp of --tmp-size (a cgroup per run where
     one can be made, else rlimits; the summary says which).
  4. The checkout's changes are validated (regular files, directories and
     relative symlinks that stay inside only; no FIFOs or devices; no setuid
     or setgid bits; size, count and depth limits; the policy, e.g. nothing
     under .git/hooks), all of them before anything is written, and applied
     through the capability, each file atomically and with the time the
     sandbox gave it (so a later make has nothing to redo), under a journal
     kept outside the project: if capfs dies while applying, the next run in
     the same project finishes the sync first. A path that also changed in the
     source since the checkout, or that lies in a directory the source removed
     or renamed, is a conflict: --conflict fail (default) leaves it unapplied,
     ours keeps the sandbox's version, theirs keeps the source's. When a change
     is refused or left in conflict, --on-reject abort (default) applies
     nothing, apply-rest applies every change that does not depend on one.
     Whatever is not applied is listed with why, and the checkout is kept (its
     host path is printed) so nothing the command made is lost;
     --keep-checkout keeps it in every case.

A summary of the changes, the sandbox that ran the command and the audit log's
path go to stderr. capfs exits with CMD's status; with 3 when sync-back refused
a change, found a conflict or could not apply one (what was applied and what
was not are listed), whatever CMD's status; with 125 when the command could
not be started (e.g. bubblewrap cannot work here: --allow-unsandboxed runs it
without isolation, audited as such); with 130 when capfs is interrupted (the command is killed, nothing is synced
back). Changes are synced back whatever CMD's exit status.`,
		Example: `  capfs run -- make
  capfs run --work project/sub --env CGO_ENABLED=0 -- go build ./...
  capfs -m src=physical:. -m deps=physical:../vendor,ro run --work src -- make test`,
		Args: cobra.MinimumNArgs(1),
	}
	f := cmd.Flags()
	f.StringVarP(&work, "work", "w", "", `namespace path checked out read-write (default "project")`)
	f.StringArrayVarP(&grants, "grant", "g", nil, "also show this namespace path read-only inside the sandbox (repeatable)")
	f.StringArrayVarP(&env, "env", "e", nil, "set KEY=VALUE in the command's environment (repeatable)")
	f.BoolVar(&allowUnsandboxed, "allow-unsandboxed", false, "run without isolation when bubblewrap cannot work here (audited)")
	f.StringVar(&conflict, "conflict", "fail", "when a changed path also changed in the source: fail, ours (sandbox wins) or theirs (source wins)")
	f.StringVar(&onReject, "on-reject", "abort", "when a change is refused or left in conflict: abort (apply nothing) or apply-rest (apply what does not depend on it)")
	f.BoolVar(&keepCheckout, "keep-checkout", false, "keep the checkout directory even when every change was applied (it is always kept when one was not)")
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
			return usageErrorf("--on-reject %s: want abort or apply-rest", onReject)
		}
		for _, kv := range env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return usageErrorf("--env %s: want KEY=VALUE", kv)
			}
		}
		if err := lim.parse(); err != nil {
			return err
		}
		return action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
			r := &runner{
				s: s, stderr: cmd.ErrOrStderr(), stdout: cmd.OutOrStdout(), stdin: cmd.InOrStdin(),
				work: work, grants: grants, env: env, allowUnsandboxed: allowUnsandboxed, conflict: mode,
				onReject: reject, keepCheckout: keepCheckout, lim: lim,
			}
			defer r.close()
			return r.run(ctx, args)
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
	keepCheckout     bool
	syncLabel        string // the sync journal's label: which host directory the work path is
	lim              limitFlags
	trees            []*materialize.Tree
	workTree         *materialize.Tree
	workPath         vfs.Path
	mounts           []sandbox.Mount
	seenTargets      []vfs.Path
	subs             []func() error // Subs of mount backends made for zero-copy checkouts
}

func (r *runner) close() {
	for _, t := range r.trees {
		if err := t.Close(); err != nil {
			fmt.Fprintf(r.stderr, "capfs: run: removing a checkout: %s\n", showError(err))
		}
	}
	for _, c := range r.subs {
		c()
	}
}

func (r *runner) run(ctx context.Context, argv []string) error {
	s := r.s
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
	if m.ReadOnly {
		return usageErrorf("--work %s: the %s mount at %s is read-only", work, m.Kind, displayPath(m.Path.String()))
	}
	workDir, err := s.Root.Sub(ctx, r.workPath.String())
	if err != nil {
		return err
	}
	if m.Kind == kindPhysical && m.Host != "" {
		r.syncLabel = "physical:" + m.Host + "//" + rel.String()
		r.recoverSyncs(ctx, workDir)
	}

	// The work checkout, read-write.
	t, err := r.checkout(ctx, r.workPath, workDir, false, nil)
	if err != nil {
		return err
	}
	r.workTree = t
	if r.keepCheckout {
		t.Keep()
	}
	r.addMount(t, r.workPath, true)

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
			return err
		}
		t, err := r.checkout(ctx, p, d, true, r.hostFor(p))
		if err != nil {
			return err
		}
		r.addMount(t, p, false)
	}

	// Run.
	bw := sandbox.Bubblewrap(r.lim.options())
	runner := &sandbox.Runner{Wrappers: []sandbox.Wrapper{bw}}
	runner.AllowUnsandboxed = r.allowUnsandboxed
	runner.Audit = s.Audit
	launch := &sandbox.Launch{
		Path:    argv[0],
		Args:    argv[1:],
		Dir:     sandboxTarget(r.workPath),
		Env:     r.env,
		Mounts:  r.mounts,
		Subject: s.Subject,
		Stdin:   r.stdin,
		Stdout:  r.stdout,
		Stderr:  r.stderr,
	}
	res, err := runner.Run(ctx, launch)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(r.stderr, "capfs: run %s: interrupted; nothing synced back\ncapfs: audit log: %s\n", argv[0], s.AuditPath)
			return exitStatus(exitInterrupted)
		}
		if errors.Is(err, sandbox.ErrUnavailable) {
			fmt.Fprintf(r.stderr, "capfs: run: %s\ncapfs: run: no sandbox can work here; --allow-unsandboxed runs the command without isolation (audited)\n", showError(err))
		} else {
			fmt.Fprintf(r.stderr, "capfs: run %s: %s\n", argv[0], showError(err))
		}
		fmt.Fprintf(r.stderr, "capfs: audit log: %s\n", s.AuditPath)
		return exitStatus(exitRunFailed)
	}
	how := "sandboxed"
	if !res.Sandboxed {
		how = "UNSANDBOXED"
	}
	fmt.Fprintf(r.stderr, "capfs: run: %s exited with status %d (%s; wrappers: %s)\n", argv[0], res.ExitCode, how, strings.Join(res.Wrappers, ", "))
	if res.Sandboxed {
		fmt.Fprintf(r.stderr, "capfs: run: limits: %s\n", bw.Limits())
	}

	// Sync back.
	// The work Dir's own policy (s.Policy) validates every change (Dir.Check):
	// no extra SyncOptions.Policy is needed.
	rep, serr := r.workTree.SyncBack(ctx, materialize.SyncOptions{Conflict: r.conflict, OnReject: r.onReject, Label: r.syncLabel})
	r.summary(rep, serr)
	fmt.Fprintf(r.stderr, "capfs: audit log: %s\n", s.AuditPath)
	if serr != nil {
		return exitStatus(exitSyncBack)
	}
	return exitStatus(res.ExitCode)
}

// checkout materializes d (namespace path p), with a progress bar on stderr when
// it is a terminal.
func (r *runner) checkout(ctx context.Context, p vfs.Path, d *dir.Dir, readOnly bool, host vfs.Backend) (*materialize.Tree, error) {
	opts := materialize.Options{ReadOnly: readOnly, Host: host, Git: r.lim.git, Private: !r.lim.bindGrants}
	var bar *progressbar.ProgressBar
	if f, ok := r.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		opts.Progress = func(pr materialize.Progress) {
			if bar == nil {
				if pr.Done || pr.TotalBytes < 8<<20 {
					return // small checkouts finish before a bar would help
				}
				bar = progressbar.NewOptions64(pr.TotalBytes,
					progressbar.OptionSetWriter(f),
					progressbar.OptionSetDescription("checkout "+showPath(p.String())),
					progressbar.OptionShowBytes(true),
					progressbar.OptionShowCount(),
					progressbar.OptionClearOnFinish(),
					progressbar.OptionThrottle(0))
			}
			_ = bar.Set64(pr.Bytes)
			if pr.Done {
				_ = bar.Finish()
			}
		}
	}
	t, err := materialize.Checkout(ctx, d, opts)
	if err != nil {
		return nil, readdressUnder(err, p)
	}
	r.trees = append(r.trees, t)
	for _, sk := range t.Skipped() {
		if strings.HasPrefix(sk.Reason, "git directory emptied") {
			fmt.Fprintf(r.stderr, "capfs: run: not in the sandbox: %s's contents: %s (--git keep shows it)\n", showGuest(p, sk.Path), sk.Reason)
			continue
		}
		fmt.Fprintf(r.stderr, "capfs: run: not in the sandbox: %s (%s)\n", showGuest(p, sk.Path), sk.Code)
	}
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

// summary prints what sync-back did, or why it refused.
func (r *runner) summary(rep *materialize.SyncReport, err error) {
	w := r.stderr
	at := r.workPath
	if rep != nil && len(rep.Refused) > 0 {
		for _, rf := range rep.Refused {
			fmt.Fprintf(w, "capfs: sync-back refused %s %s: %s (%s)\n", rf.Change.Kind, showGuest(at, rf.Change.Path), show(rf.Reason), rf.Code)
		}
	}
	if rep != nil && len(rep.Conflicts) > 0 {
		for _, c := range rep.Conflicts {
			fmt.Fprintf(w, "capfs: sync-back conflict: %s changed in the source and in the sandbox\n", showGuest(at, c))
		}
	}
	if err != nil {
		if rep == nil || len(rep.Refused)+len(rep.Conflicts) == 0 {
			fmt.Fprintf(w, "capfs: sync-back: %s\n", showError(readdressUnder(err, at)))
		}
		if rep == nil || len(rep.Applied) == 0 {
			fmt.Fprintf(w, "capfs: sync-back applied nothing; %s is unchanged\n", showPath(at.String()))
			r.notApplied(rep)
			return
		}
		fmt.Fprintf(w, "capfs: sync-back applied %d change(s):\n", len(rep.Applied))
		for _, c := range rep.Applied {
			fmt.Fprintf(w, "  %s %s\n", changeLetter(c.Kind), showGuest(at, c.Path))
		}
		r.notApplied(rep)
		return
	}
	if rep == nil {
		return
	}
	var added, modified, deleted, other int
	for _, c := range rep.Applied {
		switch c.Kind {
		case materialize.Added:
			added++
		case materialize.Modified:
			modified++
		case materialize.Deleted:
			deleted++
		default:
			other++
		}
	}
	fmt.Fprintf(w, "capfs: synced back to %s: %d added, %d modified, %d deleted", showPath(at.String()), added, modified, deleted)
	if other > 0 {
		fmt.Fprintf(w, ", %d type, mode or time changes", other)
	}
	fmt.Fprintln(w)
	for _, c := range rep.Applied {
		fmt.Fprintf(w, "  %s %s\n", changeLetter(c.Kind), showGuest(at, c.Path))
	}
	for _, u := range rep.NotApplied {
		if u.Cause == materialize.CauseTheirs {
			fmt.Fprintf(w, "  (kept the source's) %s %s\n", u.Change.Kind, showGuest(at, u.Change.Path))
		}
	}
	r.notApplied(rep)
}

// notApplied lists the changes rep left unapplied for a reason summary has
// not printed (a refusal and a conflict have their own lines, the source's
// version kept its own), and where the checkout holding them was kept. The
// checkout's host path is the host user's own: this is the host's tool.
func (r *runner) notApplied(rep *materialize.SyncReport) {
	if rep == nil {
		return
	}
	w, at := r.stderr, r.workPath
	var rest []materialize.Unapplied
	for _, u := range rep.NotApplied {
		switch u.Cause {
		case materialize.CauseRefused, materialize.CauseTheirs:
		case materialize.CauseConflict:
			if !slices.Contains(rep.Conflicts, u.Change.Path) {
				rest = append(rest, u)
			}
		default:
			rest = append(rest, u)
		}
	}
	if len(rest) > 0 {
		fmt.Fprintf(w, "capfs: sync-back did not apply %d more change(s):\n", len(rest))
		for _, u := range rest {
			fmt.Fprintf(w, "  %s %s: %s (%s)\n", changeLetter(u.Change.Kind), showGuest(at, u.Change.Path), show(u.Reason), u.Cause)
		}
	}
	if rep.Checkout != "" {
		if len(rep.NotApplied) > 0 {
			fmt.Fprintf(w, "capfs: run: %d change(s) not applied; the checkout holding them is kept at %s\n", len(rep.NotApplied), rep.Checkout)
		} else {
			fmt.Fprintf(w, "capfs: run: the checkout is kept at %s\n", rep.Checkout)
		}
	}
}

// recoverSyncs finishes, before a new checkout, the sync-backs into this work
// path that were interrupted (capfs killed while applying): their journals
// carry r.syncLabel. Each is rolled forward through d and summarised.
func (r *runner) recoverSyncs(ctx context.Context, d *dir.Dir) {
	js, err := materialize.PendingJournals("")
	if err != nil {
		fmt.Fprintf(r.stderr, "capfs: run: looking for interrupted sync-backs: %s\n", showError(err))
		return
	}
	for _, j := range js {
		if j.Busy || j.Label != r.syncLabel {
			continue
		}
		fmt.Fprintf(r.stderr, "capfs: run: finishing the sync-back into %s interrupted at %s\n",
			showPath(r.workPath.String()), j.Created.Local().Format(time.DateTime))
		rep, err := materialize.Recover(ctx, d, j.Path, materialize.RecoverOptions{OnReject: r.onReject})
		r.summary(rep, err)
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

// limitFlags are run's flags for the sandbox's limits, .git and binds.
type limitFlags struct {
	maxProcs                   int
	maxMemory, tmpSize, gitArg string
	bindGrants                 bool
	memory, tmp                int64
	git                        materialize.GitPolicy
}

func (l *limitFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&l.maxProcs, "max-procs", sandbox.DefaultProcLimit(), "most processes and threads in the sandbox (0: no limit; default 1024, or 128 per CPU when more)")
	f.StringVar(&l.maxMemory, "max-memory", "", `most memory for the sandbox, e.g. 2G (0: no limit; default: half of RAM)`)
	f.StringVar(&l.tmpSize, "tmp-size", sandbox.FormatSize(sandbox.DefaultTmpSize), "size of the sandbox's /tmp, in memory (0: the kernel's default, half of RAM)")
	f.StringVar(&l.gitArg, "git", "auto", "the checkout's .git: auto (left empty when its history names a path the policy hides), omit, or keep (read-only, unscanned)")
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
	if l.maxProcs < 0 {
		return usageErrorf("--max-procs %d: want 0 (no limit) or more", l.maxProcs)
	}
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
	return nil
}

// options returns the bubblewrap options with the limits.
func (l *limitFlags) options() sandbox.BubblewrapOptions {
	o := sandbox.DefaultOptions()
	o.MaxProcs, o.MaxMemory, o.TmpSize = l.maxProcs, l.memory, l.tmp
	if o.MaxProcs == 0 {
		o.MaxProcs = -1
	}
	return o
}
