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

	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/vfs"
)

// Mount kinds accepted by --mount and the configuration file.
const (
	kindPhysical = "physical"
	kindGit      = "git"
	kindMemory   = "memory"
)

// A mountKind is a mount kind defined in its own file (mountkind_*.go) and
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
