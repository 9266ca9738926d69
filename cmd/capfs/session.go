package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/internal/hostfile"
	"github.com/capfs/capfs/internal/mountkind"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// defaultWork is the mount `run` checks out read-write when --work is not given
// (and the configuration names none).
const defaultWork = "project"

// globalOptions are the flags every subcommand shares (persistent flags of the root
// command). A subcommand turns them into a session with open.
type globalOptions struct {
	// env is the surroundings the command line runs in: its working
	// directory and environment variables.
	env environ
	// stderr is the command line's standard error: warnings, and the audit
	// log of --audit stderr.
	stderr     io.Writer
	mounts     []string
	configFile string
	policyFile string
	auditFile  string
	subject    string
	// memoryQuota is --memory-quota as given ("" = the configuration's, else
	// defaultMemoryQuota).
	memoryQuota string
	// ephemeralScratch is capfs mcp's --ephemeral-scratch: its default tmp is a
	// memory mount instead of the project's persistent SQLite scratch.
	ephemeralScratch bool
	// noDefaultMounts leaves out the default mounts (--no-default-mounts).
	noDefaultMounts bool
	// The audit log's rotation and level (see openAuditSink).
	auditMaxSize  string
	auditMaxFiles int
	auditMaxTotal string
	auditLevel    string
	// allowSecret and allowFixtures let secret-pattern paths through (policy.go).
	allowSecret   []string
	allowFixtures bool
}

// defaultMemoryQuota is the quota of a memory mount given none (--memory-quota,
// the configuration's memory_quota, or the mount's own quota=): a guest filling
// a scratch mount cannot take the host's memory.
const defaultMemoryQuota = 256 << 20

// addFlags registers the shared flags on the root command.
func (o *globalOptions) addFlags(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	kinds := mountkind.UsageList()
	f.StringArrayVarP(&o.mounts, "mount", "m", nil,
		"mount a backend: PATH=KIND:ARG[,ro] with KIND:ARG one of "+kinds+" (repeatable)")
	f.BoolVar(&o.noDefaultMounts, "no-default-mounts", false, "leave out the default mounts (project, ref/head, tmp), which --mount flags otherwise add to (except for mcp)")
	f.StringVar(&o.configFile, "config", "", "read mounts, policy and audit settings from this TOML file")
	f.StringVar(&o.policyFile, "policy", "", "policy file (.toml or .json; default: built-in secret and persistence deny lists)")
	f.StringVar(&o.auditFile, "audit", "", "append audit events (JSON Lines) to this file, or to stderr, or off to record nothing (default: $XDG_STATE_HOME/capfs/audit.jsonl, else $TMPDIR/capfs-UID/audit.jsonl)")
	f.StringVar(&o.auditMaxSize, "audit-max-size", "", "rotate the audit log when it would grow past SIZE, e.g. 16MiB; none never rotates (default 16MiB)")
	f.IntVar(&o.auditMaxFiles, "audit-max-files", defaultAuditMaxFiles, "rotated (zstd-compressed) audit logs to keep beside the current one, oldest removed first")
	f.StringVar(&o.auditMaxTotal, "audit-max-total", "", "bytes on disk the rotated audit logs may take together, oldest removed first; none for no bound (default 64MiB)")
	f.StringVar(&o.auditLevel, "audit-level", "", "which calls to record: all, errors (denied and failed) or denied (default all)")
	f.StringArrayVar(&o.allowSecret, "allow-secret", nil, "let capfs reach paths matching this namespace glob that a secret pattern refuses, e.g. 'project/testdata/*.pem' (repeatable; host rules still apply)")
	f.BoolVar(&o.allowFixtures, "allow-test-fixtures", false, "--allow-secret for test data directories: **/testdata/**, **/fixtures/**, **/__fixtures__/**, **/test/data/**, **/tests/data/**")
	f.StringVar(&o.subject, "subject", "", "subject recorded in audit events (default: capfs/<command>)")
	f.StringVar(&o.memoryQuota, "memory-quota", "", "quota of each memory mount without its own quota=, e.g. 64MiB; 0 or none for no limit (default 256MiB)")
}

