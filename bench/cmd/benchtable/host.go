//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/bench"
)

// hostCell is the median result of one host-directory workload on one
// implementation, per operation.
type hostCell struct {
	cpu    float64 // CPU time of the benchmark thread (bench.CPUMetric); 0 if unknown
	wall   float64
	allocs int64
}

// time is the figure the main table shows and compares: CPU time where known.
func (c hostCell) time() float64 {
	if c.cpu > 0 {
		return c.cpu
	}
	return c.wall
}

// hostTable measures the host-directory workloads and prints their table (CPU
// time per operation, with ratios), the wall-clock ratios of the same run, the
// allocations and the physical backend's targets.
func hostTable(out, progress io.Writer, count int, run string, benchtime time.Duration) error {
	impls := bench.HostImpls()
	var capfs []bench.HostImpl
	for _, im := range impls {
		if !isPeer(im.Name) {
			capfs = append(capfs, im)
		}
	}
	results := map[string]map[string]hostCell{} // workload, impl
	var order []bench.HostWorkload
	for _, w := range bench.HostWorkloads() {
		if run != "" && !strings.Contains(w.Name, run) {
			continue
		}
		res, err := hostWorkload(progress, w, impls, count, benchtime)
		if err != nil {
			return err
		}
		results[w.Name] = res
		order = append(order, w)
	}
	cpuKnown := anyCPU(results)
	what := "wall-clock time"
	if cpuKnown {
		what = "CPU time of the benchmark thread (user+system)"
	}
	fmt.Fprintf(out, "Host directory: a fresh directory under %s (%s). Cells: median %s per operation over %d rounds.\n\n",
		os.TempDir(), bench.TempFS(), what, count)
	fmt.Fprintf(out, "| workload [capfs] | capfs | os | os.Root | afero BasePathFs | ratio vs os | ratio vs os.Root | ratio vs BasePathFs |\n")
	fmt.Fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|\n")
	eachRow(order, capfs, results, func(w bench.HostWorkload, im bench.HostImpl, c hostCell, res map[string]hostCell) {
		o, r, a := res[bench.HostOS].time(), res[bench.HostOSRoot].time(), res[bench.HostAferoBase].time()
		fmt.Fprintf(out, "| %s [%s] | %s | %s | %s | %s | %s | %s | %s |\n", w.Name, shortName(im.Name),
			dur(c.time()), dur(o), dur(r), dur(a), ratio(o, c.time()), ratio(r, c.time()), ratio(a, c.time()))
	})
	if cpuKnown {
		fmt.Fprintf(out, "\nWall-clock time, same run (median per operation; ratios as above):\n\n")
		fmt.Fprintf(out, "| workload [capfs] | capfs | os | os.Root | afero BasePathFs | ratio vs os | ratio vs os.Root | ratio vs BasePathFs |\n")
		fmt.Fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|\n")
		eachRow(order, capfs, results, func(w bench.HostWorkload, im bench.HostImpl, c hostCell, res map[string]hostCell) {
			o, r, a := res[bench.HostOS].wall, res[bench.HostOSRoot].wall, res[bench.HostAferoBase].wall
			fmt.Fprintf(out, "| %s [%s] | %s | %s | %s | %s | %s | %s | %s |\n", w.Name, shortName(im.Name),
				dur(c.wall), dur(o), dur(r), dur(a), ratio(o, c.wall), ratio(r, c.wall), ratio(a, c.wall))
		})
	}
	allocTable(out, order, impls, results)
	targetList(out, capfs, results, strings.Split(what, " (")[0])
	return nil
}

// anyCPU reports whether a result has a CPU time.
func anyCPU(results map[string]map[string]hostCell) bool {
	for _, res := range results {
		for _, c := range res {
			if c.cpu > 0 {
				return true
			}
		}
	}
	return false
}

// allocTable prints the allocations per operation of every implementation
// on every workload ("–" where it was not measured).
func allocTable(out io.Writer, order []bench.HostWorkload, impls []bench.HostImpl, results map[string]map[string]hostCell) {
	fmt.Fprintf(out, "\nAllocations per operation:\n\n| workload |")
	for _, im := range impls {
		fmt.Fprintf(out, " %s |", im.Name)
	}
	fmt.Fprintf(out, "\n|---|%s\n", strings.Repeat("---:|", len(impls)))
	for _, w := range order {
		fmt.Fprintf(out, "| %s |", w.Name)
		for _, im := range impls {
			if c, ok := results[w.Name][im.Name]; ok {
				fmt.Fprintf(out, " %d |", c.allocs)
			} else {
				fmt.Fprintf(out, " – |")
			}
		}
		fmt.Fprintln(out)
	}
}

