//go:build linux

package run

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/policy"
)

// TestLazyConstantStart: starting a lazy work tree makes the same number of
// Dir calls on a tree of 20 files and of 5,000 (nothing is walked or copied);
// reads go through the source Dir, writes land in the upper only, and Changes
// lists them.
func TestLazyConstantStart(t *testing.T) {
	if err := LazyAvailable(); err != nil {
		t.Skipf("FUSE is not usable here (needs /dev/fuse and root or fusermount3; make sysdeps installs fuse3): %v", err)
	}
	t.Setenv("CAPFS_TMPDIR", t.TempDir())
	t.Setenv(syncback.EnvStateDir, t.TempDir())
	ctx := context.Background()
	starts := map[int]uint64{}
	for _, n := range []int{20, 5000} {
		mem := memory.New()
		seed, _ := dir.New(mem)
		for i := range 50 {
			if err := seed.MkdirAll(ctx, fmt.Sprintf("d%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		for i := range n {
			if err := seed.WriteFile(ctx, fmt.Sprintf("d%d/f%d", i%50, i), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ring := audit.NewRing(1 << 16)
		src, _ := dir.New(mem, dir.WithPolicy(policy.Defaults()), dir.WithAudit(ring))
		lw, err := StartLazy(ctx, src, LazyOptions{View: policy.Defaults()})
		if err != nil {
			t.Fatal(err)
		}
		starts[n] = ring.Total()
		if b, err := os.ReadFile(filepath.Join(lw.Mountpoint, "d1/f1")); err != nil || string(b) != "x" {
			t.Errorf("read through the lazy tree: %q, %v", b, err)
		}
		if err := os.WriteFile(filepath.Join(lw.Mountpoint, "d1/f1"), []byte("changed"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(lw.Mountpoint, ".bashrc"), []byte("evil"), 0o644); err == nil {
			t.Error("the lazy tree let the sandbox write .bashrc")
		}
		if err := lw.Stop(); err != nil {
			t.Fatal(err)
		}
		if b, _ := src.ReadFile(ctx, "d1/f1"); string(b) != "x" {
			t.Errorf("the source changed: %q", b)
		}
		cs, err := lw.Changes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].Path != "d1/f1" || cs[0].Kind != "modified" {
			t.Errorf("changes %+v; want d1/f1 modified", cs)
		}
		if err := lw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if starts[20] != starts[5000] || starts[20] > 4 {
		t.Errorf("Dir calls to start: %d for 20 files, %d for 5,000; want the same few", starts[20], starts[5000])
	}
}

// TestNarrowProcs: a lazy mount's life runs capfs on a quarter of the CPUs
// (at least one), gives them back after, and leaves a GOMAXPROCS the
// environment set alone.
func TestNarrowProcs(t *testing.T) {
	for ncpu, want := range map[int]int{1: 1, 2: 1, 4: 1, 7: 1, 8: 2, 64: 16} {
		if got := LazyProcs(ncpu); got != want {
			t.Errorf("LazyProcs(%d) = %d, want %d", ncpu, got, want)
		}
	}
	prev := runtime.GOMAXPROCS(0)
	t.Setenv("GOMAXPROCS", "")
	os.Unsetenv("GOMAXPROCS")
	restore := narrowProcs()
	if got, want := runtime.GOMAXPROCS(0), min(prev, LazyProcs(runtime.NumCPU())); got != want {
		t.Errorf("GOMAXPROCS during the mount: %d, want %d", got, want)
	}
	restore()
	restore() // a second call changes nothing
	if got := runtime.GOMAXPROCS(0); got != prev {
		t.Errorf("GOMAXPROCS after: %d, want %d back", got, prev)
	}
	t.Setenv("GOMAXPROCS", strconv.Itoa(prev))
	restore = narrowProcs()
	if got := runtime.GOMAXPROCS(0); got != prev {
		t.Errorf("GOMAXPROCS set in the environment: changed to %d", got)
	}
	restore()
}
