package bench

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// TestCLIWorkloads builds the CLI fixture and runs every implementation once:
// each must find what grep -rnIE finds (or git diff --stat reports). It needs
// the Go source fixture (CAPFS_BENCH_GOSRC=1).
func TestCLIWorkloads(t *testing.T) {
	needGoSrc(t)
	for _, tool := range []string{"rg", "git", "grep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (make sysdeps installs it)", tool)
		}
	}
	fx, err := NewCLIFixture()
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	for _, w := range CLIWorkloads() {
		for _, im := range w.Impls {
			if _, err := fx.Run(im); err != nil {
				t.Errorf("%s: %v", w.Name, err)
			}
		}
	}
}

// BenchmarkCLI prints the CLI table (CAPFS_BENCH_GOSRC=1 go test -run '^$'
// -bench CLI ./bench; CAPFS_BENCH_CLI_COUNT sets the runs per command, 7 by
// default).
func BenchmarkCLI(b *testing.B) {
	needGoSrc(b)
	fx, err := NewCLIFixture()
	if err != nil {
		b.Fatal(err)
	}
	defer fx.Close()
	count := 7
	if n, err := strconv.Atoi(os.Getenv("CAPFS_BENCH_CLI_COUNT")); err == nil && n > 0 {
		count = n
	}
	for range b.N {
		if err := CLITable(os.Stdout, fx, count); err != nil {
			b.Fatal(err)
		}
	}
}
