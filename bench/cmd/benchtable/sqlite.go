//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/capfs/capfs/bench"
)

// agentfsVersion is the npm package the sqlite section measures against.
const agentfsVersion = "0.6.4"

// sqliteTable runs issue 14's persistent-scratch trace (bench.SQLiteTrace) on
// capfs's sqlite backend (SPI, Dir, and a separate Go process), on AgentFS's
// npm SDK from Node (installed into the user cache directory on first use;
// skipped with a message when node or npm is missing) and on the memory
// backend, count rounds interleaved, each contender in a fresh directory, and
// prints the median time per phase with the ratios the issue sets targets on.
func sqliteTable(out, progress io.Writer, count int) error {
	base, err := os.MkdirTemp("", "capfs-bench-sqlite-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	phases := bench.SQLiteTrace()
	trace := filepath.Join(base, "trace.json")
	if err := bench.WriteTrace(trace, phases); err != nil {
		return err
	}
	cs := bench.SQLiteInProcess()
	proc := filepath.Join(base, "sqliteproc")
	if b, err := exec.Command("go", "build", "-o", proc, "./bench/cmd/sqliteproc").CombinedOutput(); err != nil {
		return fmt.Errorf("building sqliteproc: %v: %s", err, b)
	}
	cs = append(cs, processContender("capfs sqlite (Go process)", func(dir string) *exec.Cmd {
		return exec.Command(proc, trace, filepath.Join(dir, "scratch.db"))
	}))
	agentfs, why := agentfsScript()
	if agentfs != "" {
		cs = append(cs, processContender("AgentFS npm "+agentfsVersion, func(dir string) *exec.Cmd {
			return exec.Command("node", agentfs, trace, filepath.Join(dir, "agent.db"))
		}))
	} else {
		fmt.Fprintf(progress, "sqlite: AgentFS column skipped: %s\n", why)
	}
	per, tot, err := sqliteRounds(progress, base, trace, phases, cs, count)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Persistent scratch (issue 14): %s, GOMAXPROCS %d, median wall-clock ms per phase over %d rounds, each contender in a fresh file; "+
		"ratios = AgentFS time / capfs time (above 1× capfs is faster), and capfs sqlite SPI time / memory SPI time.\n\n", runtime.Version(), runtime.GOMAXPROCS(0), count)
	fmt.Fprintf(out, "| phase |")
	for _, c := range cs {
		fmt.Fprintf(out, " %s |", c.Name)
	}
	fmt.Fprintf(out, " AgentFS / sqlite SPI | AgentFS / sqlite process | sqlite SPI / memory |\n|---|")
	for range cs {
		fmt.Fprintf(out, "---:|")
	}
	fmt.Fprintf(out, "---:|---:|---:|\n")
	row := func(name string, get func(c string) float64) {
		fmt.Fprintf(out, "| %s |", name)
		for _, c := range cs {
			fmt.Fprintf(out, " %.1f |", get(c.Name))
		}
		spi, procT, mem := get("capfs sqlite (SPI)"), get("capfs sqlite (Go process)"), get("memory (SPI)")
		if agentfs != "" {
			af := get("AgentFS npm " + agentfsVersion)
			fmt.Fprintf(out, " %.1f× | %.1f× |", af/spi, af/procT)
		} else {
			fmt.Fprintf(out, " – | – |")
		}
		fmt.Fprintf(out, " %.1f× |\n", spi/mem)
	}
	for i, ph := range phases {
		row(ph.Name, func(c string) float64 { return median(per[c][i]) })
	}
	row("whole run (process start included for processes)", func(c string) float64 { return median(tot[c]) })
	return nil
}

// sqliteRounds runs every contender count times, interleaved, each in a
// fresh directory under base, and returns the milliseconds of each phase
// (contender -> phase -> round) and of each whole run (contender -> round).
func sqliteRounds(progress io.Writer, base, trace string, phases []bench.Phase, cs []bench.SQLiteContender, count int) (per map[string][][]float64, tot map[string][]float64, err error) {
	per, tot = map[string][][]float64{}, map[string][]float64{}
	for round := range count {
		for _, c := range cs {
			d, err := os.MkdirTemp(base, "run-")
			if err != nil {
				return nil, nil, err
			}
			ph, total, err := c.Run(d, trace, phases)
			os.RemoveAll(d)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", c.Name, err)
			}
			if per[c.Name] == nil {
				per[c.Name] = make([][]float64, len(phases))
			}
			for i, p := range ph {
				per[c.Name][i] = append(per[c.Name][i], float64(p.Microseconds())/1000)
			}
			tot[c.Name] = append(tot[c.Name], float64(total.Microseconds())/1000)
			fmt.Fprintf(progress, "sqlite: %s round %d: %s\n", c.Name, round+1, total.Round(time.Millisecond))
		}
	}
	return per, tot, nil
}

// processContender runs cmd (in a fresh directory) as a process that prints
// its phases' milliseconds as a JSON array; the total includes its start.
func processContender(name string, cmd func(dir string) *exec.Cmd) bench.SQLiteContender {
	return bench.SQLiteContender{Name: name, Run: func(dir, _ string, phases []bench.Phase) ([]time.Duration, time.Duration, error) {
		c := cmd(dir)
		var stdout, stderr bytes.Buffer
		c.Stdout, c.Stderr = &stdout, &stderr
		start := time.Now()
		err := c.Run()
		total := time.Since(start)
		if err != nil {
			return nil, 0, fmt.Errorf("%v: %s", err, stderr.String())
		}
		var ms []float64
		if err := json.Unmarshal(stdout.Bytes(), &ms); err != nil || len(ms) != len(phases) {
			return nil, 0, fmt.Errorf("bad output %q: %v", stdout.String(), err)
		}
		per := make([]time.Duration, len(ms))
		for i, m := range ms {
			per[i] = time.Duration(m * float64(time.Millisecond))
		}
		return per, total, nil
	}}
}

// agentfsScript installs agentfs-sdk into the user cache directory when
// missing and returns the path of bench/agentfs/bench.mjs copied beside it, or
// "" and why not.
func agentfsScript() (string, string) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", "node is not installed"
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err.Error()
	}
	dir := filepath.Join(cache, "capfs", "bench-agentfs-"+agentfsVersion)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "agentfs-sdk", "package.json")); errors.Is(err, os.ErrNotExist) {
		if _, err := exec.LookPath("npm"); err != nil {
			return "", "npm is not installed (needed once to fetch agentfs-sdk)"
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err.Error()
		}
		os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private":true,"type":"module"}`), 0o644)
		if b, err := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefix", dir, "agentfs-sdk@"+agentfsVersion).CombinedOutput(); err != nil {
			return "", fmt.Sprintf("npm install agentfs-sdk@%s failed: %v: %s", agentfsVersion, err, b)
		}
	}
	script, err := os.ReadFile("bench/agentfs/bench.mjs")
	if err != nil {
		return "", "run from the repository root: " + err.Error()
	}
	dst := filepath.Join(dir, "bench.mjs")
	if err := os.WriteFile(dst, script, 0o644); err != nil {
		return "", err.Error()
	}
	return dst, ""
}
