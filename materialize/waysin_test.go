//go:build linux

package materialize

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestGitScanPackIndexBounded: the scan of a project's .git (capfs run's --git
// auto, the lazy view) reads its pack indexes, files from outside (issue 26,
// class 3), within a bound: a 1 KiB index whose fanout table claims fifty
// million objects is refused for its size (go-git's decoder compares them)
// before anything is allocated for them. Passes on HEAD; a guard.
func TestGitScanPackIndexBounded(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "initial"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	// A version 2 index: magic, version, a fanout table whose every entry
	// says 50,000,000 objects, then a few bytes.
	idx := []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}
	for range 256 {
		idx = binary.BigEndian.AppendUint32(idx, 50_000_000)
	}
	idx = append(idx, make([]byte, 64)...)
	const name = "pack-0123456789abcdef0123456789abcdef01234567"
	pack := filepath.Join(root, ".git", "objects", "pack")
	if err := os.MkdirAll(pack, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pack, name+".idx"), idx, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pack, name+".pack"), []byte("PACK\x00\x00\x00\x02\x00\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h, err := ScanGitHistory(context.Background(), filepath.Join(root, ".git"), DefaultGitScanBudget, "")
	runtime.ReadMemStats(&after)
	t.Logf("scan: %+v, %v", h, err)
	if got := after.TotalAlloc - before.TotalAlloc; got > 256<<20 {
		t.Errorf("scanning a .git with a 1 KiB hostile pack index allocated %d MiB", got>>20)
	}
}
