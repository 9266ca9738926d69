// Command sqliteproc replays a bench trace (bench.WriteTrace) on a capfs sqlite
// scratch file through the Backend SPI and prints each phase's milliseconds as a
// JSON array: the "small Go program" column of issue 14's benchmark, whose
// process start is counted like the Node peer's.
//
//	sqliteproc TRACE.json SCRATCH.db
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/capfs/capfs/backends/sqlite"
	"github.com/capfs/capfs/bench"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: sqliteproc TRACE.json SCRATCH.db")
		os.Exit(2)
	}
	phases, err := bench.ReadTrace(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	f, err := sqlite.Open(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	per, err := bench.RunTrace(bench.BackendOps{B: f}, phases)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ms := make([]float64, len(per))
	for i, d := range per {
		ms[i] = float64(d.Microseconds()) / 1000
	}
	json.NewEncoder(os.Stdout).Encode(ms)
}
