//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/internal/buildcache"
	"github.com/capfs/capfs/vfs"
)

func newCacheCmd(o *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache ls|clean",
		Short: "List or clean the per-project build caches capfs run mounts",
		Long: `capfs run mounts a build cache of the project's own into the sandbox,
read-write, at ` + buildcache.Target + `, so a second build is as fast as a plain one:
Go's build cache (GOCACHE), npm, pip, cargo (CARGO_HOME), ccache and
XDG_CACHE_HOME point into it. Go modules come from the host's module cache,
read-only (the sandbox has no network).

Building offline: a run without --net has no network, and npm is told it is
offline (npm_config_offline=true), so it installs from this cache or fails at
once. Seed the cache with one run that may reach the registry, then build
offline:

  capfs run --net allow=registry.npmjs.org -- npm ci    # fills the npm cache
  capfs run -- npm ci                                   # offline, from the cache

pip and cargo do the same with --net allow=pypi.org,files.pythonhosted.org and
--net allow=index.crates.io,static.crates.io; Go fetches modules on the host
(go mod download) and reads them from its module cache inside.

Each project (the work mount's host directory; for --rev, its repository) has
its own cache directory, so a run never sees what another project's builds
left there, and nothing in it is synced into the project. They live under
$CAPFS_CACHE_DIR, else $XDG_CACHE_HOME/capfs, else ~/.cache/capfs (mode 0700).
Each is bounded by CAPFS_CACHE_MAX (default 4G): after a run (at most once an
hour) the least recently modified files are removed down to three quarters of
it. capfs run --no-cache runs without them.

No host path of the cache shows inside: a bind mount's entry in
/proc/self/mountinfo names its source's path within its file system (here
under your home directory), so capfs run serves the cache, and the Go module
cache and a Go toolchain outside /usr (at /opt/capfs/gomodcache and
/opt/capfs/go inside), through one FUSE mount of its own, whose entries show
only /cache-0, /gomod and /go. Where FUSE is not available (no /dev/fuse, no
fusermount3) they are bound from their host directories, and the run's
summary says that mountinfo shows them; set $CAPFS_CACHE_DIR to a neutral
directory or run with --no-cache if that path must not show.

  capfs cache ls              every project cache: size, last use, project
  capfs cache clean           remove the current project's cache
  capfs cache clean --all     remove them all
  capfs cache clean NAME...   remove these (NAME as ls shows it)`,
	}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the project caches",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cacheLs(o, cmd) },
	}
	var all bool
	var work string
	clean := &cobra.Command{
		Use:   "clean [NAME...]",
		Short: "Remove project caches",
		RunE:  func(cmd *cobra.Command, args []string) error { return cacheClean(o, cmd, args, all, work) },
	}
	clean.Flags().BoolVar(&all, "all", false, "remove every project cache")
	clean.Flags().StringVarP(&work, "work", "w", "", `the work path whose cache to remove (default "project")`)
	cmd.AddCommand(ls, clean)
	return cmd
}

// cacheLs is capfs cache ls: every project cache, its size, last use and
// project.
func cacheLs(o *globalOptions, cmd *cobra.Command) error {
	root, err := buildcache.Root(o.env.env)
	if err != nil {
		return failed(fmt.Errorf("cache directory: %v", err))
	}
	caches, err := buildcache.List(root)
	if err != nil {
		return failed(err)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSIZE\tLAST USED\tPROJECT")
	var total int64
	for _, c := range caches {
		total += c.Size
		used, project := "-", "-"
		if !c.LastUsed.IsZero() {
			used = c.LastUsed.Local().Format(time.DateTime)
		}
		if c.Project != "" {
			project = show(c.Project)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, humanBytes(c.Size), used, project)
	}
	tw.Flush()
	fmt.Fprintf(cmd.ErrOrStderr(), "capfs: cache: %s in all, under %s (bound per project: %s)\n", humanBytes(total), show(root), humanBytes(buildcache.Max(o.env.env)))
	return nil
}

// cacheClean is capfs cache clean: the caches named, every one (all), or the
// one of the work path (work, else the session's, else the default).
func cacheClean(o *globalOptions, cmd *cobra.Command, args []string, all bool, work string) error {
	root, err := buildcache.Root(o.env.env)
	if err != nil {
		return failed(fmt.Errorf("cache directory: %v", err))
	}
	var names []string
	switch {
	case all:
		if names, err = buildcache.Names(root); err != nil {
			return failed(err)
		}
	case len(args) > 0:
		for _, a := range args {
			if !buildcache.IsName(a) {
				return usageErrorf("cache clean %s: not a cache name (see capfs cache ls)", show(a))
			}
			if _, err := os.Stat(filepath.Join(root, a)); err != nil {
				return usageErrorf("cache clean %s: no such cache (see capfs cache ls)", show(a))
			}
			names = append(names, a)
		}
	default:
		if names, err = currentCacheName(o, cmd, work); err != nil {
			return err
		}
	}
	var freed int64
	for _, n := range names {
		f, err := buildcache.Remove(root, n)
		freed += f
		if err != nil {
			return failed(fmt.Errorf("cache clean %s: %v", n, cause(err)))
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "capfs: cache: removed %d cache(s), %s\n", len(names), humanBytes(freed))
	return nil
}

// currentCacheName returns the name of the project cache of the work path
// (work, else the session's, else the default), none when it has no cache.
func currentCacheName(o *globalOptions, cmd *cobra.Command, work string) ([]string, error) {
	var names []string
	err := action(o, func(ctx context.Context, cmd *cobra.Command, s *session, _ []string) error {
		wk := work
		if wk == "" {
			wk = s.Work
		}
		if wk == "" {
			wk = defaultWork
		}
		wp, err := vfs.ParseGuest(wk)
		if err != nil {
			return usageErrorf("--work %s: %s", wk, messageOrCode(err))
		}
		m, rel, ok := s.mountAt(wp.WithoutDirMark())
		if !ok {
			return usageErrorf("--work %s: not inside any mount", wk)
		}
		if k := projectCacheKey(m, rel, ""); k != "" {
			names = append(names, buildcache.Name(k))
		}
		return nil
	})(cmd, nil)
	return names, err
}
