package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/BurntSushi/toml"
	"github.com/spf13/cobra"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// Mount kinds accepted by --mount and the configuration file.
const (
	kindPhysical = "physical"
	kindGit      = "git"
	kindMemory   = "memory"
)

// A mountKind is a mount kind defined in its own file (kind_*.go) and
// registered with registerMountKind from an init function: the built-in kinds
// above are handled inline, every other kind goes through this table, so a new
// backend adds a kind without touching the parsers.
type mountKind struct {
	// Usage is the --mount form after "PATH=", e.g. "sqlite:FILE[,ro]"; it is
	// shown in errors and the --mount help.
	Usage string
	// Option takes one trailing ",OPT" of a --mount argument (after ",ro" and
	// ",rw", which are handled for every kind). It reports false for an option
	// it does not know, which then stays part of the argument (a path may
	// contain commas). Nil: the kind has no options of its own.
	Option func(spec *mountSpec, opt string) (bool, error)
	// Parse checks ARG (the --mount argument after "KIND:" and its options, or
	// a configuration file's source) and fills spec: Source as the user wrote
	// it, Host when ARG names a host file (relative to base, "" meaning the
	// current directory). spec.Rev is the configuration file's rev ("" when
	// none was given).
	Parse func(spec *mountSpec, arg, base string) error
	// Open opens the backend. The session closes it at exit when it has a
	// Close() error method.
	Open func(spec mountSpec) (vfs.Backend, error)
}

// mountKinds holds the registered kinds by name.
var mountKinds = map[string]*mountKind{}

// registerMountKind adds a kind; a second registration of a name panics.
func registerMountKind(name string, k *mountKind) {
	if _, dup := mountKinds[name]; dup || name == kindPhysical || name == kindGit || name == kindMemory {
		panic("capfs: mount kind registered twice: " + name)
	}
	mountKinds[name] = k
}

