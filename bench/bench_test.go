package bench

import (
	"strings"
	"testing"
)

// benchName turns a workload name into a benchmark name without spaces.
func benchName(s string) string {
	r := strings.NewReplacer(" ", "_", ",", "", "×", "x", "+", "_")
	return r.Replace(s)
}

// BenchmarkWorkloads runs every workload on every implementation:
// go test -bench . ./bench (add -benchtime 300ms to shorten).
func BenchmarkWorkloads(b *testing.B) {
	for _, w := range Workloads() {
		b.Run(benchName(w.Name), func(b *testing.B) {
			for _, im := range Impls() {
				b.Run(strings.ReplaceAll(im.Name, " ", "_"), func(b *testing.B) {
					b.ReportAllocs()
					w.Run(b, im.New)
				})
			}
		})
	}
}
