package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func decodeLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(buf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("bad log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestSlogRecordsCarryTheEvent(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("component", "capfs")
	s := NewSlog(l)

	ok := sampleEvent("r1")
	denied := Event{
		Time: time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC), RequestID: "r2", Subject: "agent-run:c/r",
		Grant: "g-7", Op: "rename", Path: "a", Dest: "b", GuestPath: "a", Outcome: Denied,
		Code: "fs_permission_denied", Rule: "grant:g-7:access", Duration: 42 * time.Nanosecond,
	}
	failed := Event{RequestID: "r3", Op: "read", Path: "", GuestPath: "../x", Outcome: Failed, Code: "path_outside_sandbox"}
	for _, e := range []Event{ok, denied, failed} {
		s.Record(context.Background(), e)
	}
	recs := decodeLines(t, &buf)
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3:\n%s", len(recs), buf.String())
	}
	want := []map[string]any{
		{
			"level": "INFO", "msg": SlogMessage, "component": "capfs", "time": "2025-01-02T03:04:05.000000006Z",
			"request_id": "r1", "subject": "agent-run:c1/r1", "op": "write", "path": "src/main.go",
			"guest_path": "main.go", "outcome": "ok", "rule": "allow-all", "duration": float64(1500 * time.Microsecond),
		},
		{
			"level": "WARN", "msg": SlogMessage, "component": "capfs", "time": "2025-06-07T08:09:10Z",
			"request_id": "r2", "subject": "agent-run:c/r", "grant": "g-7", "op": "rename", "path": "a", "dest": "b",
			"outcome": "denied", "code": "fs_permission_denied", "rule": "grant:g-7:access", "duration": float64(42),
		},
		{
			"level": "WARN", "msg": SlogMessage, "component": "capfs",
			"request_id": "r3", "op": "read", "path": "", "guest_path": "../x",
			"outcome": "failed", "code": "path_outside_sandbox", "duration": float64(0),
		},
	}
	for i, w := range want {
		got := recs[i]
		if i == 2 { // a zero event time is logged as the time of Record
			if _, ok := got["time"].(string); !ok {
				t.Fatalf("record 3 has no time: %v", got)
			}
			delete(got, "time")
		}
		if len(got) != len(w) {
			t.Fatalf("record %d = %v\nwant %v", i+1, got, w)
		}
		for k, v := range w {
			if got[k] != v {
				t.Fatalf("record %d: %s = %v (%T), want %v\nrecord: %v", i+1, k, got[k], got[k], v, got)
			}
		}
	}
}

func TestSlogLevels(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s := NewSlog(l, OKLevel(slog.LevelDebug), DeniedLevel(slog.LevelError), FailedLevel(slog.LevelInfo))
	if s.Level(OK) != slog.LevelDebug || s.Level(Denied) != slog.LevelError || s.Level(Failed) != slog.LevelInfo ||
		s.Level("weird") != slog.LevelInfo {
		t.Fatal("Level does not report the configured levels")
	}
	s.Record(context.Background(), Event{RequestID: "ok", Outcome: OK})
	s.Record(context.Background(), Event{RequestID: "no", Outcome: Denied})
	s.Record(context.Background(), Event{RequestID: "bad", Outcome: Failed})
	recs := decodeLines(t, &buf)
	if len(recs) != 2 || recs[0]["request_id"] != "no" || recs[0]["level"] != "ERROR" ||
		recs[1]["request_id"] != "bad" || recs[1]["level"] != "INFO" {
		t.Fatalf("records: %v (the ok event, at Debug, must be filtered out)", recs)
	}
}

type failingHandler struct{ slog.Handler }

func (failingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (failingHandler) Handle(context.Context, slog.Record) error { return errors.New("no") }

func TestSlogCountsHandlerErrorsAndDefaultsToDefaultLogger(t *testing.T) {
	s := NewSlog(slog.New(failingHandler{}))
	s.Record(context.Background(), Event{Outcome: OK})
	//lint:ignore SA1012 a nil context must not panic
	s.Record(nil, Event{Outcome: Failed})
	if s.Errors() != 2 {
		t.Fatalf("Errors() = %d, want 2", s.Errors())
	}

	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	defer slog.SetDefault(old)
	NewSlog(nil).Record(context.Background(), Event{RequestID: "via-default", Outcome: Denied})
	if recs := decodeLines(t, &buf); len(recs) != 1 || recs[0]["request_id"] != "via-default" {
		t.Fatalf("default logger got %v", recs)
	}
}
