//go:build linux

// Command benchtable runs the bench workloads against capfs (memory backend, through
// the raw Backend SPI and through a dir.Dir), afero's MemMapFs and go-billy's memfs
// in one process, and prints a Markdown table of the median time per iteration with
// capfs's speed as a ratio to each peer (peer time / capfs time: above 1× capfs is
// faster).
//
// A third section (-only gitree, or by default after the others) runs the git
// revision workloads of issue 4 on a repository holding Go's own source tree
// (built once and cached, see bench.GoSrcRepo): capfs's gitree backend listing every
// path, reading every blob and checking the tree out, beside git ls-tree -r,
// git cat-file --batch and git archive | tar -x, in wall-clock time, then a tuning
// table of gitree's storage settings (-gitreetune=false leaves it out).
//
// A second section runs the host-directory workloads against capfs's physical
// backend (openat2 and portable resolvers, and a dir.Dir over the first), plain os,
// os.Root and afero's BasePathFs over OsFs, in a fresh directory under the default
// temporary directory, with a table of the same form and the physical backend's
// targets marked met or missed. Its operations take microseconds, so it runs more,
// shorter rounds (-hostcount, -hostbenchtime): a burst of load from elsewhere then
// skews fewer of them.
//
//	go run ./bench/cmd/benchtable [-benchtime 200ms] [-count 3] [-run substring]
//		[-only memory|physical|gitree|materialize|mcp|cas|sqlite|run|cli|fuse] [-hostbenchtime 100ms] [-hostcount 5]
//		[-gitreetune=true]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/bench"
)

func main() {
	testing.Init()
	o := &options{}
	flag.DurationVar(&o.benchtime, "benchtime", 200*time.Millisecond, "target time of each testing.Benchmark run")
	flag.IntVar(&o.count, "count", 3, "rounds per workload, each running every implementation once; the median is reported")
	flag.StringVar(&o.run, "run", "", "only workloads whose name contains this")
	flag.StringVar(&o.only, "only", "", "only one section: memory, physical, gitree, materialize, mcp, cas, sqlite, run, cli or fuse (default all)")
	flag.BoolVar(&o.gitreeTune, "gitreetune", true, "in the gitree section, also measure each storage setting")
	flag.DurationVar(&o.hostBenchtime, "hostbenchtime", 100*time.Millisecond, "target time of each testing.Benchmark run in the physical section")
	flag.IntVar(&o.hostCount, "hostcount", 5, "rounds per workload in the physical section; the median is reported")
	flag.Parse()
	if o.only != "" && !slices.ContainsFunc(sections, func(s section) bool { return s.name == o.only }) {
		fmt.Fprintf(os.Stderr, "-only %q: want memory, physical, gitree, materialize, mcp, cas, sqlite, run, cli or fuse\n", o.only)
		os.Exit(2)
	}
	start := time.Now()
	if err := runSections(o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "total %s\n", time.Since(start).Round(time.Second))
}

// options are the command's flags.
type options struct {
	benchtime, hostBenchtime time.Duration
	count, hostCount         int
	run, only                string
	gitreeTune               bool
}

// section is one table (or group of tables) of the output, selected by
// -only name.
type section struct {
	name string
	run  func(o *options) error
}

// sections are the tables, in the order they are printed.
var sections = []section{
	{"memory", func(o *options) error { return table(os.Stdout, os.Stderr, o.count, o.run, o.benchtime) }},
	{"physical", func(o *options) error { return hostTable(os.Stdout, os.Stderr, o.hostCount, o.run, o.hostBenchtime) }},
	{"gitree", func(o *options) error {
		return gitreeTable(os.Stdout, os.Stderr, o.count, o.run, o.benchtime, o.gitreeTune)
	}},
	// issue 5: checkout, sync-back scan
	{"materialize", func(o *options) error { return materializeTable(os.Stdout, os.Stderr, o.count, o.run, o.benchtime) }},
	// issue 6: grep and read through the MCP server
	{"mcp", func(o *options) error { return mcpTable(os.Stdout, os.Stderr, o.count, o.run, o.benchtime) }},
	// issue 15: snapshot, re-snapshot, materialize by hard links
	{"cas", func(o *options) error { return casTable(os.Stdout, os.Stderr, o.count, o.run, o.benchtime) }},
	// issue 14: persistent scratch vs AgentFS
	{"sqlite", func(o *options) error { return sqliteTable(os.Stdout, os.Stderr, o.count) }},
	// issue 13: capfs run's start-up and second build
	{"run", func(o *options) error { return bench.RunTable(os.Stdout, os.Stderr, o.count, o.run) }},
	// issue 13: capfs grep and diff against rg, git grep, grep and git diff
	{"cli", cliSection},
	// issue 17: the FUSE mount against the native directory
	{"fuse", fuseSection},
}

