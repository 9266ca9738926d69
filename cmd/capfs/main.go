// Command capfs composes a namespace of mounted backends (host directories, git
// revisions, memory) and works on it through a capfs Dir, so every call is confined
// to the namespace, decided by a policy and recorded in an audit log. Its main job
// is `capfs run -- CMD…`: check the working mount out into a private directory,
// run CMD under bubblewrap with only its grants visible, and bring the changes back
// through the same checks.
//
// Run `capfs help` for the model, the mount syntax, the configuration format and the
// exit codes; `capfs help <command>` for each subcommand.
//
// Adding a subcommand takes one file, cmd_x.go, holding a constructor
// `func newXCmd(o *globalOptions) *cobra.Command` whose RunE calls o.open to get the
// session (namespace, root Dir, policy, audit sink), and one AddCommand line in
// newRootCmd.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/internal/mountkind"
)

func main() {
	runEgressShim()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, processEnviron(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// execute runs the command line args in env and returns the process exit
// code.
func execute(ctx context.Context, env environ, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd(env, stderr)
	root.SetArgs(rewriteGrepArgs(args))
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err != nil {
		reportError(stderr, err)
		if exitCodeOf(err) == exitUsage && !isQuiet(err) {
			fmt.Fprintln(stderr, "Run 'capfs --help' for usage.")
		}
	}
	return exitCodeOf(err)
}

func isQuiet(err error) bool {
	var ce *cliError
	return errors.As(err, &ce) && ce.quiet
}

const rootLong = `capfs composes a virtual filesystem from mounted backends and works on it
through a capability: every call is confined to the namespace (no path, "..",
or symlink reaches outside it), decided by a policy (by default: secrets such as
.ssh/, .env and *.pem are never read; persistence traps such as .git/hooks/ and
.bashrc are never written) and recorded as one line in an audit log (JSON Lines).
Paths on the command line are namespace paths: "project/main.go" or
"/project/main.go" (a leading "/" is the namespace root), never host paths.

"capfs run -- CMD..." is the sandboxed build: the working mount is checked out
into a private directory, CMD runs under bubblewrap (no network, its own user
namespace, a minimal environment) seeing only its grants, and its changes are
validated (regular files, directories and in-tree relative symlinks only, no
setuid bits, size limits, the policy) and synced back through the same checks.

Mounts (repeatable --mount PATH=KIND:ARG[,ro]):
{{kinds}}With no --mount and no --config, the namespace is:
  project    the current directory (read-write, through run's checkout)
  ref/head   the same directory at the git HEAD (read-only; inside a repository)
  tmp        memory

Every memory mount has a quota: its own quota=SIZE, else --memory-quota, else
the configuration's memory_quota, else 256MiB. It counts what the tree holds:
file data by allocated capacity, symlink targets, and a fixed charge per file,
directory and name (see the memory package); a write, create, link or rename
past it fails with quota_exceeded, and no file grows past the quota. SIZE is
bytes with an optional binary unit (64MiB, 1GiB, 512K); 0 or none means no
limit, which lets a guest fill the host's memory.

Configuration (--config FILE, TOML; relative paths are relative to FILE; --mount
flags add mounts, --policy and --audit override):
  policy = "policy.toml"    # policy file (see the policy package), optional
  audit  = "audit.jsonl"    # audit log, optional
  work   = "project"        # run's default --work, optional
  memory_quota = "256MiB"   # memory mounts' default quota, optional
  [[mount]]
  path = "project"          # namespace path
  kind = "physical"         # {{kindnames}}
  source = "."              # host directory or repository
  rev = "HEAD"              # git only
  read_only = false
  quota = "64MiB"           # memory only, optional

Audit log: JSON Lines (one line per call, or one compact record for many),
appended to $XDG_STATE_HOME/capfs/audit.jsonl (else $TMPDIR/capfs-$UID/audit.jsonl),
rotated at 16MiB, old files zstd-compressed and kept up to 64MiB; read it with
capfs audit; --audit FILE|stderr|off, --audit-max-size, --audit-max-files,
--audit-max-total, --audit-level.

Exit codes: 0 success; 1 an operation failed (grep and glob: nothing matched;
diff --exit-code: differences); 2 bad flags, arguments, mount specs or
configuration (grep: also any error, as grep); run exits with the command's own
status, or 3 when its changes were refused or conflicted at sync-back (the source
is left untouched), 125 when the command could not be started (no working
sandbox), or 130 when interrupted.
Errors are printed on stderr as "capfs: <what was done> <path>: <message>
(<code>)", with what to do about it when there is something to do.`

// rootHelp is rootLong with its mount kinds filled in from the registry
// ([mountkind.List]), so that --help lists every kind --mount takes.
func rootHelp() string {
	var rows [][2]string
	for _, k := range mountkind.List() {
		rows = append(rows, [2]string{k.Usage, k.Help})
	}
	const width = 20 // a longer usage has its description on the next line
	var b strings.Builder
	for _, r := range rows {
		if len(r[0]) > width {
			fmt.Fprintf(&b, "  %s\n  %-*s  %s\n", r[0], width, "", r[1])
			continue
		}
		fmt.Fprintf(&b, "  %-*s  %s\n", width, r[0], r[1])
	}
	kinds := strings.NewReplacer("{{kinds}}", b.String(), "{{kindnames}}", mountkind.NameList())
	return kinds.Replace(rootLong)
}

// newRootCmd builds the command tree of a command line run in env, whose
// warnings go to stderr.
func newRootCmd(env environ, stderr io.Writer) *cobra.Command {
	o := &globalOptions{env: env, stderr: stderr}
	root := &cobra.Command{
		Use:           "capfs",
		Short:         "Capability filesystem: browse, grep and run sandboxed builds on a composed namespace",
		Long:          rootHelp(),
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	// "capfs completion bash|zsh|fish|powershell" prints a completion script.
	root.CompletionOptions.HiddenDefaultCmd = false
	root.Version = versionString()
	root.SetVersionTemplate("capfs {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	o.addFlags(root)
	defer func() {
		// Namespace paths complete from the namespace (completion.go).
		for _, c := range root.Commands() {
			switch c.Name() {
			case "ls", "cat", "tree", "stat", "diff", "grep":
				c.ValidArgsFunction = completeGuestPath(o)
			}
		}
	}()
	root.AddCommand(
		newLsCmd(o),
		newCatCmd(o),
		newTreeCmd(o),
		newStatCmd(o),
		newGlobCmd(o),
		newGrepCmd(o),
		newDiffCmd(o),
		newRunCmd(o),
		newSyncCmd(o),
		newCacheCmd(o),
		newMountsCmd(o),
		newMountCmd(o),
		newMCPCmd(o),
		newExtractCmd(o),
		newArchiveCmd(o),
		newSQLiteCmd(o),
		newCASCmd(o),
		newSnapshotCmd(o),
		newAuditCmd(o),
	)
	suggestCommands(root)
	return root
}

// suggestCommands makes an unknown subcommand of root, or of any command group
// under it ("capfs lss", "capfs cache lss"), a usage error naming the nearest
// commands. cobra suggests only for a command without Args of its own, and a
// group's Args must refuse what is not a subcommand.
func suggestCommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		suggestCommands(sub)
	}
	if !c.HasSubCommands() {
		return
	}
	c.Args = unknownCommand
	if !c.Runnable() {
		// cobra checks Args only for a runnable command; else it shows help.
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
}

// unknownCommand is the Args of a command group: no arguments, and for one that
// is no subcommand, "did you mean ...?" naming the closest commands cobra
// finds (an edit away, else two).
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	var s []string
	for d := 1; d <= 2 && len(s) == 0; d++ {
		cmd.SuggestionsMinimumDistance = d
		s = cmd.SuggestionsFor(args[0])
	}
	if len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageError(errors.New(msg))
}

// action adapts a subcommand body: it opens the session, runs fn, closes the
// session, and marks errors without an exit code as operation failures (exit 1).
func action(o *globalOptions, fn func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		s, err := o.open(ctx, cmd.Name())
		if err != nil {
			return err
		}
		if browseCommands[cmd.Name()] && o.env.ownsProcess() {
			done := make(chan struct{})
			defer close(done)
			go exitIfStuck(ctx, done, cmd.ErrOrStderr(), o.env.exit)
		}
		err = failed(withMountHint(ctx, s, fn(ctx, cmd, s, args)))
		if cerr := s.Close(); cerr != nil && err == nil {
			err = failed(cerr)
		}
		return err
	}
}

// browseCommands are the commands that only read the namespace: on SIGINT or
// SIGTERM they stop at their next call, and if one is stuck (a write to a full
// pipe, a slow backend call) capfs exits anyway a second later (exitIfStuck;
// only as the process itself, see [environ.ownsProcess]). run, sync and mcp
// handle signals themselves.
var browseCommands = map[string]bool{
	"ls": true, "cat": true, "tree": true, "stat": true, "glob": true, "grep": true, "diff": true, "mounts": true,
}

// stuckGrace is how long a browsing command has to return after a signal.
const stuckGrace = time.Second

// exitIfStuck ends the process with exit(130) when ctx is cancelled (a
// signal) and the command has not returned (done) within stuckGrace.
func exitIfStuck(ctx context.Context, done <-chan struct{}, stderr io.Writer, exit func(int)) {
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	select {
	case <-done:
	case <-time.After(stuckGrace):
		fmt.Fprintln(stderr, "capfs: interrupted")
		exit(130)
	}
}
