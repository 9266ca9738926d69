//go:build linux

package main

import (
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/bench"
)

// gitreeTable measures the git revision workloads on the Go source repository
// (bench.GoSrcRepo, built on first use) and prints, per workload, capfs's gitree
// beside the git CLI peer with the ratio and the target, then the tuning
// table: what each storage setting costs on listing and reading.
func gitreeTable(out, progress io.Writer, count int, run string, benchtime time.Duration, tune bool) error {
	start := time.Now()
	fx, err := bench.NewGitreeFixture()
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "gitree fixture ready in %s\n", time.Since(start).Round(time.Millisecond))
	gitVersion, _ := exec.Command("git", "version").Output()
	fmt.Fprintf(out, "Git revisions: %s, %s; one commit of Go %s's src (%d paths, %d blobs, %.1f MB), one pack. "+
		"Cells: median wall-clock time per iteration over %d rounds; ratio = peer time / capfs time (above 1× capfs is faster).\n\n",
		fx.Repo, strings.TrimSpace(string(gitVersion)), runtime.Version(), fx.Paths, len(fx.BlobIDs), float64(fx.Bytes)/1e6, count)
	fmt.Fprintf(out, "| workload | capfs | time | peer | time | ratio | target |\n|---|---|---:|---|---:|---:|---|\n")
	var cpuRows []string
	for _, w := range bench.GitreeWorkloads() {
		if run != "" && !strings.Contains(w.Name, run) {
			continue
		}
		walls, cpus, err := gitreeRounds(progress, fx, w, count, benchtime)
		if err != nil {
			return err
		}
		cpuRows = append(cpuRows, gitreeRows(out, w, walls, cpus)...)
	}
	if len(cpuRows) > 0 {
		fmt.Fprintf(out, "\nCPU time (user+system, all threads) per iteration, same run: gitree's process in its timed parts; "+
			"the peer's processes (git, and tar and the shell for the checkout), not this process reading their output:\n\n")
		fmt.Fprintf(out, "| workload | capfs | capfs CPU | peer CPU | ratio |\n|---|---|---:|---:|---:|\n")
		for _, r := range cpuRows {
			fmt.Fprintln(out, r)
		}
	}
	if err := inflaterTable(out, progress, fx, count, run, benchtime); err != nil {
		return err
	}
	if !tune {
		return nil
	}
	return tuningTable(out, progress, fx, count, benchtime)
}

// gitreeRounds measures every implementation of w count times, and returns
// the wall-clock and CPU times per iteration by implementation.
func gitreeRounds(progress io.Writer, fx *bench.GitreeFixture, w bench.GitreeWorkload, count int, benchtime time.Duration) (walls, cpus map[string][]float64, err error) {
	walls, cpus = map[string][]float64{}, map[string][]float64{}
	for i := 0; i < count; i++ {
		for _, im := range w.Impls {
			r, err := measure(w.Name, im.Name, func(b *testing.B) { im.Run(b, fx) }, benchtime)
			if err != nil {
				return nil, nil, err
			}
			t := float64(r.T.Nanoseconds()) / float64(r.N)
			c := r.Extra[bench.GitreeCPUMetric]
			fmt.Fprintf(progress, "%s: %s round %d: %s wall, %s CPU\n", w.Name, im.Name, i+1, dur(t), dur(c))
			walls[im.Name] = append(walls[im.Name], t)
			cpus[im.Name] = append(cpus[im.Name], c)
		}
	}
	return walls, cpus, nil
}

// gitreeRows writes w's rows, each capfs implementation beside the peer
// with the ratio and the target's verdict, and returns the rows of the CPU
// table.
func gitreeRows(out io.Writer, w bench.GitreeWorkload, walls, cpus map[string][]float64) []string {
	var peer bench.GitreeImpl
	for _, im := range w.Impls {
		if im.Peer {
			peer = im
		}
	}
	var cpuRows []string
	p := median(walls[peer.Name])
	for _, im := range w.Impls {
		if im.Peer {
			continue
		}
		c := median(walls[im.Name])
		fmt.Fprintf(out, "| %s | %s | %s | `%s` | %s | %s | %s |\n", w.Name, im.Name, dur(c),
			strings.ReplaceAll(peer.Name, "|", `\|`), dur(p), ratio(p, c), gitreeTarget(w.Target, c/p))
		cc, pc := median(cpus[im.Name]), median(cpus[peer.Name])
		if cc > 0 && pc > 0 {
			cpuRows = append(cpuRows, fmt.Sprintf("| %s | %s | %s | %s | %s |", w.Name, im.Name, dur(cc), dur(pc), ratio(pc, cc)))
		}
	}
	return cpuRows
}