// runSections prints the sections -only selects (all by default, a blank
// line between them), stopping at the first error.
func runSections(o *options) error {
	for i, s := range sections {
		if o.only != "" && o.only != s.name {
			continue
		}
		if o.only == "" && i > 0 {
			fmt.Fprintln(os.Stdout)
		}
		if err := s.run(o); err != nil {
			return err
		}
	}
	return nil
}

// cliSection is the CLI table.
func cliSection(o *options) error {
	fx, err := bench.NewCLIFixture()
	if err != nil {
		return err
	}
	defer fx.Close()
	return bench.CLITable(os.Stdout, fx, o.count)
}

// fuseSection is the FUSE tables: the mount, its start-up, then capfs run
// --lazy end to end (start-up on Go's tree, a C build) and rm -rf in a lazy
// run against plain (issue 27).
func fuseSection(o *options) error {
	setBT := func(s string) error { return flag.Set("test.benchtime", s) }
	if err := bench.FUSETable(os.Stdout, os.Stderr, o.count, o.benchtime, setBT); err != nil {
		return err
	}
	if err := bench.FUSEStartTable(os.Stdout, os.Stderr, o.count); err != nil {
		return err
	}
	if err := lazyRunSection(o); err != nil {
		return err
	}
	fx, err := bench.NewLazyRmFixture()
	if err != nil {
		return err
	}
	defer fx.Close()
	fmt.Fprintln(os.Stdout)
	return bench.LazyRmTable(os.Stdout, os.Stderr, fx, max(o.count/2, 1))
}

// lazyRunSection is capfs run --lazy's start-up and build tables.
func lazyRunSection(o *options) error {
	fx, err := bench.NewLazyRunFixture()
	if err != nil {
		return err
	}
	defer fx.Close()
	fmt.Fprintln(os.Stdout)
	if err := bench.LazyRunStartTable(os.Stdout, os.Stderr, fx, o.count); err != nil {
		return err
	}
	fmt.Fprintln(os.Stdout)
	return bench.LazyRunBuildTable(os.Stdout, os.Stderr, fx, max(o.count/2, 1))
}

// cell is the median result of one workload on one implementation.
type cell struct {
	ns     float64 // per iteration
	allocs int64   // per iteration
}

// minIters is the fewest iterations a measurement may rest on: a workload slower
// than the benchtime is rerun for exactly minIters iterations, so no figure is a
// single cold run.
const minIters = 3

// sample runs w on impl once through testing.Benchmark and returns the time and
// allocations per iteration.
func sample(w bench.Workload, impl bench.Impl, benchtime time.Duration) (float64, int64, error) {
	r, err := measure(w.Name, impl.Name, func(b *testing.B) { w.Run(b, impl.New) }, benchtime)
	if err != nil {
		return 0, 0, err
	}
	return float64(r.T.Nanoseconds()) / float64(r.N), r.AllocsPerOp(), nil
}

// measure runs fn once through testing.Benchmark, for at least minIters
// iterations, and returns the result.
func measure(workload, impl string, fn func(b *testing.B), benchtime time.Duration) (testing.BenchmarkResult, error) {
	run := func(bt string) (testing.BenchmarkResult, error) {
		if err := flag.Set("test.benchtime", bt); err != nil {
			return testing.BenchmarkResult{}, err
		}
		// Every sample starts from the same state: garbage collected and freed
		// memory returned to the OS, so no implementation inherits another's heap
		// (or its page faults).
		debug.FreeOSMemory()
		r := testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			fn(b)
		})
		if r.N == 0 {
			return r, fmt.Errorf("%s on %s failed (run `go test -bench . ./bench` for the message)", workload, impl)
		}
		return r, nil
	}
	r, err := run(benchtime.String())
	if err == nil && r.N < minIters {
		r, err = run(fmt.Sprintf("%dx", minIters))
	}
	return r, err
}

