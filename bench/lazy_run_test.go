//go:build linux

package bench

import (
	"os"
	"strings"
	"testing"
)

// TestLazyRunTable prints the end-to-end lazy-run comparisons
// (LazyRunStartTable: `capfs run --lazy -- true` on Go's source tree against
// an empty directory; LazyRunBuildTable: a C build through capfs run in
// checkout and lazy mode against plain make) when CAPFS_BENCH_FUSE=1:
//
//	CAPFS_BENCH_FUSE=1 go test -run TestLazyRunTable -v -timeout 30m ./bench
func TestLazyRunTable(t *testing.T) {
	if os.Getenv("CAPFS_BENCH_FUSE") != "1" {
		t.Skip("set CAPFS_BENCH_FUSE=1 to measure (it runs capfs on Go's source tree and builds a C project a dozen times)")
	}
	fx, err := NewLazyRunFixture()
	if err != nil {
		t.Skipf("cannot build the lazy-run fixture: %v", err)
	}
	defer fx.Close()
	var out strings.Builder
	if err := LazyRunStartTable(&out, os.Stderr, fx, 9); err != nil {
		t.Fatal(err)
	}
	out.WriteString("\n")
	if err := LazyRunBuildTable(&out, os.Stderr, fx, 5); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
}
