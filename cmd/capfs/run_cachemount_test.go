//go:build linux

package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capfs/capfs/fuseexport"
	"github.com/capfs/capfs/internal/buildcache"
	"github.com/capfs/capfs/materialize/sandbox"
)

// TestToolMount: the caches, module cache and Go root are served through one
// FUSE mount: the options name its subdirectories, a cache is writable
// through it (the write lands in the host directory), the module cache and
// Go root are not; a Go root under /usr stays as it is; Close unmounts.
func TestToolMount(t *testing.T) {
	if err := fuseexport.Available(); err != nil {
		t.Skip(err)
	}
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	cache, mod, goroot := t.TempDir(), t.TempDir(), t.TempDir()
	writeTree(t, mod, map[string]string{"cache/download/x": "mod\n"})
	writeTree(t, goroot, map[string]string{"bin/go": "go\n"})
	opts := sandbox.BubblewrapOptions{GoRoot: goroot, GoModCache: mod, Caches: []sandbox.CacheDir{{Source: cache, Target: buildcache.Target}}}
	tm, err := mountToolDirs(&opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	for _, p := range []string{opts.GoRoot, opts.GoModCache, opts.Caches[0].Source} {
		if filepath.Dir(p) != tm.mp {
			t.Fatalf("options not pointed at the mount %s: %+v", tm.mp, opts)
		}
	}
	if b, err := os.ReadFile(filepath.Join(opts.GoModCache, "cache/download/x")); err != nil || string(b) != "mod\n" {
		t.Errorf("module cache through the mount: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(opts.Caches[0].Source, "built"), []byte("obj"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(cache, "built")); err != nil || string(b) != "obj" {
		t.Errorf("a write to the cache did not reach its host directory: %q, %v", b, err)
	}
	for _, d := range []string{opts.GoModCache, opts.GoRoot} {
		if err := os.WriteFile(filepath.Join(d, "poison"), nil, 0o644); err == nil {
			t.Errorf("%s is writable through the mount", d)
		}
	}
	if err := tm.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(tm.mp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mount point is left: %v", err)
	}
	usr := sandbox.BubblewrapOptions{GoRoot: "/usr/local/go"}
	if tm, err := mountToolDirs(&usr); tm != nil || err != nil || usr.GoRoot != "/usr/local/go" {
		t.Errorf("a Go root under /usr alone: mount %v, err %v, GoRoot %q", tm, err, usr.GoRoot)
	}
}

// TestToolMountNoFUSE: without FUSE the directories stay bound as they are,
// and the run's summary will say that their host paths show.
func TestToolMountNoFUSE(t *testing.T) {
	old := toolFUSE
	toolFUSE = func() error { return errors.New("fuseexport: /dev/fuse: no such file or directory") }
	defer func() { toolFUSE = old }()
	caches := []sandbox.CacheDir{{Source: "/home/alice/.cache/capfs/x/data", Target: buildcache.Target}}
	opts := sandbox.BubblewrapOptions{GoModCache: "/home/alice/go/pkg/mod", Caches: slices.Clone(caches)}
	r := &runner{}
	r.useToolMount(&opts)
	if opts.GoModCache != "/home/alice/go/pkg/mod" || opts.Caches[0].Source != caches[0].Source || len(r.subs) != 0 {
		t.Errorf("options changed without FUSE: %+v", opts)
	}
	if len(r.shownNotes) != 1 || !strings.HasPrefix(r.shownNotes[0], "the build cache and Go's module cache as their host directories") || !strings.Contains(r.shownNotes[0], "/dev/fuse") {
		t.Errorf("summary notes %q", r.shownNotes)
	}
}
