//go:build linux

package bench

import (
	"os"
	"strings"
	"testing"
)

// TestFUSEToolsTable prints FUSEToolsTable (tar, find, du, git status,
// rsync, rm -rf and a stat and read loop on a 20,000-file tree: the host
// directory, capfs mount of it, the lazy layer) when CAPFS_BENCH_FUSE=1:
//
//	CAPFS_BENCH_FUSE=1 go test -run TestFUSEToolsTable -v -timeout 20m ./bench
//
// It fails when a tool does not do its job on a target.
func TestFUSEToolsTable(t *testing.T) {
	if os.Getenv("CAPFS_BENCH_FUSE") != "1" {
		t.Skip("set CAPFS_BENCH_FUSE=1 to measure (it runs tar, find, du, git, rsync and rm on a 20,000-file tree, 3 rounds on 3 targets)")
	}
	fx, err := NewToolsFixture()
	if err != nil {
		t.Skipf("cannot build the tools fixture: %v", err)
	}
	defer fx.Close()
	var out strings.Builder
	if err := FUSEToolsTable(&out, os.Stderr, fx, 3); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
}
