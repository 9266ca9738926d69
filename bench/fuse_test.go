//go:build linux

package bench

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"
)

// TestFUSETable prints the FUSE comparison (FUSETable) when CAPFS_BENCH_FUSE=1:
//
//	CAPFS_BENCH_FUSE=1 go test -run TestFUSETable -v ./bench
//
// Without it, it runs one short round to check that every workload works
// through the mount.
func TestFUSETable(t *testing.T) {
	count, benchtime := 1, time.Millisecond
	if os.Getenv("CAPFS_BENCH_FUSE") == "1" {
		count, benchtime = 5, 200*time.Millisecond
	} else if testing.Short() {
		t.Skip("-short")
	}
	var out strings.Builder
	err := FUSETable(&out, os.Stderr, count, benchtime, func(s string) error { return flag.Set("test.benchtime", s) })
	if err != nil && strings.Contains(err.Error(), "fuse") && !strings.Contains(err.Error(), "failed") {
		t.Skipf("FUSE is not usable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
}

// TestFUSEStartTable prints the lazy start-up comparison (FUSEStartTable) when
// CAPFS_BENCH_FUSE=1:
//
//	CAPFS_BENCH_FUSE=1 go test -run TestFUSEStartTable -v ./bench
func TestFUSEStartTable(t *testing.T) {
	if os.Getenv("CAPFS_BENCH_FUSE") != "1" {
		t.Skip("set CAPFS_BENCH_FUSE=1 to measure (it checks Go's source tree out)")
	}
	var out strings.Builder
	if err := FUSEStartTable(&out, os.Stderr, 5); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
}

// TestFUSEBuildTable prints the C build comparison (FUSEBuildTable) when
// CAPFS_BENCH_FUSE=1:
//
//	CAPFS_BENCH_FUSE=1 go test -run TestFUSEBuildTable -v ./bench
func TestFUSEBuildTable(t *testing.T) {
	if os.Getenv("CAPFS_BENCH_FUSE") != "1" {
		t.Skip("set CAPFS_BENCH_FUSE=1 to measure (it builds a C project nine times)")
	}
	var out strings.Builder
	if err := FUSEBuildTable(&out, os.Stderr, 3); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
}