// gitreeTarget is the target cell for a ratio capfs time / git's time of
// got against target (0: none).
func gitreeTarget(target, got float64) string {
	if target <= 0 {
		return "–"
	}
	verdict := "met"
	if got > target {
		verdict = "missed"
	}
	return fmt.Sprintf("≤ %.1f× git's time: %.2f×, %s", target, got, verdict)
}

// tuningTable prints what each storage setting of gitree costs on listing
// (single-threaded: measured once per storage setting) and reading, against
// the defaults.
func tuningTable(out, progress io.Writer, fx *bench.GitreeFixture, count int, benchtime time.Duration) error {
	fmt.Fprintf(out, "\nTuning: each setting against the defaults (median wall-clock time per iteration over %d rounds):\n\n", count)
	fmt.Fprintf(out, "| setting | list every path | read every blob |\n|---|---:|---:|\n")
	settings := bench.GitreeSettings()
	list, read := map[string][]float64{}, map[string][]float64{}
	for i := 0; i < count; i++ {
		for _, s := range settings {
			l, t, err := tuningRound(fx, s, benchtime)
			if err != nil {
				return err
			}
			fmt.Fprintf(progress, "tuning %s round %d: list %s, read %s\n", s.Name, i+1, dur(l), dur(t))
			list[s.Name], read[s.Name] = append(list[s.Name], l), append(read[s.Name], t)
		}
	}
	for _, s := range settings {
		l := "–"
		if s.Workers <= 1 {
			l = dur(median(list[s.Name]))
		}
		fmt.Fprintf(out, "| %s | %s | %s |\n", s.Name, l, dur(median(read[s.Name])))
	}
	return nil
}

// tuningRound measures setting s once: listing (0 for a setting with
// several workers) and reading, per iteration.
func tuningRound(fx *bench.GitreeFixture, s bench.GitreeSetting, benchtime time.Duration) (list, read float64, err error) {
	if s.Workers <= 1 {
		r, err := measure("list every path", s.Name, func(b *testing.B) { bench.GitreeList(b, fx, s.Opts...) }, benchtime)
		if err != nil {
			return 0, 0, err
		}
		list = float64(r.T.Nanoseconds()) / float64(r.N)
	}
	r, err := measure("read every blob", s.Name, func(b *testing.B) { bench.GitreeRead(b, fx, s.Workers, s.Opts...) }, benchtime)
	if err != nil {
		return 0, 0, err
	}
	return list, float64(r.T.Nanoseconds()) / float64(r.N), nil
}

// inflaterTable compares gitree's own DEFLATE decoder with klauspost/compress's
// zlib reader (gitree.WithLibraryInflater) on reading every blob and on the
// checkout, in interleaved rounds of the same run, one goroutine each. The
// package keeps its decoder only while it is at least as fast.
func inflaterTable(out, progress io.Writer, fx *bench.GitreeFixture, count int, run string, benchtime time.Duration) error {
	inf := bench.GitreeInflaters()
	type workload struct {
		name string
		run  func(b *testing.B, s bench.GitreeSetting)
	}
	var rows []string
	for _, w := range []workload{
		{"read every blob", func(b *testing.B, s bench.GitreeSetting) { bench.GitreeRead(b, fx, s.Workers, s.Opts...) }},
		{"check out into a directory", func(b *testing.B, s bench.GitreeSetting) { bench.GitreeCheckout(b, fx, s.Workers, s.Opts...) }},
	} {
		if run != "" && !strings.Contains(w.name, run) {
			continue
		}
		var cs []contender
		for _, s := range inf {
			cs = append(cs, contender{Name: s.Name, Peer: len(cs) == 0, Run: func(b *testing.B) { w.run(b, s) }})
		}
		med, _, err := interleaved("inflater: "+w.name, cs, count, benchtime, progress)
		if err != nil {
			return err
		}
		own, lib := med[inf[0].Name], med[inf[1].Name]
		verdict := "gitree's is at least as fast: kept"
		if own > lib {
			verdict = "gitree's is slower"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s |", w.name, dur(own), dur(lib), ratio(lib, own), verdict))
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\nInflater: whole objects inflated by gitree's own DEFLATE decoder or by klauspost/compress's zlib reader "+
		"(gitree.WithLibraryInflater), one goroutine, interleaved rounds of this run; median wall-clock time per iteration over %d rounds; "+
		"ratio = klauspost time / gitree time (above 1× gitree's decoder is faster):\n\n", count)
	fmt.Fprintf(out, "| workload | %s | %s | ratio | |\n|---|---:|---:|---:|---|\n", inf[0].Name, inf[1].Name)
	for _, r := range rows {
		fmt.Fprintln(out, r)
	}
	return nil
}
