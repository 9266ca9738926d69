package audit

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

func TestMultiFansOut(t *testing.T) {
	a, b := NewRing(10), NewRing(10)
	var order []string
	first := Func(func(_ context.Context, e Event) { order = append(order, "first:"+e.RequestID) })
	second := Func(func(_ context.Context, e Event) { order = append(order, "second:"+e.RequestID) })
	m := Multi(a, nil, first, b, second)
	m.Record(context.Background(), Event{RequestID: "1"})
	m.Record(context.Background(), Event{RequestID: "2"})
	if a.Total() != 2 || b.Total() != 2 {
		t.Fatalf("rings got %d and %d events, want 2 each", a.Total(), b.Total())
	}
	if fmt.Sprint(order) != "[first:1 second:1 first:2 second:2]" {
		t.Fatalf("sinks called in order %v", order)
	}
	if Multi() != Discard || Multi(nil, nil) != Discard {
		t.Fatal("Multi of no sinks is not Discard")
	}
	if Multi(nil, a) != Sink(a) {
		t.Fatal("Multi of one sink is not that sink")
	}
}

func TestMultiConcurrent(t *testing.T) {
	a, b := NewRing(1000), NewRing(1000)
	m := Multi(a, b)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				m.Record(context.Background(), Event{})
			}
		}()
	}
	wg.Wait()
	if a.Total() != 400 || b.Total() != 400 {
		t.Fatalf("totals %d and %d, want 400", a.Total(), b.Total())
	}
}

func TestFilter(t *testing.T) {
	r := NewRing(10)
	refusals := Filter(r, func(e Event) bool { return e.Outcome != OK })
	for i, o := range []Outcome{OK, Denied, OK, Failed} {
		refusals.Record(context.Background(), Event{RequestID: fmt.Sprint(i), Outcome: o})
	}
	got := r.Events()
	if len(got) != 2 || got[0].RequestID != "1" || got[1].RequestID != "3" {
		t.Fatalf("filtered events %+v, want requests 1 and 3", got)
	}
	if Filter(r, nil) != Sink(r) {
		t.Fatal("Filter with a nil predicate is not the sink itself")
	}
	if Filter(nil, func(Event) bool { return true }) != Discard {
		t.Fatal("Filter of a nil sink is not Discard")
	}
}
