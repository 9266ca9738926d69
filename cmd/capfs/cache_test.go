//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/internal/buildcache"
	"github.com/capfs/capfs/vfs"
)

// TestRunCachesFromSessionEnviron: a run's build cache, its trim and its git
// scan cache are under the cache directory of the session's environment, not
// the process's (before issue 28's move, run read the process's environment,
// so a command run in-process with its own CAPFS_CACHE_DIR used another).
func TestRunCachesFromSessionEnviron(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	vars := map[string]string{"CAPFS_CACHE_DIR": dir, "CAPFS_CACHE_MAX": "1K"}
	s := &session{env: environ{dir: dir, getenv: func(k string) string { return vars[k] }}}
	r := &runner{s: s, cacheKey: buildcache.Key("physical:/src/p")}
	caches, err := r.cacheMounts()
	if err != nil || len(caches) != 1 || !strings.HasPrefix(caches[0].Source, dir+string(filepath.Separator)) {
		t.Fatalf("cacheMounts = %+v, %v; want a cache under %s", caches, err, dir)
	}
	big := filepath.Join(caches[0].Source, "big")
	if err := os.WriteFile(big, make([]byte, 2048), 0o600); err != nil {
		t.Fatal(err)
	}
	r.trimCache() // CAPFS_CACHE_MAX=1K, as the session has it
	if _, err := os.Stat(big); err == nil {
		t.Error("the trim did not use the session's CAPFS_CACHE_MAX")
	}
	if g := r.gitScanCache(); g != filepath.Join(dir, "gitscan") {
		t.Errorf("gitScanCache = %q, want it under %s", g, dir)
	}
}

// TestScratchHasNoProjectCache: a scratch mount has no project cache (moved
// from TestMountTraitsDecide: projectCacheKey is Linux-only).
func TestScratchHasNoProjectCache(t *testing.T) {
	spec, err := parseMountFlag("s=fakescratch:", "")
	if err != nil {
		t.Fatal(err)
	}
	m := &mounted{mountSpec: spec, Backend: memory.New()}
	if k := projectCacheKey(m, vfs.Path{}, ""); k != "" {
		t.Errorf("a scratch mount has the project cache %q", k)
	}
}
