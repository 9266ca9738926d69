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

// mcpTable measures issue 6's workloads: grep over $(go env GOROOT)/src through
// capfs's MCP server (the SDK's client over in-memory transports) beside grep -rn
// and grep -rl on the same tree, and one read call's round trip beside
// os.ReadFile of the same file. It prints, per workload, capfs beside its peer
// with the ratio; the issue sets no target.
func mcpTable(out, progress io.Writer, count int, run string, benchtime time.Duration) error {
	start := time.Now()
	fx, err := bench.NewMCPFixture()
	if err != nil {
		return err
	}
	defer fx.Close()
	fmt.Fprintf(progress, "mcp fixture ready in %s\n", time.Since(start).Round(time.Millisecond))
	grepVersion, _ := exec.Command("grep", "--version").Output()
	grepFirst, _, _ := strings.Cut(string(grepVersion), "\n")
	fmt.Fprintf(out, "MCP server: a copy of $(go env GOROOT)/src (Go %s) served read-only by a `capfs mcp` subprocess over stdio, "+
		"called through the go-sdk client; reference server: %s, over stdio on the same copy; list: %s (%d entries), tree: %s, glob: %s under %s; "+
		"the pattern `%s` matches %d lines in %d files; %s, LC_ALL=C; GOMAXPROCS %d. "+
		"Cells: median wall-clock time per call over %d rounds; ratio = peer time / capfs time (above 1× capfs is faster).\n\n",
		runtime.Version(), fx.RefNote, fx.ListDir, fx.Entries, fx.TreeDir, bench.MCPGlob, fx.GlobDir,
		bench.MCPPattern, fx.Lines, fx.Files, strings.TrimSpace(grepFirst), runtime.GOMAXPROCS(0), count)
	fmt.Fprintf(out, "| workload | capfs | time | peer | time | ratio |\n|---|---|---:|---|---:|---:|\n")
	for _, w := range bench.MCPWorkloadsFor(fx) {
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
			fmt.Fprintf(out, "| `%s` | %s | %s | `%s` | %s | %s |\n", strings.ReplaceAll(w.Name, "|", `\|`), im.Name, dur(c),
				strings.ReplaceAll(peer, "|", `\|`), dur(p), ratio(p, c))
		}
	}
	if run == "" || strings.Contains("grep", run) || strings.Contains(run, "grep") {
		c, err := fx.MeasureGrepCPU(max(count, 3))
		if err != nil {
			fmt.Fprintf(out, "\nCPU per grep: not measured (%v)\n", err)
			return nil
		}
		fmt.Fprintf(out, "\nCPU per grep (user+system; capfs: the `capfs mcp` process, from /proc, mean of %d calls; peers: their rusage), ratio = peer CPU / capfs CPU:\n\n", max(count, 3))
		fmt.Fprintf(out, "| grep | capfs mcp | rg | ratio | grep -r | ratio |\n|---|---:|---:|---:|---:|---:|\n")
		f := func(d time.Duration) float64 { return float64(d) }
		fmt.Fprintf(out, "| content (-n) | %s | %s | %s | %s | %s |\n", dur(f(c.CapfsContent)), dur(f(c.RgN)), ratio(f(c.RgN), f(c.CapfsContent)), dur(f(c.GrepN)), ratio(f(c.GrepN), f(c.CapfsContent)))
		fmt.Fprintf(out, "| files (-l) | %s | %s | %s | %s | %s |\n", dur(f(c.CapfsFiles)), dur(f(c.RgL)), ratio(f(c.RgL), f(c.CapfsFiles)), dur(f(c.GrepL)), ratio(f(c.GrepL), f(c.CapfsFiles)))
	}
	return nil
}
