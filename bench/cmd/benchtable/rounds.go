//go:build linux

package main

import (
	"fmt"
	"io"
	"testing"
	"time"
)

// contender is one implementation of a workload in an interleaved comparison.
type contender struct {
	Name string
	Peer bool // the implementation the others are compared with
	Run  func(b *testing.B)
}

// interleaved measures every contender count times, in rounds that run each one
// once (so a burst of load from elsewhere hits all of them alike), printing each
// sample to progress. It returns the median wall-clock time per iteration, in
// nanoseconds, by name, and the peer's name.
func interleaved(workload string, cs []contender, count int, benchtime time.Duration, progress io.Writer) (map[string]float64, string, error) {
	walls := map[string][]float64{}
	peer := ""
	for i := 0; i < count; i++ {
		for _, c := range cs {
			r, err := measure(workload, c.Name, c.Run, benchtime)
			if err != nil {
				return nil, "", err
			}
			t := float64(r.T.Nanoseconds()) / float64(r.N)
			fmt.Fprintf(progress, "%s: %s round %d: %s\n", workload, c.Name, i+1, dur(t))
			walls[c.Name] = append(walls[c.Name], t)
		}
	}
	med := make(map[string]float64, len(walls))
	for _, c := range cs {
		med[c.Name] = median(walls[c.Name])
		if c.Peer {
			peer = c.Name
		}
	}
	return med, peer, nil
}