// session is the composed namespace of one command: the mounts, the root Dir the
// command works through (with the policy and the audit sink), and what to close.
// Everything a guest-facing subcommand does goes through Root.
type session struct {
	NS        *vfs.Namespace
	Root      *dir.Dir
	Control   *dir.Control
	Mounts    []*mounted
	Policy    policy.Policy
	Audit     audit.Sink // the sink Root records to (host use: also given to the sandbox runner)
	AuditPath string
	AuditTag  string // the tag of this command's events when it set one (run, sync: see runTag)
	Subject   string
	Work      string // the configured default work mount for run ("" = defaultWork)
	env       environ
	closers   []func() error
}

// Close releases backends and flushes the audit sink.
func (s *session) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	s.closers = nil
	return errors.Join(errs...)
}

// mountAt returns the mount whose path is the longest prefix of p, and p relative
// to it.
func (s *session) mountAt(p vfs.Path) (*mounted, vfs.Path, bool) {
	var best *mounted
	var rest vfs.Path
	for _, m := range s.Mounts {
		if r, ok := p.TrimPrefix(m.Path); ok && (best == nil || m.Path.Depth() > best.Path.Depth()) {
			best, rest = m, r
		}
	}
	return best, rest, best != nil
}

// open builds the session from the flags and the configuration file: the mounts
// (or the defaults when none is given), the policy, the audit sink, and the root
// Dir over the namespace. Errors in the user's input are usage errors (exit 2).
// Every subcommand that works on the namespace (mcp included) calls it.
func (o *globalOptions) open(ctx context.Context, command string) (*session, error) {
	s := &session{Subject: o.subject, env: o.env}
	if s.Subject == "" {
		s.Subject = "capfs/" + command
	}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	in, err := o.inputs()
	if err != nil {
		return nil, err
	}
	s.Work = in.work
	if err := s.mountAll(ctx, o, command, in); err != nil {
		return nil, err
	}
	if err := s.loadPolicy(ctx, o, in.policyFile); err != nil {
		return nil, err
	}
	if err := s.openAudit(o, command, in.auditFile); err != nil {
		return nil, err
	}
	// Batching: requests that ask for it (grep, on the command line and over
	// MCP) log their successful reads as one summary event; refusals and
	// failures stay one event each.
	s.Root, s.Control = s.dirOver(s.NS, audit.Batching(s.Audit))
	ok = true
	return s, nil
}

// sessionInputs is what the flags and the configuration file ask of a
// session: mount specs, the memory quota, the policy and audit files, the
// work mount.
type sessionInputs struct {
	specs                 []mountSpec
	memQuota              int64
	policyFile, auditFile string
	work                  string
}

// inputs reads the session's inputs from the flags and the configuration
// file (flags win). Errors in them are usage errors.
func (o *globalOptions) inputs() (sessionInputs, error) {
	in := sessionInputs{memQuota: defaultMemoryQuota, policyFile: o.policyFile, auditFile: o.auditFile}
	quotaSet := false
	if o.memoryQuota != "" {
		q, err := parseQuota(o.memoryQuota)
		if err != nil {
			return in, usageErrorf("--memory-quota %s: %v", o.memoryQuota, err)
		}
		in.memQuota, quotaSet = q, true
	}
	if o.configFile != "" {
		cfg, err := loadConfig(o.env, o.configFile)
		if err != nil {
			return in, err
		}
		if in.policyFile == "" {
			in.policyFile = cfg.policy
		}
		if in.auditFile == "" {
			in.auditFile = cfg.audit
		}
		in.work = cfg.work
		if !quotaSet && cfg.memoryQuota != 0 {
			in.memQuota = cfg.memoryQuota
		}
		in.specs = append(in.specs, cfg.mounts...)
	}
	for _, arg := range o.mounts {
		m, err := parseMountFlag(arg, o.env.dir)
		if err != nil {
			return in, err
		}
		in.specs = append(in.specs, m)
	}
	return in, nil
}

