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

// materializeTable measures issue 5's workloads on Go's source tree
// (bench.GoSrcRepo, built on first use): materialize's checkout of a physical
// directory beside cp -a, its checkout of a git revision beside
// git archive | tar -x, and its sync-back scan of an unchanged checkout beside
// git status, every checkout written under materialize's default base. It prints,
// per workload, capfs beside its peer with the ratio and the target.
func materializeTable(out, progress io.Writer, count int, run string, benchtime time.Duration) error {
	start := time.Now()
	fx, err := bench.NewMaterializeFixture()
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "materialize fixture ready in %s\n", time.Since(start).Round(time.Millisecond))
	gitVersion, _ := exec.Command("git", "version").Output()
	cpVersion, _ := exec.Command("cp", "--version").Output()
	cpFirst, _, _ := strings.Cut(string(cpVersion), "\n")
	fmt.Fprintf(out, "Materialize: Go %s's src (%d files, %d symlinks, %d directories, %.1f MB) from %s and its one-commit repository; "+
		"every checkout (capfs's and the peers') written under %s; %s, %s; GOMAXPROCS %d. "+
		"Cells: median wall-clock time per iteration over %d rounds; ratio = peer time / capfs time (above 1× capfs is faster).\n\n",
		runtime.Version(), fx.Files, fx.Links, fx.Dirs, float64(fx.Bytes)/1e6, fx.WorkTree, fx.Base,
		strings.TrimSpace(string(gitVersion)), strings.TrimSpace(cpFirst), runtime.GOMAXPROCS(0), count)
	fmt.Fprintf(out, "| workload | capfs | time | peer | time | ratio | target |\n|---|---|---:|---|---:|---:|---|\n")
	for _, w := range bench.MaterializeWorkloads() {
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
			fmt.Fprintf(out, "| %s | %s | %s | `%s` | %s | %s | ≤ %.1f× the peer's time: %.2f×, %s |\n", w.Name, im.Name, dur(c),
				strings.ReplaceAll(peer, "|", `\|`), dur(p), ratio(p, c), w.Target, c/p, verdict)
		}
	}
	return nil
}
