package search_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/internal/search"
	"github.com/capfs/capfs/policy"
)

// BenchmarkGoSrc searches $(go env GOROOT)/src through a physical backend and
// a Dir with the default policy (CAPFS_BENCH_GOSRC=1 go test -bench GoSrc).
func BenchmarkGoSrc(b *testing.B) {
	if os.Getenv("CAPFS_BENCH_GOSRC") == "" {
		b.Skip("set CAPFS_BENCH_GOSRC=1")
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatal(err)
	}
	pb, err := physical.New(filepath.Join(strings.TrimSpace(string(out)), "src"))
	if err != nil {
		b.Fatal(err)
	}
	defer pb.Close()
	d, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
	for _, mode := range []search.Mode{search.Content, search.FilesWithMatches} {
		b.Run(map[search.Mode]string{search.Content: "content", search.FilesWithMatches: "files"}[mode], func(b *testing.B) {
			cpu0 := cpuTime()
			for range b.N {
				n := 0
				_, err := search.Search(context.Background(), d, ".", search.Options{Pattern: `func New[A-Z][a-zA-Z]*\(`, Mode: mode}, func(f *search.File) error {
					n++
					return nil
				})
				if err != nil || n == 0 {
					b.Fatal(n, err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

// cpuTime is the process's user and system CPU time so far: on a shared
// machine it moves less with the load than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
