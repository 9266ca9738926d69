package bench

import (
	"os"
	"testing"
)

// BenchmarkCASReSnapshot runs issue 15's re-snapshot workloads (the capfs side
// and git status) on the Go source tree, for profiling:
//
//	go test ./bench -run '^$' -bench CASReSnapshot -cpuprofile cpu.out
//
// It builds the fixture (a copy of Go's src, a warm store) first, which takes a
// minute; set CAPFS_BENCH_CAS=1 to run it.
func BenchmarkCASReSnapshot(b *testing.B) {
	if os.Getenv("CAPFS_BENCH_CAS") == "" {
		b.Skip("set CAPFS_BENCH_CAS=1 to build the Go source fixture and run the CAS re-snapshot benchmark")
	}
	fx, err := NewCASFixture()
	if err != nil {
		b.Fatal(err)
	}
	defer fx.Close()
	for _, w := range CASWorkloads() {
		if w.Name != "re-snapshot of the unchanged tree" {
			continue
		}
		for _, impl := range w.Impls {
			b.Run(impl.Name, func(b *testing.B) { impl.Run(b, fx) })
		}
	}
}