// targetList prints the physical backend's targets measured, met or
// missed, for each capfs implementation (what: the figure compared first).
func targetList(out io.Writer, capfs []bench.HostImpl, results map[string]map[string]hostCell, what string) {
	header := false
	for _, g := range bench.HostGoals() {
		res, ok := results[g.Workload]
		if !ok {
			continue
		}
		if !header {
			fmt.Fprintf(out, "\nTargets (ratio = peer time / capfs time; %s first, wall-clock in parentheses):\n\n", what)
			header = true
		}
		fmt.Fprintf(out, "- %s (ratio vs %s ≥ %.2f×): %s\n", g.Text, g.Peer, g.MinRatio, strings.Join(goalVerdicts(g, capfs, res), "; "))
	}
}

// goalVerdicts says, for each capfs implementation measured, whether it met
// goal g: its ratio (CPU first, wall-clock in parentheses) and how far short.
func goalVerdicts(g bench.Goal, capfs []bench.HostImpl, res map[string]hostCell) []string {
	var verdicts []string
	for _, im := range capfs {
		c, ok := res[im.Name]
		if !ok {
			continue
		}
		r := res[g.Peer].time() / c.time()
		v := fmt.Sprintf("%s %.2f× (%.2f×) met", im.Name, r, res[g.Peer].wall/c.wall)
		if r < g.MinRatio {
			v = fmt.Sprintf("%s %.2f× (%.2f×) missed, %.2f× short", im.Name, r, res[g.Peer].wall/c.wall, g.MinRatio/r)
		}
		verdicts = append(verdicts, v)
	}
	return verdicts
}

// hostWorkload measures w on every implementation it applies to, in count
// interleaved rounds over one directory, and returns the medians by implementation.
func hostWorkload(progress io.Writer, w bench.HostWorkload, impls []bench.HostImpl, count int, benchtime time.Duration) (map[string]hostCell, error) {
	root, err := w.Setup()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	cpu, wall := map[string][]float64{}, map[string][]float64{}
	allocs := map[string][]int64{}
	for i := 0; i < count; i++ {
		// Rounds interleave the implementations, so a burst of load from elsewhere
		// on the machine falls on all of them rather than on one.
		for _, im := range impls {
			if im.Layered && !w.Layered {
				continue
			}
			r, err := measure(w.Name, im.Name, func(b *testing.B) { w.Run(b, im, root) }, benchtime)
			if err != nil {
				return nil, err
			}
			c := r.Extra[bench.CPUMetric]
			t := float64(r.T.Nanoseconds()) / float64(r.N)
			fmt.Fprintf(progress, "%s: %s round %d: %s wall, %s CPU\n", w.Name, im.Name, i+1, dur(t), dur(c))
			cpu[im.Name] = append(cpu[im.Name], c)
			wall[im.Name] = append(wall[im.Name], t)
			allocs[im.Name] = append(allocs[im.Name], r.AllocsPerOp())
		}
	}
	res := map[string]hostCell{}
	for name := range wall {
		res[name] = hostCell{cpu: median(cpu[name]), wall: median(wall[name]), allocs: median(allocs[name])}
	}
	return res, nil
}

// eachRow calls row for every capfs implementation measured on every workload, in
// table order.
func eachRow(order []bench.HostWorkload, capfs []bench.HostImpl, results map[string]map[string]hostCell,
	row func(w bench.HostWorkload, im bench.HostImpl, c hostCell, res map[string]hostCell)) {
	for _, w := range order {
		res := results[w.Name]
		for _, im := range capfs {
			if c, ok := res[im.Name]; ok {
				row(w, im, c, res)
			}
		}
	}
}

func isPeer(name string) bool {
	for _, p := range bench.HostPeers() {
		if p.Name == name {
			return true
		}
	}
	return false
}

// shortName is the row label of a capfs implementation.
func shortName(name string) string {
	switch name {
	case bench.PhysicalOpenat2:
		return "openat2"
	case bench.PhysicalPortable:
		return "portable"
	case bench.PhysicalDir:
		return "Dir, openat2"
	case bench.PhysicalDirPolicy:
		return "Dir+policy, openat2"
	case bench.PhysicalFused:
		return "fused+policy, openat2"
	}
	return name
}
