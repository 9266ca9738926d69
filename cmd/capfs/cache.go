//go:build linux

package main

import (
	"path/filepath"

	"github.com/capfs/capfs/internal/buildcache"
	"github.com/capfs/capfs/materialize/sandbox"
	"github.com/capfs/capfs/vfs"
)

// Build caches: internal/buildcache keeps them, one per project (a work
// mount's host directory, or the repository of a --rev run), bound
// read-write into its runs at [buildcache.Target] (served through a FUSE
// mount of the run's own where it can, so that its host path does not show
// inside: run_cachemount.go). This file is the CLI's glue: which project a
// work path is, and the session's environment the package reads.

// projectCacheKey names the cache of the work path at rel in mount m ("" when
// it has no host identity: a memory or other mount).
func projectCacheKey(m *mounted, rel vfs.Path, rev string) string {
	var id string
	switch {
	case m.WorkTree():
		id = "physical:" + filepath.Join(m.Host, filepath.FromSlash(rel.String()))
		if rev != "" {
			if top, _, ok := gitTop(id[len("physical:"):]); ok {
				id = "git:" + top
			}
		}
	case m.Revision():
		id = "git:" + m.Host
	default:
		return ""
	}
	return buildcache.Key(id)
}

// cacheMounts returns the binds of the run's project cache (r.cacheKey),
// under the cache directory of the session's environment.
func (r *runner) cacheMounts() ([]sandbox.CacheDir, error) {
	root, err := buildcache.Root(r.s.env.env)
	if err != nil {
		return nil, err
	}
	return buildcache.Mounts(root, r.cacheKey)
}

// trimCache bounds the run's project cache ([buildcache.Trim]) to the
// session environment's $CAPFS_CACHE_MAX.
func (r *runner) trimCache() {
	root, err := buildcache.Root(r.s.env.env)
	if err != nil {
		return
	}
	buildcache.Trim(root, r.cacheKey, buildcache.Max(r.s.env.env))
}
