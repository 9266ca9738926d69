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
	return nil
}