// mountAll opens the session's mounts (the defaults, then in.specs) and
// mounts them in a new namespace.
func (s *session) mountAll(ctx context.Context, o *globalOptions, command string, in sessionInputs) error {
	s.NS = vfs.NewNamespace()
	// The default mounts, unless a configuration file describes the namespace
	// or --no-default-mounts: --mount flags add to them (a --mount at a
	// default's path, or above it, replaces that default). The MCP server is
	// the exception: the namespace an agent gets is exactly the mounts named,
	// when any is (a server given one read-only mount must not also serve the
	// current directory read-write).
	if o.configFile == "" && !o.noDefaultMounts && !(command == "mcp" && len(in.specs) > 0) {
		// capfs mcp keeps its tmp across sessions, in one SQLite file per
		// project (mcpScratchMount), unless --ephemeral-scratch.
		ms, err := defaultMounts(ctx, o, in.memQuota, in.specs, command == "mcp" && !o.ephemeralScratch)
		if err != nil {
			return err
		}
		s.Mounts = ms
		for _, m := range ms {
			s.closers = append(s.closers, closerOf(m.Backend))
		}
	}
	for _, spec := range in.specs {
		m, err := openMountCtx(ctx, spec, o.env.kindEnv(in.memQuota))
		if err != nil {
			return err
		}
		s.closers = append(s.closers, closerOf(m.Backend))
		s.Mounts = append(s.Mounts, m)
	}
	if len(s.Mounts) == 0 {
		return usageErrorf("no mounts: --no-default-mounts leaves only --mount and --config mounts, and none was given")
	}
	for _, m := range s.Mounts {
		if err := s.NS.Mount(m.Path, m.Backend, vfs.MountOptions{ReadOnly: m.ReadOnly}); err != nil {
			if vfs.CodeOf(err) == vfs.CodeExists {
				return usageErrorf("mount %s: two mounts at the same path", displayPath(m.Path.String()))
			}
			return usageErrorf("mount %s: %s", displayPath(m.Path.String()), formatError(err))
		}
	}
	return nil
}

// loadPolicy sets the session's policy: policyFile's (else the defaults),
// with what the projects' git configuration runs write-denied, and the
// secrets --allow-secret and --allow-fixtures name allowed.
func (s *session) loadPolicy(ctx context.Context, o *globalOptions, policyFile string) error {
	if policyFile != "" {
		eng, err := policy.Load(o.env.abs(policyFile))
		if err != nil {
			return usageErrorf("--policy %s: %v", policyFile, o.env.named(policyFile, err))
		}
		s.Policy = eng
	} else {
		s.Policy = policy.Defaults()
	}
	if err := s.projectRules(ctx); err != nil {
		return err
	}
	allow := o.allowSecret
	if o.allowFixtures {
		allow = append(append([]string(nil), allow...), fixtureGlobs...)
	}
	pol, err := allowSecrets(s.Policy, allow)
	if err != nil {
		return err
	}
	s.Policy = pol
	return nil
}

// projectRules write-denies what the projects' git configuration runs
// (core.hooksPath, ...), and lets no directory become a git dir under
// another name, for each writable host mount.
func (s *session) projectRules(ctx context.Context) error {
	eng, ok := s.Policy.(*policy.Engine)
	if !ok {
		return nil
	}
	for _, m := range s.Mounts {
		if !m.WorkTree() || m.ReadOnly {
			continue
		}
		rules, err := policy.ForProject(ctx, m.Host, m.Path.String())
		if err == nil {
			eng, err = eng.With(rules...)
		}
		if err != nil {
			return failed(fmt.Errorf("mount %s: git configuration: %v", displayPath(m.Path.String()), err))
		}
	}
	s.Policy = eng
	return nil
}