// kindNames lists every kind for error messages: "physical, git, memory, ...".
func kindNames() string {
	names := []string{kindPhysical, kindGit, kindMemory}
	extra := make([]string, 0, len(mountKinds))
	for n := range mountKinds {
		extra = append(extra, n)
	}
	sort.Strings(extra)
	names = append(names, extra...)
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// defaultWork is the mount `run` checks out read-write when --work is not given
// (and the configuration names none).
const defaultWork = "project"

// globalOptions are the flags every subcommand shares (persistent flags of the root
// command). A subcommand turns them into a session with open.
type globalOptions struct {
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
	// allowSecret and allowFixtures let secret-pattern paths through (cli_policy.go).
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
	kinds := "physical:HOSTDIR, git:REPO[@REV], memory:[,quota=SIZE]"
	extra := make([]string, 0, len(mountKinds))
	for _, k := range mountKinds {
		extra = append(extra, k.Usage)
	}
	sort.Strings(extra)
	for _, u := range extra {
		kinds += ", " + u
	}
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

// mountSpec is one mount as the user asked for it.
type mountSpec struct {
	Path     vfs.Path
	Kind     string
	Source   string // as the user wrote it (echoed back in listings and errors)
	Host     string // absolute host path for physical and git mounts
	Rev      string // git revision
	ReadOnly bool
	Origin   string // "--mount", the config file's name, or "default"
	// Quota is a memory mount's quota in bytes: 0 for the session's default,
	// negative for no limit.
	Quota int64
	// Opts holds a registered kind's own settings, as its Option and Parse
	// functions record them.
	Opts map[string]string
}

// mounted is a mountSpec with its backend.
type mounted struct {
	mountSpec
	// Backend is the raw backend (host-only, without the namespace's read-only
	// wrapper); the namespace reaches it through the mount options.
	Backend vfs.Backend
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

// configFile is the TOML configuration format (see the root command's help).
type configFile struct {
	Policy      string        `toml:"policy"`
	Audit       string        `toml:"audit"`
	Work        string        `toml:"work"`
	MemoryQuota string        `toml:"memory_quota"`
	Mounts      []configMount `toml:"mount"`
}

type configMount struct {
	Path     string `toml:"path"`
	Kind     string `toml:"kind"`
	Source   string `toml:"source"`
	Rev      string `toml:"rev"`
	ReadOnly bool   `toml:"read_only"`
	Quota    string `toml:"quota"`
}

// open builds the session from the flags and the configuration file: the mounts
// (or the defaults when none is given), the policy, the audit sink, and the root
// Dir over the namespace. Errors in the user's input are usage errors (exit 2).
// Every subcommand that works on the namespace (mcp included) calls it.
func (o *globalOptions) open(ctx context.Context, command string) (*session, error) {
	s := &session{Subject: o.subject}
	if s.Subject == "" {
		s.Subject = "capfs/" + command
	}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()

	var specs []mountSpec
	policyFile, auditFile := o.policyFile, o.auditFile
	memQuota := int64(defaultMemoryQuota)
	quotaSet := false
	if o.memoryQuota != "" {
		q, err := parseQuota(o.memoryQuota)
		if err != nil {
			return nil, usageErrorf("--memory-quota %s: %v", o.memoryQuota, err)
		}
		memQuota, quotaSet = q, true
	}
	if o.configFile != "" {
		cfg, err := loadConfig(o.configFile)
		if err != nil {
			return nil, err
		}
		if policyFile == "" {
			policyFile = cfg.policy
		}
		if auditFile == "" {
			auditFile = cfg.audit
		}
		s.Work = cfg.work
		if !quotaSet && cfg.memoryQuota != 0 {
			memQuota = cfg.memoryQuota
		}
		specs = append(specs, cfg.mounts...)
	}
	for _, arg := range o.mounts {
		m, err := parseMountFlag(arg)
		if err != nil {
			return nil, err
		}
		specs = append(specs, m)
	}

	s.NS = vfs.NewNamespace()
	// The default mounts, unless a configuration file describes the namespace
	// or --no-default-mounts: --mount flags add to them (a --mount at a
	// default's path, or above it, replaces that default). The MCP server is
	// the exception: the namespace an agent gets is exactly the mounts named,
	// when any is (a server given one read-only mount must not also serve the
	// current directory read-write).
	if o.configFile == "" && !o.noDefaultMounts && !(command == "mcp" && len(specs) > 0) {
		// capfs mcp keeps its tmp across sessions, in one SQLite file per
		// project (mcpScratchMount), unless --ephemeral-scratch.
		ms, err := defaultMounts(ctx, memQuota, specs, command == "mcp" && !o.ephemeralScratch)
		if err != nil {
			return nil, err
		}
		s.Mounts = ms
		for _, m := range ms {
			s.closers = append(s.closers, closerOf(m.Backend))
		}
	}
	for _, spec := range specs {
		m, err := openMount(spec, memQuota)
		if err != nil {
			return nil, err
		}
		s.closers = append(s.closers, closerOf(m.Backend))
		s.Mounts = append(s.Mounts, m)
	}
	if len(s.Mounts) == 0 {
		return nil, usageErrorf("no mounts: --no-default-mounts leaves only --mount and --config mounts, and none was given")
	}
	for _, m := range s.Mounts {
		if err := s.NS.Mount(m.Path, m.Backend, vfs.MountOptions{ReadOnly: m.ReadOnly}); err != nil {
			if vfs.CodeOf(err) == vfs.CodeExists {
				return nil, usageErrorf("mount %s: two mounts at the same path", displayPath(m.Path.String()))
			}
			return nil, usageErrorf("mount %s: %s", displayPath(m.Path.String()), formatError(err))
		}
	}

	if policyFile != "" {
		eng, err := policy.Load(policyFile)
		if err != nil {
			return nil, usageErrorf("--policy %s: %v", policyFile, err)
		}
		s.Policy = eng
	} else {
		s.Policy = policy.Defaults()
	}

	// What the projects' git configuration runs (core.hooksPath, ...) is
	// write-denied too, and no directory may become a git dir under another name.
	if eng, ok := s.Policy.(*policy.Engine); ok {
		for _, m := range s.Mounts {
			if m.Kind != kindPhysical || m.ReadOnly {
				continue
			}
			rules, err := policy.ForProject(ctx, m.Host, m.Path.String())
			if err == nil {
				eng, err = eng.With(rules...)
			}
			if err != nil {
				return nil, failed(fmt.Errorf("mount %s: git configuration: %v", displayPath(m.Path.String()), err))
			}
		}
		s.Policy = eng
	}
	allow := o.allowSecret
	if o.allowFixtures {
		allow = append(append([]string(nil), allow...), fixtureGlobs...)
	}
	pol, err := allowSecrets(s.Policy, allow)
	if err != nil {
		return nil, err
	}
	s.Policy = pol

	if auditFile == "" {
		p, err := defaultAuditPath()
		if err != nil {
			return nil, failed(fmt.Errorf("audit log: %v", err))
		}
		auditFile = p
	}
	sink, closeSink, err := openAuditSink(auditSettings{dest: auditFile, maxSize: o.auditMaxSize, maxFiles: o.auditMaxFiles,
		maxTotal: o.auditMaxTotal, level: o.auditLevel}, os.Stderr)
	if err != nil {
		return nil, err
	}
	if (command == "run" || command == "sync") && sink != audit.Discard {
		// One tag for the command's events: capfs audit --run answers what it changed.
		s.AuditTag = runTag(command)
		sink = audit.DefaultTag(sink, s.AuditTag)
	}
	s.AuditPath = auditFile
	s.Audit = sink
	s.closers = append(s.closers, closeSink)

	// Batching: requests that ask for it (grep, on the command line and over
	// MCP) log their successful reads as one summary event; refusals and
	// failures stay one event each.
	s.Root, s.Control = s.dirOver(s.NS, audit.Batching(sink))
	ok = true
	return s, nil
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

// parseMountFlag parses PATH=KIND:ARG[,ro].
func parseMountFlag(arg string) (mountSpec, error) {
	bad := func(format string, a ...any) (mountSpec, error) {
		return mountSpec{}, usageErrorf("--mount %s: %s", arg, fmt.Sprintf(format, a...))
	}
	at, rest, ok := strings.Cut(arg, "=")
	if !ok {
		return bad("want PATH=KIND:ARG[,ro]")
	}
	p, err := parseMountPath(at)
	if err != nil {
		return bad("%v", err)
	}
	kind, src, _ := strings.Cut(rest, ":")
	spec := mountSpec{Path: p, Kind: kind, Origin: "--mount"}
	// Trailing options: ",ro" or ",rw", in any number, and for memory
	// ",quota=SIZE".
	for {
		i := strings.LastIndexByte(src, ',')
		if i < 0 {
			break
		}
		opt := src[i+1:]
		switch {
		case opt == "ro":
			spec.ReadOnly = true
		case opt == "rw":
			spec.ReadOnly = false
		case kind == kindMemory && strings.HasPrefix(opt, "quota="):
			q, err := parseQuota(strings.TrimPrefix(opt, "quota="))
			if err != nil {
				return bad("%s: %v", opt, err)
			}
			spec.Quota = q
		default:
			if kind == kindMemory {
				return bad("unknown option %q (want ro, rw or quota=SIZE)", opt)
			}
			if k := mountKinds[kind]; k != nil && k.Option != nil {
				ok, err := k.Option(&spec, opt)
				if err != nil {
					return bad("%s: %v", opt, err)
				}
				if ok {
					break
				}
			}
			goto done
		}
		src = src[:i]
	}
done:
	switch kind {
	case kindPhysical:
		if src == "" {
			return bad("physical needs a host directory: PATH=physical:HOSTDIR")
		}
		spec.Source = src
	case kindGit:
		if src == "" {
			return bad("git needs a repository: PATH=git:REPO[@REV]")
		}
		spec.Source, spec.Rev = splitRepoRev(src)
		spec.ReadOnly = true
	case kindMemory:
		if src != "" {
			return bad("memory takes no argument: PATH=memory:[,quota=SIZE]")
		}
	case "":
		return bad("missing kind: want PATH=KIND:ARG with KIND %s", kindNames())
	default:
		k := mountKinds[kind]
		if k == nil {
			return bad("unknown kind %q (want %s)", kind, kindNames())
		}
		if err := k.Parse(&spec, src, ""); err != nil {
			return bad("%v (want PATH=%s)", err, k.Usage)
		}
	}
	if err := resolveHost(&spec, ""); err != nil {
		return bad("%v", err)
	}
	return spec, nil
}

// parseMountPath validates a namespace path for a mount point.
func parseMountPath(s string) (vfs.Path, error) {
	if s == "" {
		return vfs.Path{}, errors.New("empty mount path")
	}
	p, err := vfs.ParseGuest(s)
	if err != nil {
		return vfs.Path{}, fmt.Errorf("bad mount path %q: %s", s, messageOrCode(err))
	}
	return p.WithoutDirMark(), nil
}

func messageOrCode(err error) string {
	var ve *vfs.Error
	if errors.As(err, &ve) {
		return messageOf(ve) + " (" + string(ve.Code) + ")"
	}
	return err.Error()
}

// splitRepoRev splits REPO[@REV] at the first "@" whose left part is an existing
// directory; with none, the whole argument is the repository and the revision is
// HEAD.
func splitRepoRev(s string) (repo, rev string) {
	for i := 0; i < len(s); i++ {
		if s[i] != '@' || i == 0 {
			continue
		}
		if st, err := os.Stat(s[:i]); err == nil && st.IsDir() && i+1 < len(s) {
			return s[:i], s[i+1:]
		}
	}
	return s, "HEAD"
}

// resolveHost makes a physical or git source absolute (relative to base, or the
// current directory when base is "") and checks it is a directory.
func resolveHost(spec *mountSpec, base string) error {
	if spec.Kind != kindPhysical && spec.Kind != kindGit {
		return nil
	}
	h := spec.Source
	if !filepath.IsAbs(h) && base != "" {
		h = filepath.Join(base, h)
	}
	h, err := filepath.Abs(h)
	if err != nil {
		return err
	}
	st, err := os.Stat(h)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: no such directory", spec.Source)
	case err != nil:
		return fmt.Errorf("%s: %v", spec.Source, cause(err))
	case !st.IsDir():
		return fmt.Errorf("%s: not a directory", spec.Source)
	}
	spec.Host = h
	return nil
}

// configResult is a parsed configuration file.
type configResult struct {
	mounts        []mountSpec
	policy, audit string
	work          string
	memoryQuota   int64 // 0: not set
}

// loadConfig reads the TOML configuration file at name. Relative paths in it are
// relative to the file's directory.
func loadConfig(name string) (configResult, error) {
	bad := func(format string, a ...any) (configResult, error) {
		return configResult{}, usageErrorf("--config %s: %s", name, fmt.Sprintf(format, a...))
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return bad("%v", cause(err))
	}
	var cf configFile
	md, err := toml.Decode(string(data), &cf)
	if err != nil {
		return bad("%v", err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return bad("unknown keys: %s", strings.Join(keys, ", "))
	}
	base, err := filepath.Abs(filepath.Dir(name))
	if err != nil {
		return bad("%v", err)
	}
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	res := configResult{policy: rel(cf.Policy), audit: rel(cf.Audit), work: cf.Work}
	if cf.Work != "" {
		if _, err := vfs.ParseGuest(cf.Work); err != nil {
			return bad("work = %q: %s", cf.Work, messageOrCode(err))
		}
	}
	if cf.MemoryQuota != "" {
		q, err := parseQuota(cf.MemoryQuota)
		if err != nil {
			return bad("memory_quota = %q: %v", cf.MemoryQuota, err)
		}
		res.memoryQuota = q
	}
	for i, cm := range cf.Mounts {
		where := fmt.Sprintf("mount #%d", i+1)
		p, err := parseMountPath(cm.Path)
		if err != nil {
			return bad("%s: %v", where, err)
		}
		spec := mountSpec{Path: p, Kind: cm.Kind, Source: cm.Source, Rev: cm.Rev, ReadOnly: cm.ReadOnly, Origin: name}
		switch cm.Kind {
		case kindPhysical:
			if cm.Source == "" {
				return bad("%s: physical needs source", where)
			}
			if cm.Rev != "" {
				return bad("%s: rev applies to git mounts only", where)
			}
		case kindGit:
			if cm.Source == "" {
				return bad("%s: git needs source", where)
			}
			if spec.Rev == "" {
				spec.Rev = "HEAD"
			}
			spec.ReadOnly = true
		case kindMemory:
			if cm.Source != "" || cm.Rev != "" {
				return bad("%s: memory takes no source or rev", where)
			}
			if cm.Quota != "" {
				q, err := parseQuota(cm.Quota)
				if err != nil {
					return bad("%s: quota = %q: %v", where, cm.Quota, err)
				}
				spec.Quota = q
			}
		case "":
			return bad("%s: missing kind (%s)", where, kindNames())
		default:
			k := mountKinds[cm.Kind]
			if k == nil {
				return bad("%s: unknown kind %q (want %s)", where, cm.Kind, kindNames())
			}
			if cm.Quota != "" {
				return bad("%s: quota applies to memory mounts only", where)
			}
			if err := k.Parse(&spec, cm.Source, base); err != nil {
				return bad("%s: %v", where, err)
			}
		}
		if err := resolveHost(&spec, base); err != nil {
			return bad("%s: %v", where, err)
		}
		res.mounts = append(res.mounts, spec)
	}
	return res, nil
}

// physicalResolver is the path resolver of physical mounts: the environment
// variable CAPFS_PHYSICAL_RESOLVER, "auto" (the default: openat2 where the kernel
// has it), "openat2" (fail without it) or "portable" (the component walk every
// kernel has). The tests play each attack through both resolvers with it.
func physicalResolver() (physical.ResolverMode, error) {
	switch v := os.Getenv("CAPFS_PHYSICAL_RESOLVER"); v {
	case "", "auto":
		return physical.ResolverAuto, nil
	case "openat2":
		return physical.ResolverOpenat2, nil
	case "portable":
		return physical.ResolverPortable, nil
	default:
		return 0, fmt.Errorf("CAPFS_PHYSICAL_RESOLVER=%q: want auto, openat2 or portable", v)
	}
}

// openMount opens the backend a spec names; a memory mount without its own quota
// gets memQuota (negative: no limit).
func openMount(spec mountSpec, memQuota int64) (*mounted, error) {
	m := &mounted{mountSpec: spec}
	where := "--mount " + spec.Path.String() + "=" + spec.Kind + ":" + spec.Source
	if spec.Origin != "--mount" {
		where = spec.Origin + ": mount " + spec.Path.String()
	}
	switch spec.Kind {
	case kindPhysical:
		mode, err := physicalResolver()
		if err != nil {
			return nil, usageErrorf("%s: %v", where, err)
		}
		b, err := physical.New(spec.Host, physical.WithResolver(mode))
		if err != nil {
			return nil, usageErrorf("%s: %s", where, messageOrCode(vfs.Readdress(err, "open", spec.Source, "")))
		}
		m.Backend = b
	case kindGit:
		b, err := gitree.Open(spec.Host, spec.Rev)
		if err != nil {
			return nil, usageErrorf("%s: %s", where, messageOrCode(err))
		}
		m.Backend = b
	case kindMemory:
		if m.Quota == 0 {
			m.Quota = memQuota
		}
		m.Backend = newMemory(m.Quota)
	default:
		k := mountKinds[spec.Kind]
		if k == nil {
			return nil, usageErrorf("%s: unknown kind %q", where, spec.Kind)
		}
		b, err := k.Open(spec)
		if err != nil {
			return nil, usageErrorf("%s: %s", where, messageOrCode(err))
		}
		m.Backend = b
	}
	return m, nil
}

// defaultMounts is the namespace's default part: the current directory as
// project (read-write), the same directory at the git HEAD as ref/head
// (read-only, when inside a repository whose HEAD has it), and a memory tmp.
// A default is left out when one of user (the --mount flags) is mounted at its
// path or above it; a --mount of project on a host directory moves ref/head to
// that directory's HEAD, a --mount of project on anything else drops ref/head.
func defaultMounts(ctx context.Context, memQuota int64, user []mountSpec, persistentTmp bool) ([]*mounted, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return nil, failed(fmt.Errorf("current directory: %v", cause(err)))
	}
	taken := func(p vfs.Path) bool {
		for _, u := range user {
			if p.HasPrefix(u.Path) {
				return true
			}
		}
		return false
	}
	projPath := vfs.MustParse(defaultWork)
	headDir, withHead := cwd, true
	for _, u := range user {
		if u.Path == projPath {
			headDir, withHead = u.Host, u.Kind == kindPhysical && u.Host != ""
		}
	}
	var ms []*mounted
	if !taken(projPath) {
		proj, err := openMount(mountSpec{Path: projPath, Kind: kindPhysical, Source: ".", Host: cwd, Origin: "default"}, memQuota)
		if err != nil {
			return nil, err
		}
		ms = append(ms, proj)
	}
	if withHead && taken(vfs.MustParse("ref/head")) {
		withHead = false
	}
	if top, rel, ok := gitTop(headDir); ok && withHead {
		if g, err := gitree.Open(top, "HEAD"); err == nil {
			var b vfs.Backend = g
			if rel != "." {
				p, perr := vfs.ParseGuest(filepath.ToSlash(rel))
				if perr == nil {
					b, err = g.Sub(ctx, p)
				} else {
					err = perr
				}
			}
			if err == nil {
				head := mountSpec{Path: vfs.MustParse("ref/head"), Kind: kindGit, Source: ".", Host: top, Rev: "HEAD", ReadOnly: true, Origin: "default"}
				if rel != "." {
					head.Opts = map[string]string{gitTreeOpt: filepath.ToSlash(rel)} // the directory of the tree it shows
				}
				ms = append(ms, &mounted{mountSpec: head, Backend: closeWith(b, g)})
			} else {
				g.Close()
			}
		}
	}
	if !taken(vfs.MustParse("tmp")) {
		var tmp *mounted
		var err error
		if persistentTmp {
			tmp, err = mcpScratchMount(vfs.MustParse("tmp"), cwd, memQuota, false, os.Stderr)
		} else {
			tmp, err = openMount(mountSpec{Path: vfs.MustParse("tmp"), Kind: kindMemory, Origin: "default"}, memQuota)
		}
		if err != nil {
			return nil, err
		}
		ms = append(ms, tmp)
	}
	return ms, nil
}

// newMemory is a memory backend with quota bytes (negative: no limit). The quota
// bounds every file too: growing one past it fails with quota_exceeded.
func newMemory(quota int64) *memory.FS {
	if quota < 0 {
		return memory.New()
	}
	return memory.New(memory.WithQuota(quota))
}

// parseQuota parses a memory quota: a byte count with an optional binary unit
// (K, KiB, M, MiB, G, GiB, T, TiB; KB, MB, GB and TB mean the same, any case), or
// "0" or "none" for no limit, returned as -1.
func parseQuota(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "none") || t == "0" {
		return -1, nil
	}
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 || i > 15 {
		return 0, errors.New("want a size such as 64MiB, 1GiB or 1048576, or none")
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, errors.New("want a size such as 64MiB, 1GiB or 1048576, or none")
	}
	var shift uint
	switch strings.ToLower(strings.TrimSpace(t[i:])) {
	case "", "b":
	case "k", "kb", "kib":
		shift = 10
	case "m", "mb", "mib":
		shift = 20
	case "g", "gb", "gib":
		shift = 30
	case "t", "tb", "tib":
		shift = 40
	default:
		return 0, fmt.Errorf("unknown unit %q (want K, M, G or T, binary)", t[i:])
	}
	if n > math.MaxInt64>>shift {
		return 0, errors.New("too large")
	}
	if n == 0 {
		return -1, nil
	}
	return n << shift, nil
}

// formatQuota shows a quota the way parseQuota reads it.
func formatQuota(q int64) string {
	switch {
	case q < 0:
		return "none"
	case q >= 1<<30 && q%(1<<30) == 0:
		return strconv.FormatInt(q>>30, 10) + "GiB"
	case q >= 1<<20 && q%(1<<20) == 0:
		return strconv.FormatInt(q>>20, 10) + "MiB"
	case q >= 1<<10 && q%(1<<10) == 0:
		return strconv.FormatInt(q>>10, 10) + "KiB"
	}
	return strconv.FormatInt(q, 10)
}

// closeWith makes a Sub of a gitree FS close the repository it came from.
func closeWith(b vfs.Backend, owner *gitree.FS) vfs.Backend {
	if b == vfs.Backend(owner) {
		return b
	}
	return &ownedBackend{Backend: b, owner: owner}
}

type ownedBackend struct {
	vfs.Backend
	owner *gitree.FS
}

func (o *ownedBackend) Close() error { return o.owner.Close() }

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
// XDG_STATE_HOME, capfs-<uid>/audit.jsonl under the temporary directory. The
// directory is created 0700 and must be a directory owned by this user.
func defaultAuditPath() (string, error) {
	var d string
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		d = filepath.Join(x, "capfs")
	} else {
		d = filepath.Join(os.TempDir(), fmt.Sprintf("capfs-%d", os.Getuid()))
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	if err := checkPrivateDir(d); err != nil {
		return "", err
	}
	return filepath.Join(d, "audit.jsonl"), nil
}

// checkPrivateDir refuses a directory that is a symlink, is not owned by this user or
// is writable by others (a shared temporary directory could hold one planted by
// another user).
func checkPrivateDir(d string) error {
	st, err := os.Lstat(d)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", d)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() {
		return fmt.Errorf("%s is owned by another user", d)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by other users", d)
	}
	return nil
}

// cause is the error a *fs.PathError (or similar) wraps, without the host path the
// wrapper adds, or err itself when it wraps nothing.
func cause(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}
