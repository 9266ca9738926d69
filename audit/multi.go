package audit

import "context"

// Multi returns a Sink that records every event in each of sinks.
// It records in the order given and in the caller's goroutine, so it is as slow
// as the sum of its sinks. Nil sinks are skipped. With none left it returns
// [Discard]; with one, that sink itself.
func Multi(sinks ...Sink) Sink {
	out := make(multi, 0, len(sinks))
	for _, s := range sinks {
		if s != nil {
			out = append(out, s)
		}
	}
	switch len(out) {
	case 0:
		return Discard
	case 1:
		return out[0]
	}
	return out
}

type multi []Sink

func (m multi) Record(ctx context.Context, e Event) {
	for _, s := range m {
		s.Record(ctx, e)
	}
}

// Filter returns a Sink that passes to sink only the events keep returns true for
// (for example, only refusals, or only writes). keep runs in the caller's goroutine
// and must be safe for concurrent use. A nil keep passes everything; a nil sink
// gives Discard.
func Filter(sink Sink, keep func(Event) bool) Sink {
	if sink == nil {
		return Discard
	}
	if keep == nil {
		return sink
	}
	return filter{sink: sink, keep: keep}
}

type filter struct {
	sink Sink
	keep func(Event) bool
}

func (f filter) Record(ctx context.Context, e Event) {
	if f.keep(e) {
		f.sink.Record(ctx, e)
	}
}
