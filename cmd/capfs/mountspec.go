package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/capfs/capfs/backends/sqlite"
	"github.com/capfs/capfs/internal/mountkind"
	"github.com/capfs/capfs/vfs"
)

// mountSpec is one mount as the user asked for it: see [mountkind.Spec],
// whose traits (WorkTree, Revision, Ephemeral, Persistent) say what it is.
type mountSpec = mountkind.Spec

// mounted is a mountSpec with its backend.
type mounted struct {
	mountSpec
	// Backend is the raw backend (host-only, without the namespace's read-only
	// wrapper); the namespace reaches it through the mount options.
	Backend vfs.Backend
}

// parseMountFlag parses PATH=KIND:ARG[,ro] ([mountkind.ParseFlag]), a
// relative host path in it taken from the directory dir ("" is the
// process's current directory).
func parseMountFlag(arg, dir string) (mountSpec, error) {
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
	spec, err := mountkind.ParseFlag(p, rest, dir)
	if err != nil {
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

// openMountCtx opens the backend a spec names under ctx, in env; a memory
// mount without its own quota gets env.MemoryQuota (negative: no limit).
func openMountCtx(ctx context.Context, spec mountSpec, env mountkind.Env) (*mounted, error) {
	m := &mounted{mountSpec: spec}
	b, err := mountkind.Open(ctx, &m.mountSpec, env)
	if err != nil {
		where := "--mount " + spec.Path.String() + "=" + spec.Kind + ":" + spec.Source
		if spec.Origin != "--mount" {
			where = spec.Origin + ": mount " + spec.Path.String()
		}
		return nil, usageErrorf("%s: %s", where, messageOrCode(err))
	}
	m.Backend = b
	return m, nil
}

// defaultMounts is the namespace's default part: the current directory as
// project (read-write), the same directory at the git HEAD as ref/head
// (read-only, when inside a repository whose HEAD has it), and a memory tmp.
// A default is left out when one of user (the --mount flags) is mounted at its
// path or above it; a --mount of project on a host work tree moves ref/head to
// that directory's HEAD, a --mount of project on anything else drops ref/head.
func defaultMounts(ctx context.Context, o *globalOptions, memQuota int64, user []mountSpec, persistentTmp bool) ([]*mounted, error) {
	cwd, err := o.env.cwd()
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
			headDir, withHead = u.Host, u.WorkTree()
		}
	}
	var ms []*mounted
	if !taken(projPath) {
		proj, err := openMountCtx(ctx, mountSpec{Path: projPath, Kind: mountkind.Physical.Name, Source: ".", Host: cwd, Origin: "default"}, o.env.kindEnv(memQuota))
		if err != nil {
			return nil, err
		}
		ms = append(ms, proj)
	}
	if withHead && !taken(vfs.MustParse("ref/head")) {
		if head := headMount(ctx, headDir, o.env.kindEnv(memQuota)); head != nil {
			ms = append(ms, head)
		}
	}
	if !taken(vfs.MustParse("tmp")) {
		tmp, err := tmpMount(ctx, o, cwd, memQuota, persistentTmp)
		if err != nil {
			return nil, err
		}
		ms = append(ms, tmp)
	}
	return ms, nil
}

// headMount is the default ref/head: the HEAD of the work tree holding dir,
// showing dir's directory of it, opened in env; nil when there is none.
func headMount(ctx context.Context, dir string, env mountkind.Env) *mounted {
	top, rel, ok := gitTop(dir)
	if !ok {
		return nil
	}
	head := mountSpec{Path: vfs.MustParse("ref/head"), Kind: mountkind.Git.Name, Source: ".", Host: top, Rev: "HEAD", ReadOnly: true, Origin: "default"}
	if rel != "." {
		head.Opts = map[string]string{mountkind.GitTree: filepath.ToSlash(rel)} // the directory of the tree it shows
	}
	env.MemoryQuota = 0
	m, err := openMountCtx(ctx, head, env)
	if err != nil {
		return nil
	}
	return m
}

// tmpMount is the default tmp: a memory mount, or the project's persistent
// scratch when persistent ([mcpScratchMount], warning on o's stderr).
func tmpMount(ctx context.Context, o *globalOptions, project string, memQuota int64, persistent bool) (*mounted, error) {
	env := o.env.kindEnv(memQuota)
	if persistent {
		return mcpScratchMount(vfs.MustParse("tmp"), project, env, false, o.stderr)
	}
	return openMountCtx(ctx, mountSpec{Path: vfs.MustParse("tmp"), Kind: mountkind.Memory.Name, Origin: "default"}, env)
}

// mcpScratchMount is the MCP server's scratch mount at path (the default tmp):
// the persistent scratch file of the project at directory project
// ([mountkind.ScratchFile]), so an agent finds its notes again in its next
// session, unless ephemeral (then a memory mount, as before), both found and
// opened in env. env.MemoryQuota bounds either (<= 0: none). When another
// capfs already holds the project's file (a second agent session on the same
// project), it falls back to a memory mount and says so on warn, rather than
// failing to start.
func mcpScratchMount(path vfs.Path, project string, env mountkind.Env, ephemeral bool, warn io.Writer) (*mounted, error) {
	quota := env.MemoryQuota
	memory := func() (*mounted, error) {
		return openMountCtx(context.Background(), mountSpec{Path: path, Kind: mountkind.Memory.Name, Origin: "default"}, env)
	}
	if ephemeral {
		return memory()
	}
	file, err := mountkind.ScratchFile(project, env)
	if err != nil {
		return nil, failed(fmt.Errorf("persistent scratch: %v", cause(err)))
	}
	// The scratch is the sqlite kind's mount of the file, opened as
	// -m tmp=sqlite:FILE,quota=SIZE would be.
	m := &mounted{mountSpec: mountSpec{Path: path, Kind: mountkind.SQLite.Name, Source: file, Host: file, Origin: "default", Quota: quota}}
	if quota > 0 {
		m.Opts = map[string]string{"quota": strconv.FormatInt(quota, 10)}
	}
	b, err := mountkind.Open(context.Background(), &m.mountSpec, env)
	if errors.Is(err, sqlite.ErrLocked) {
		fmt.Fprintf(warn, "capfs: the persistent scratch %s is in use by another capfs; %s is a memory scratch this session\n", file, displayPath(path.String()))
		return memory()
	}
	if err != nil {
		return nil, failed(fmt.Errorf("persistent scratch: %v", err))
	}
	m.Backend = b
	return m, nil
}

// parseQuota parses a size ([mountkind.ParseQuota]): "none" or "0" is -1.
func parseQuota(s string) (int64, error) { return mountkind.ParseQuota(s) }

// formatQuota shows a size the way parseQuota reads it.
func formatQuota(q int64) string { return mountkind.FormatQuota(q) }