// openAudit opens the session's audit sink at auditFile (else the default
// log), tagged with the command's run for run and sync.
func (s *session) openAudit(o *globalOptions, command, auditFile string) error {
	name := auditFile
	if auditFile == "" {
		p, err := defaultAuditPath(o.env)
		if err != nil {
			return failed(fmt.Errorf("audit log: %v", err))
		}
		auditFile = p
	} else if !auditKeywords[auditFile] {
		auditFile = o.env.abs(auditFile)
	}
	sink, closeSink, err := openAuditSink(auditSettings{dest: auditFile, name: name, maxSize: o.auditMaxSize, maxFiles: o.auditMaxFiles,
		maxTotal: o.auditMaxTotal, level: o.auditLevel}, o.stderr)
	if err != nil {
		return err
	}
	if (command == "run" || command == "sync") && sink != audit.Discard {
		// One tag for the command's events: capfs audit --run answers what it changed.
		s.AuditTag = runTag(command)
		sink = audit.DefaultTag(sink, s.AuditTag)
	}
	s.AuditPath = auditFile
	s.Audit = sink
	s.closers = append(s.closers, closeSink)
	return nil
}

// dirOver returns a Dir over b made as the session's Root is: the session's
// policy, subject and git guard (over b), recording to sink.
func (s *session) dirOver(b vfs.Backend, sink audit.Sink) (*dir.Dir, *dir.Control) {
	return dir.New(b, dir.WithPolicy(s.Policy), dir.WithAudit(sink), dir.WithSubject(s.Subject),
		dir.WithHooks(dir.GitGuard(b, gitGuardOptions(s.Policy)...)))
}

// gitGuardOptions returns the git guard's options for policy p, the one
// choice every Dir of a session makes: git dirs named .git are left to the
// policy when its rule engine allows git writes (policy.Config.AllowGitWrites).
func gitGuardOptions(p policy.Policy) []dir.GitGuardOption {
	if sa, ok := p.(*secretAllow); ok {
		p = sa.inner
	}
	if eng, ok := p.(*policy.Engine); ok && eng.Config().AllowGitWrites {
		return []dir.GitGuardOption{dir.GitGuardAllowDotGit()}
	}
	return nil
}

func closerOf(b vfs.Backend) func() error {
	if c, ok := b.(interface{ Close() error }); ok {
		return c.Close
	}
	return func() error { return nil }
}

func messageOrCode(err error) string {
	var ve *vfs.Error
	if errors.As(err, &ve) {
		return messageOf(ve) + " (" + string(ve.Code) + ")"
	}
	return err.Error()
}

// gitTop finds the git work tree containing dir: the nearest ancestor (dir
// included) holding a .git entry, and dir relative to it.
func gitTop(dir string) (top, rel string, ok bool) {
	for d := dir; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			r, err := filepath.Rel(d, dir)
			if err != nil {
				return "", "", false
			}
			return d, r, true
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", "", false
		}
		d = parent
	}
}

// defaultAuditPath is $XDG_STATE_HOME/capfs/audit.jsonl, or, without
// XDG_STATE_HOME, capfs-<uid>/audit.jsonl under the temporary directory, as
// env has them. The directory is created 0700 and must be a directory owned
// by this user.
func defaultAuditPath(env environ) (string, error) {
	var d string
	if x := env.env("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		d = filepath.Join(x, "capfs")
	} else {
		d = filepath.Join(env.tempDir(), fmt.Sprintf("capfs-%d", os.Getuid()))
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	if err := checkPrivateDir(d); err != nil {
		return "", err
	}
	return filepath.Join(d, "audit.jsonl"), nil
}

// checkPrivateDir refuses a directory that is a symlink, is not owned by this
// user or is writable by others (hostfile.CheckPrivateDir).
func checkPrivateDir(d string) error { return hostfile.CheckPrivateDir(d) }

// cause is the error a *fs.PathError (or similar) wraps, without the host path the
// wrapper adds, or err itself when it wraps nothing.
func cause(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}
