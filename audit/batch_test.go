package audit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/capfs/capfs/audit"
)

func TestBatching(t *testing.T) {
	ring := audit.NewRing(100)
	sink := audit.Batching(ring)
	b := &audit.Batch{Op: "grep", Path: "src"}
	ctx := audit.WithBatch(context.Background(), b)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			op := []string{"read", "list", "stat"}[i%3]
			sink.Record(ctx, audit.Event{Op: op, Path: "src/f", Outcome: audit.OK, Duration: time.Millisecond, Tag: "req-1"})
		}()
	}
	wg.Wait()
	// Refusals, failures and other ops are recorded at once, batch or not.
	sink.Record(ctx, audit.Event{Op: "read", Path: "src/.env", Outcome: audit.Denied})
	sink.Record(ctx, audit.Event{Op: "read", Path: "src/gone", Outcome: audit.Failed})
	sink.Record(ctx, audit.Event{Op: "write", Path: "src/w", Outcome: audit.OK})
	// Without a Batch on the context, everything is recorded.
	sink.Record(context.Background(), audit.Event{Op: "read", Path: "src/g", Outcome: audit.OK})
	if got := len(ring.Events()); got != 4 {
		t.Fatalf("before Flush: %d events recorded, want 4 (the denied, failed, write and unbatched ones)", got)
	}
	if b.Count() != 50 {
		t.Fatalf("Count = %d, want 50", b.Count())
	}
	b.Flush(context.Background())
	evs := ring.Events()
	if len(evs) != 5 {
		t.Fatalf("after Flush: %d events, want 5", len(evs))
	}
	s := evs[4]
	if s.Op != "grep" || s.Path != "src" || s.Count != 50 || s.Outcome != audit.OK || s.Duration != 50*time.Millisecond || s.Tag != "req-1" {
		t.Fatalf("summary event %+v", s)
	}
	b.Flush(context.Background())
	if len(ring.Events()) != 5 {
		t.Fatal("a second Flush with nothing counted recorded an event")
	}
}

// TestBatchWithoutBatching: a Batch on the context changes nothing when the
// sink is not wrapped.
func TestBatchWithoutBatching(t *testing.T) {
	ring := audit.NewRing(10)
	b := &audit.Batch{Op: "grep"}
	ctx := audit.WithBatch(context.Background(), b)
	ring.Record(ctx, audit.Event{Op: "read", Outcome: audit.OK})
	b.Flush(ctx)
	if n := len(ring.Events()); n != 1 || b.Count() != 0 {
		t.Fatalf("%d events, count %d: want the call recorded and nothing batched", n, b.Count())
	}
}
