package audit

import (
	"context"
	"sync"
	"time"
)

// Batch summarises the successful reads of one outer request (a content search
// over thousands of files, say) in a single event.
//
// Some calls are counted in it instead of recorded. A call is counted when it
// is made with a context carrying it ([WithBatch]), on a capability whose sink
// is wrapped by [Batching], ends OK, and its op is "read", "list" or "stat".
// [Batch.Flush] then records one event standing for them. Every other event of
// those calls (a refusal, a failure, any other op) is recorded as usual, at
// once. Without Batching in front of the sink, a Batch counts nothing and every
// call is recorded one by one. Batching is the host's choice of both sides,
// never a way for a guest to hide a call.
//
// A Batch is safe for concurrent use.
type Batch struct {
	// Op and Path are the summary event's op ("grep") and path (the request's
	// root, from the capability tree's root as far as the host knows it).
	Op, Path string

	mu    sync.Mutex
	sink  Sink  // the sink behind the Batching wrapper that counted the first call
	first Event // the first call counted: its time, subject, grant, tag and request id
	n     int
	dur   time.Duration
}

type batchKey struct{}

// WithBatch returns a copy of ctx whose capability calls b summarises.
func WithBatch(ctx context.Context, b *Batch) context.Context {
	return context.WithValue(ctx, batchKey{}, b)
}

// Batching returns a sink that passes every event to sink, except those it
// counts in a [Batch]. It counts the successful read, list and stat calls made
// under a context carrying a Batch, in that Batch.
func Batching(sink Sink) Sink { return &batching{sink: sink} }

type batching struct{ sink Sink }

func (w *batching) Record(ctx context.Context, e Event) {
	if e.Outcome == OK && (e.Op == "read" || e.Op == "list" || e.Op == "stat") && ctx != nil {
		if b, _ := ctx.Value(batchKey{}).(*Batch); b != nil && b.count(w.sink, e) {
			return
		}
	}
	w.sink.Record(ctx, e)
}

// count adds e to b if b records to sink (or to nothing yet).
func (b *Batch) count(sink Sink, e Event) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sink == nil {
		b.sink, b.first = sink, e
	} else if b.sink != sink {
		return false // a call on a capability with another sink: recorded there
	}
	b.n++
	b.dur += e.Duration
	return true
}

// Count is the number of calls counted so far and not yet flushed.
func (b *Batch) Count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// Flush records one event for the calls counted since the last Flush.
// The event has the Op and Path of b, Outcome OK, Count the number of calls and
// Duration their total. Its time, subject, grant, tag and request id are those
// of the first call. Flush records nothing when no call was counted.
func (b *Batch) Flush(ctx context.Context) {
	b.mu.Lock()
	if b.n == 0 {
		b.mu.Unlock()
		return
	}
	e := Event{Time: b.first.Time, RequestID: b.first.RequestID, Subject: b.first.Subject, Op: b.Op, Path: b.Path,
		Outcome: OK, Duration: b.dur, Grant: b.first.Grant, Tag: b.first.Tag, Count: b.n}
	sink := b.sink
	b.n, b.dur, b.sink = 0, 0, nil
	b.mu.Unlock()
	sink.Record(ctx, e)
}
