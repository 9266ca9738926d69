//go:build linux

package bench

import (
	"os"
	"strings"
	"testing"
)

// TestRunTable runs capfs run's workloads once each, checking that both sides
// of every pair succeed (the figures come from benchtable -only run). It takes
// a minute (a copy of the Go source tree, cobra's tests): set CAPFS_BENCH_RUN=1.
func TestRunTable(t *testing.T) {
	if os.Getenv("CAPFS_BENCH_RUN") == "" {
		t.Skip("set CAPFS_BENCH_RUN=1 to run capfs run's workloads (a minute)")
	}
	var out, progress strings.Builder
	if err := RunTable(&out, &progress, 1, ""); err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if n := strings.Count(out.String(), "\n| "); n != len(RunWorkloads())+1 {
		t.Errorf("table has %d rows:\n%s", n, out.String())
	}
	t.Log("\n" + out.String())
}
