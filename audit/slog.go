package audit

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// SlogMessage is the message of every record a Slog sink emits; the event is in the
// attributes.
const SlogMessage = "capfs call"

// Slog is a [Sink] that logs each event as one [log/slog] record.
// The record's message is [SlogMessage], timed at the call's start. Its
// attributes are request_id, subject, grant, op, path, dest, guest_path (when it
// differs from path), outcome, code, rule and duration. Empty ones are left out,
// except path. Paths are written as [JSONL] writes them: one that is not UTF-8
// or holds a backslash in internal/termsafe's escaped form.
//
// Successful calls log at Info, denied and failed ones at Warn, unless changed
// with [OKLevel], [DeniedLevel] and [FailedLevel]. Records below the handler's
// level are not built at all. A handler's error is counted ([Slog.Errors]), never
// returned. Use [NewSlog]. It is safe for concurrent use if its handler is (the
// standard ones are).
type Slog struct {
	h                  slog.Handler
	ok, denied, failed slog.Level
	errs               atomic.Uint64
}

// SlogOption configures NewSlog.
type SlogOption func(*Slog)

// OKLevel sets the level of successful calls (default slog.LevelInfo; slog.LevelDebug
// keeps them out of an Info log).
func OKLevel(l slog.Level) SlogOption { return func(s *Slog) { s.ok = l } }

// DeniedLevel sets the level of calls refused by revocation, attenuation, policy or a
// hook (default slog.LevelWarn).
func DeniedLevel(l slog.Level) SlogOption { return func(s *Slog) { s.denied = l } }

// FailedLevel sets the level of calls that ran and failed (default slog.LevelWarn).
func FailedLevel(l slog.Level) SlogOption { return func(s *Slog) { s.failed = l } }

// NewSlog returns a Sink logging through l's handler (with l's attributes and
// groups). A nil l means slog.Default() as it is at the time of the call.
func NewSlog(l *slog.Logger, opts ...SlogOption) *Slog {
	if l == nil {
		l = slog.Default()
	}
	s := &Slog{h: l.Handler(), ok: slog.LevelInfo, denied: slog.LevelWarn, failed: slog.LevelWarn}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	return s
}

// Level returns the level an event of outcome o is logged at. An unknown outcome is
// logged at the failed level.
func (s *Slog) Level(o Outcome) slog.Level {
	switch o {
	case OK:
		return s.ok
	case Denied:
		return s.denied
	}
	return s.failed
}

// Record logs e.
func (s *Slog) Record(ctx context.Context, e Event) {
	if ctx == nil {
		ctx = context.Background()
	}
	lvl := s.Level(e.Outcome)
	if !s.h.Enabled(ctx, lvl) {
		return
	}
	t := e.Time
	if t.IsZero() {
		t = time.Now()
	}
	r := slog.NewRecord(t, lvl, SlogMessage, 0)
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs, slog.String("request_id", e.RequestID))
	attrs = appendNonEmpty(attrs, "subject", e.Subject)
	attrs = appendNonEmpty(attrs, "grant", e.Grant)
	attrs = appendNonEmpty(attrs, "tag", e.Tag)
	attrs = append(attrs, slog.String("op", e.Op), slog.String("path", pathText(e.Path)))
	attrs = appendNonEmpty(attrs, "dest", pathText(e.Dest))
	if e.GuestPath != e.Path {
		attrs = appendNonEmpty(attrs, "guest_path", pathText(e.GuestPath))
	}
	attrs = append(attrs, slog.String("outcome", string(e.Outcome)))
	attrs = appendNonEmpty(attrs, "code", e.Code)
	if e.Count > 0 {
		attrs = append(attrs, slog.Int("count", e.Count))
	}
	attrs = appendNonEmpty(attrs, "rule", e.Rule)
	attrs = append(attrs, slog.Duration("duration", e.Duration))
	r.AddAttrs(attrs...)
	if err := s.h.Handle(ctx, r); err != nil {
		s.errs.Add(1)
	}
}

// Errors returns how many records the handler failed to handle.
func (s *Slog) Errors() uint64 { return s.errs.Load() }

func appendNonEmpty(attrs []slog.Attr, key, v string) []slog.Attr {
	if v == "" {
		return attrs
	}
	return append(attrs, slog.String(key, v))
}
