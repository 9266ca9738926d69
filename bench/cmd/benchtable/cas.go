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

// casTable measures issue 15's workloads on Go's source tree: a cold snapshot
// into an empty store beside git add -A into a fresh repository, a re-snapshot of
// the unchanged tree beside git status, and a materialization by hard links
// beside cp -a. It prints capfs beside its peer with the ratio and the target.
func casTable(out, progress io.Writer, count int, run string, benchtime time.Duration) error {
	start := time.Now()
	fx, err := bench.NewCASFixture()
	if err != nil {
		return err
	}
	defer fx.Close()
	fmt.Fprintf(progress, "cas fixture ready in %s\n", time.Since(start).Round(time.Millisecond))
	gitVersion, _ := exec.Command("git", "version").Output()
	fmt.Fprintf(out, "CAS: Go %s's src (%d files, %.1f MB) at %s, root %s; store, repositories and checkouts under %s; %s; GOMAXPROCS %d. "+
		"Cells: median wall-clock time per iteration over %d rounds; ratio = peer time / capfs time (above 1× capfs is faster).\n\n",
		runtime.Version(), fx.Files, float64(fx.Bytes)/1e6, fx.WorkTree, fx.Root, fx.Base,
		strings.TrimSpace(string(gitVersion)), runtime.GOMAXPROCS(0), count)
	fmt.Fprintf(out, "| workload | capfs | time | peer | time | ratio | target |\n|---|---|---:|---|---:|---:|---|\n")
	for _, w := range bench.CASWorkloads() {
		if run != "" && !strings.Contains(w.Name, run) {
			continue
		}
		cs := make([]contender, len(w.Impls))
		for i, im := range w.Impls {
			cs[i] = contender{im.Name, im.Peer, func(b *testing.B) { im.Run(b, fx) }}
		}
		med, peer, err := interleaved(w.Name, cs, count, benchtime, progress)
		if err != nil {
			return err
		}
		p := med[peer]
		for _, im := range w.Impls {
			if im.Peer {
				continue
			}
			c := med[im.Name]
			verdict := "met"
			if c/p > w.Target {
				verdict = "missed"
			}
			fmt.Fprintf(out, "| %s | %s | %s | `%s` | %s | %s | ≤ %.2f× the peer's time: %.2f×, %s |\n", w.Name, im.Name, dur(c),
				peer, dur(p), ratio(p, c), w.Target, c/p, verdict)
		}
	}
	if run != "" && !strings.Contains("upload download", run) {
		return nil
	}
	// Transfers through a bazel-remote v2.6.2 on localhost: no peer, the figures
	// with their throughput.
	fmt.Fprintf(out, "\n| transfer through bazel-remote (localhost) | time | throughput |\n|---|---:|---:|\n")
	for _, tr := range []struct {
		name string
		fn   func(b *testing.B, fx *bench.CASFixture)
	}{
		{"upload the tree into an empty server (remote.Client.Upload)", bench.CASUpload},
		{"download it into an empty store (remote.Client.Download)", bench.CASDownload},
	} {
		var walls []float64
		for i := 0; i < count; i++ {
			r, err := measure(tr.name, "capfs", func(b *testing.B) { tr.fn(b, fx) }, benchtime)
			if err != nil {
				return err
			}
			t := float64(r.T.Nanoseconds()) / float64(r.N)
			fmt.Fprintf(progress, "%s round %d: %s\n", tr.name, i+1, dur(t))
			walls = append(walls, t)
		}
		m := median(walls)
		fmt.Fprintf(out, "| %s | %s | %.0f MB/s |\n", tr.name, dur(m), float64(fx.Bytes)/1e6/(m/1e9))
	}
	return nil
}
