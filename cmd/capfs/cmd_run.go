//go:build linux

package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/sandbox"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/policy"
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
		mode, reject, err := syncModes(conflict, onReject)
		if err != nil {
			return err
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

// conflictModes and rejectModes are the values of --conflict and --on-reject.
var (
	conflictModes = map[string]syncback.ConflictMode{"fail": syncback.ConflictFail, "ours": syncback.ConflictKeepOurs, "theirs": syncback.ConflictKeepTheirs}
	rejectModes   = map[string]syncback.RejectMode{"abort": syncback.RejectAbort, "apply-rest": syncback.RejectApplyRest}
)

// syncModes parses --conflict and --on-reject (run's and sync's).
func syncModes(conflict, onReject string) (syncback.ConflictMode, syncback.RejectMode, error) {
	mode, ok := conflictModes[conflict]
	if !ok {
		return 0, 0, usageErrorf("--conflict %s: want fail, ours or theirs", conflict)
	}
	reject, ok := rejectModes[onReject]
	if !ok {
		return 0, 0, usageErrorf("--on-reject %s: want apply-rest or abort", onReject)
	}
	return mode, reject, nil
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
	if err := l.parseSizes(); err != nil {
		return err
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

// parseSizes parses --max-memory, --tmp-size, --max-bytes and
// --max-file-size.
func (l *limitFlags) parseSizes() error {
	var err error
	if l.memory, err = parseSizeFlag("max-memory", l.maxMemory); err != nil {
		return err
	}
	if l.tmp, err = parseSizeFlag("tmp-size", l.tmpSize); err != nil {
		return err
	}
	if l.sync.MaxBytes, err = parseSizeFlag("max-bytes", l.maxBytes); err != nil {
		return err
	}
	if l.fileSize, err = parseSizeFlag("max-file-size", l.maxFileSize); err != nil {
		return err
	}
	l.fileSize = max(l.fileSize, 0)
	return nil
}

// parseSizeFlag parses size v of --flag: 0 when unset, -1 for "0" (no
// limit).
func parseSizeFlag(flag, v string) (int64, error) {
	if v == "" {
		return 0, nil
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
