package dir

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// chainBits is what a gate's state must be: the bits of every gate on its chain.
func chainBits(g *gate) uint32 {
	var st uint32
	for ; g != nil; g = g.parent {
		st |= g.bits.Load()
	}
	return st
}

// TestGateCache changes random gates of a small tree of chains and checks, after
// every change, that every gate's (cached) state is its chain's, with the caches
// filled before the change.
func TestGateCache(t *testing.T) {
	root := newGate(nil)
	a := newGate(root)
	b := newGate(a)
	c := newGate(b)
	side := newGate(a)
	gates := []*gate{root, a, b, c, side}
	r := rand.New(rand.NewPCG(1, 2))
	for step := range 400 {
		for _, g := range gates {
			g.state() // fill the caches
		}
		g := gates[r.IntN(len(gates))]
		switch k := r.IntN(10); {
		case k == 0 && step > 300:
			g.set(revokedBit, true)
		case k < 5:
			g.set(lockedBit, true)
		default:
			g.set(lockedBit, false)
		}
		for i, g := range gates {
			if got, want := g.state(), chainBits(g); got != want {
				t.Fatalf("step %d: gate %d state %b, its chain %b", step, i, got, want)
			}
		}
	}
}

// TestGateConcurrent checks that a change is seen by the first check that starts
// after it returns, while other goroutines keep refilling the cache.
func TestGateConcurrent(t *testing.T) {
	root := newGate(nil)
	mid := newGate(root)
	leaf := newGate(newGate(mid))
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				leaf.state()
			}
		}()
	}
	for i := range 2000 {
		locked := i%2 == 0
		mid.set(lockedBit, locked)
		if got := leaf.state()&lockedBit != 0; got != locked {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("round %d: leaf locked=%v after mid set it to %v", i, got, locked)
		}
	}
	root.set(revokedBit, true)
	if leaf.state()&revokedBit == 0 {
		t.Error("leaf not revoked after root.Revoke")
	}
	stop.Store(true)
	wg.Wait()
}
