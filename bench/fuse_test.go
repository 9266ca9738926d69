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
