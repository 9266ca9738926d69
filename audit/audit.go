// Package audit records one [Event] for every guest call on a capability:
// allowed, denied or failed.
//
// A [Sink] receives events synchronously, in the caller's goroutine, after the
// call has finished. It must be safe for concurrent use and must not block for
// long. This package provides the interface and these sinks:
//
//   - [Ring]: the most recent events in memory, for tests and inspection.
//   - [JSONL]: an append-only JSON Lines file, one event per line, with a chosen
//     fsync policy (see [OpenJSONL]). It may write the compact form ([Compact])
//     and rotate ([Rotate]). [ReadJSONL], [ScanJSONL] and [ScanLog] read such
//     files back.
//   - [Slog]: one log/slog record per event, refusals and failures at a higher level.
//   - [Multi] and [Filter]: fan-out to several sinks, and a predicate in front of one.
//   - [DefaultTag]: a tag for the events of a whole session (a capfs run).
//
// Events never contain host paths: paths are those of the capability tree.
//
// Granularity is one event per call, except where the host asks for a summary.
// A sink wrapped by [Batching] counts some calls instead of recording them: the
// successful read, list and stat calls made under a context carrying a [Batch]
// ([WithBatch]).
// [Batch.Flush] records them as one event with Count set. Refusals and failures
// are still recorded one by one. The MCP server's grep does this: one event per
// grep call for the files it read. Which files such a request read is then not in
// the log, only its root and how many calls it made.
//
// What this package does not do:
//   - It does not sign or chain events. A JSONL file is tamper-evident only as far
//     as the host's file permissions make it.
//   - A sink that fails (a full disk, a closed file) does not fail the guest's
//     call. The failure is counted and reported to the host ([JSONL.Errors],
//     [Slog.Errors]).
//
// # The log's lines
//
// A JSONL log holds two kinds of lines, which readers tell apart by the key
// "bulk". A log may mix them; logs written before the compact form have only the
// first:
//
//   - A plain line: one Event as JSON ([AppendJSON]), e.g.
//     {"time":"…","request_id":"9f…-41","subject":"capfs/run","op":"read","path":"project/a.js","guest_path":"a.js","outcome":"ok","duration_ns":5120}
//   - A compact record: many events that share subject, op, outcome, code, rule,
//     grant, tag and the time's UTC offset, e.g.
//     {"bulk":2,"time":"2026-11-28T10:45:00.1Z","subject":"capfs/run","op":"read","outcome":"ok","tag":"run:5e…","events":[[0,0,"9f…-41",5120,0,"project/a.js",8],[2300,12,"2",4100,8,"b.js",8]]}
//     Its header has the shared fields under their Event names, and "time", the
//     first event's time. "bulk" is the number of events. Each has one element of
//     "events", in the order recorded:
//     [dt, idKeep, idSuffix, duration_ns, pathKeep, pathSuffix, guest].
//     An event's time is the previous one's (the header's for the first) plus dt
//     nanoseconds; dt may be negative. Its request id is the previous event's
//     first idKeep bytes followed by idSuffix. Its path is built likewise. Both
//     are "" before the first, and a keep falls between runes. guest is a number
//     n, the guest path being the path from byte n, or the guest path itself as a
//     string. Dest and Count are never set in a record: events with either, and
//     refusals, are plain lines.
//
// Every event of a compact record reads back with every field as its plain line
// gives it. A JSONL sink with Compact holds events for up to a second and groups
// them. So the file is in time order within each record, not across lines.
//
// A line that is neither is reported by ScanJSONL and skipped. Such a line is one
// a crash cut short, to which the next process appended. The whole event that
// ends it is still read. It is looked for at the first 16 places an event could
// start, so a hostile line costs no more. A writer that opens a log whose last
// line is torn ends it first.
package audit

import (
	"context"
	"sync"
	"time"
)

// Outcome classifies how a call ended.
type Outcome string

// The outcomes.
const (
	OK     Outcome = "ok"     // the operation ran and succeeded
	Denied Outcome = "denied" // policy, a hook, attenuation or revocation refused it before it ran
	Failed Outcome = "failed" // it ran (or its input was invalid) and returned an error
)

// Event is the record of one guest call.
//
// GuestPath is the path as the guest wrote it, relative to the capability it
// called. NUL bytes are spelled out, and it is cut at 512 bytes. When it could
// not be parsed (an invalid_path or path_outside_sandbox call), Path is empty.
// GuestPath is then the only record of what was attempted.
//
// Path, Dest and GuestPath hold a name's bytes, which need not be UTF-8. The
// text sinks ([JSONL], [Slog]) write a path that is not UTF-8, or that holds a
// backslash (no name does), in internal/termsafe's escaped form: "caf\xe9",
// as the CLI and the MCP server print it, so two names that differ in such a
// byte never read the same. [ReadJSONL] gives the bytes back. Other paths are
// written as they are.
type Event struct {
	Time      time.Time     `json:"time"`
	RequestID string        `json:"request_id"`
	Subject   string        `json:"subject,omitempty"`
	Op        string        `json:"op"`
	Path      string        `json:"path"`                 // from the capability tree's root
	Dest      string        `json:"dest,omitempty"`       // second path, if any
	GuestPath string        `json:"guest_path,omitempty"` // as the guest wrote it (see below)
	Outcome   Outcome       `json:"outcome"`
	Code      string        `json:"code,omitempty"` // the error code when not OK
	Rule      string        `json:"rule,omitempty"` // the policy rule (or other source) that decided
	Duration  time.Duration `json:"duration_ns"`
	// Grant is the id of the authority grant the capability was issued under
	// (package authority fills it in), "" for capabilities made without one.
	Grant string `json:"grant,omitempty"`
	// Tag names the outer request the call was made for (an MCP tool call, say),
	// as set on the call's context with WithRequestTag; "" when none was set.
	Tag string `json:"tag,omitempty"`
	// Count is set on a summary event (see Batch): the number of successful
	// calls it stands for, which were not recorded one by one. 0 on the event
	// of a single call.
	Count int `json:"count,omitempty"`
}

// Sink receives events. Implementations must be safe for concurrent use.
type Sink interface {
	Record(ctx context.Context, e Event)
}

// Func adapts a function to a Sink. The function must be safe for concurrent use.
type Func func(ctx context.Context, e Event)

// Record calls f.
func (f Func) Record(ctx context.Context, e Event) { f(ctx, e) }

// Discard drops every event.
var Discard Sink = discard{}

type discard struct{}

func (discard) Record(context.Context, Event) {}

// Ring keeps the most recent events in memory. The zero Ring is unusable; use NewRing.
// It is safe for concurrent use.
type Ring struct {
	mu    sync.Mutex
	buf   []Event
	next  int
	full  bool
	total uint64
}

// NewRing returns a Ring holding the last n events (n ≥ 1).
func NewRing(n int) *Ring {
	if n < 1 {
		n = 1
	}
	return &Ring{buf: make([]Event, n)}
}

// Record stores e, evicting the oldest event when full.
func (r *Ring) Record(_ context.Context, e Event) {
	r.mu.Lock()
	r.buf[r.next] = e
	r.next++
	r.total++
	if r.next == len(r.buf) {
		r.next = 0
		r.full = true
	}
	r.mu.Unlock()
}

// Events returns the retained events, oldest first.
func (r *Ring) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]Event(nil), r.buf[:r.next]...)
	}
	out := make([]Event, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// Total returns how many events were ever recorded, including evicted ones.
func (r *Ring) Total() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// Reset forgets all events.
func (r *Ring) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.buf)
	r.next, r.full, r.total = 0, false, 0
}
