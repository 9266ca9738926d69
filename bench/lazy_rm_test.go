//go:build linux

package bench

import (
	"os"
	"strings"
	"testing"
)

// TestLazyRmTable prints LazyRmTable (`rm -rf` of a 7,501-entry
// node_modules: plain, in a lazy capfs run, in a checkout) when
// CAPFS_BENCH_FUSE=1; CAPFS_BENCH_CAPFS names another capfs build to time,
// CAPFS_BENCH_CAPFS_BEFORE an earlier one to time beside it:
//
//	CAPFS_BENCH_FUSE=1 go test -run TestLazyRmTable -v -timeout 30m ./bench
func TestLazyRmTable(t *testing.T) {
	if os.Getenv("CAPFS_BENCH_FUSE") != "1" {
		t.Skip("set CAPFS_BENCH_FUSE=1 to measure (it runs capfs on a 7,501-entry tree a dozen times)")
	}
	fx, err := NewLazyRmFixture()
	if err != nil {
		t.Skipf("cannot build the lazy-rm fixture: %v", err)
	}
	defer fx.Close()
	var out strings.Builder
	if err := LazyRmTable(&out, os.Stderr, fx, 5); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
}
