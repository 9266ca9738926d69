//go:build linux

package bench

import (
	"os"
	"strings"
	"testing"
)

// TestLazyGitTable prints LazyGitTable (git reads plain, in a lazy run and
// in a checkout run) when CAPFS_BENCH_FUSE=1:
//
//	CAPFS_BENCH_FUSE=1 go test -run TestLazyGitTable -v -timeout 30m ./bench
func TestLazyGitTable(t *testing.T) {
	if os.Getenv("CAPFS_BENCH_FUSE") != "1" {
		t.Skip("set CAPFS_BENCH_FUSE=1 to measure (it runs git through capfs run on a generated repository)")
	}
	fx, err := NewLazyGitFixture()
	if err != nil {
		t.Skipf("cannot build the lazy-git fixture: %v", err)
	}
	defer fx.Close()
	var out strings.Builder
	if err := LazyGitTable(&out, os.Stderr, fx, 5, 5); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
}
