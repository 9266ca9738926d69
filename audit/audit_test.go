package audit

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

func TestRingKeepsTheNewestInOrder(t *testing.T) {
	r := NewRing(3)
	if got := r.Events(); len(got) != 0 {
		t.Fatalf("new ring holds %d events", len(got))
	}
	for i := range 5 {
		r.Record(context.Background(), Event{RequestID: fmt.Sprint(i)})
	}
	got := r.Events()
	if len(got) != 3 || got[0].RequestID != "2" || got[1].RequestID != "3" || got[2].RequestID != "4" {
		t.Fatalf("Events() = %+v, want requests 2, 3, 4", got)
	}
	if r.Total() != 5 {
		t.Fatalf("Total() = %d, want 5", r.Total())
	}
	r.Reset()
	if len(r.Events()) != 0 || r.Total() != 0 {
		t.Fatalf("after Reset: %d events, total %d", len(r.Events()), r.Total())
	}
	r.Record(context.Background(), Event{RequestID: "x"})
	if got := r.Events(); len(got) != 1 || got[0].RequestID != "x" {
		t.Fatalf("after Reset and one Record: %+v", got)
	}
}

func TestRingMinimumSizeAndConcurrency(t *testing.T) {
	r := NewRing(0) // clamped to 1
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				r.Record(context.Background(), Event{RequestID: fmt.Sprint(g, i)})
				_ = r.Events()
			}
		}()
	}
	wg.Wait()
	if r.Total() != 400 || len(r.Events()) != 1 {
		t.Fatalf("Total() = %d, len(Events()) = %d; want 400 and 1", r.Total(), len(r.Events()))
	}
	Discard.Record(context.Background(), Event{}) // must not panic
}