func median[T int64 | float64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func table(out, progress io.Writer, count int, run string, benchtime time.Duration) error {
	impls := bench.Impls()
	fmt.Fprintf(out, "| workload | capfs | afero MemMapFs | go-billy memfs | ratio vs afero | ratio vs billy |\n")
	fmt.Fprintf(out, "|---|---:|---:|---:|---:|---:|\n")
	var allocRows, policyRows []string
	for _, w := range bench.Workloads() {
		if run != "" && !strings.Contains(w.Name, run) {
			continue
		}
		// Rounds interleave the implementations, so a burst of load from elsewhere
		// on the machine falls on all of them rather than on one.
		ns := map[string][]float64{}
		allocs := map[string][]int64{}
		for i := 0; i < count; i++ {
			for _, im := range impls {
				t, a, err := sample(w, im, benchtime)
				if err != nil {
					return err
				}
				fmt.Fprintf(progress, "%s: %s round %d: %s\n", w.Name, im.Name, i+1, dur(t))
				ns[im.Name] = append(ns[im.Name], t)
				allocs[im.Name] = append(allocs[im.Name], a)
			}
		}
		res := map[string]cell{}
		for name := range ns {
			res[name] = cell{ns: median(ns[name]), allocs: median(allocs[name])}
		}
		af, bi := res[bench.AferoMem], res[bench.BillyMem]
		for _, layer := range []string{bench.CapfsBackend, bench.CapfsDir, bench.CapfsDirPolicy} {
			c := res[layer]
			fmt.Fprintf(out, "| %s [%s] | %s | %s | %s | %s | %s |\n", w.Name, strings.TrimPrefix(layer, "capfs "),
				dur(c.ns), dur(af.ns), dur(bi.ns), ratio(af.ns, c.ns), ratio(bi.ns, c.ns))
		}
		allocRows = append(allocRows, fmt.Sprintf("| %s | %d | %d | %d | %d | %d |", w.Name,
			res[bench.CapfsBackend].allocs, res[bench.CapfsDir].allocs, res[bench.CapfsDirPolicy].allocs, af.allocs, bi.allocs))
		policyRows = append(policyRows, policyRow(w.Name, res[bench.CapfsDir], res[bench.CapfsDirPolicy], af))
	}
	fmt.Fprintf(out, "\nAllocations per iteration:\n\n")
	fmt.Fprintf(out, "| workload | capfs backend | capfs Dir | capfs Dir+policy | afero MemMapFs | go-billy memfs |\n")
	fmt.Fprintf(out, "|---|---:|---:|---:|---:|---:|\n")
	for _, r := range allocRows {
		fmt.Fprintln(out, r)
	}
	fmt.Fprintf(out, "\nThe default policy's cost (issue 33): Dir+policy / Dir (target at most %.2f×) and afero / Dir+policy "+
		"(target at least %.2f×, %.2f× on read-back):\n\n", policyCostMax, aferoMin, aferoMinRead)
	fmt.Fprintf(out, "| workload | Dir | Dir+policy | afero MemMapFs | Dir+policy / Dir | afero / Dir+policy | targets |\n")
	fmt.Fprintf(out, "|---|---:|---:|---:|---:|---:|---|\n")
	for _, r := range policyRows {
		fmt.Fprintln(out, r)
	}
	return nil
}

// The memory targets of issue 33: the default policy costs at most 30% over
// the same Dir without one, and the Dir with it is at least 1.5× faster than
// afero's MemMapFs, at least as fast on read-back.
const (
	policyCostMax = 1.3
	aferoMin      = 1.5
	aferoMinRead  = 1.0
)

// policyRow is one row of the policy cost table, with the targets met or missed.
func policyRow(name string, d, dp, af cell) string {
	cost, vsAfero := dp.ns/d.ns, af.ns/dp.ns
	want := aferoMin
	if strings.HasPrefix(name, "read back") {
		want = aferoMinRead
	}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "missed"
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %.2f× | %.2f× | cost %s, vs afero %s |", name, dur(d.ns), dur(dp.ns), dur(af.ns),
		cost, vsAfero, verdict(cost <= policyCostMax), verdict(vsAfero >= want))
}

// dur formats nanoseconds with three significant digits.
func dur(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.3g s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.3g ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.3g µs", ns/1e3)
	}
	return fmt.Sprintf("%.3g ns", ns)
}

func ratio(peer, capfs float64) string {
	return fmt.Sprintf("%.2f×", peer/capfs)
}
