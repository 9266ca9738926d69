package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestRequestTag(t *testing.T) {
	ctx := context.Background()
	if got := RequestTag(ctx); got != "" {
		t.Fatalf("untagged context: got %q", got)
	}
	if got := RequestTag(WithRequestTag(ctx, "mcp:1")); got != "mcp:1" {
		t.Fatalf("got %q, want mcp:1", got)
	}
	long := strings.Repeat("x", 1000)
	if got := RequestTag(WithRequestTag(ctx, long)); len(got) != maxTagLen {
		t.Fatalf("long tag kept %d bytes, want %d", len(got), maxTagLen)
	}
}

func TestTagInSinks(t *testing.T) {
	e := Event{RequestID: "r", Op: "read", Path: "a", Outcome: OK, Tag: "mcp:s:read#1"}
	var buf bytes.Buffer
	NewSlog(slog.New(slog.NewJSONHandler(&buf, nil))).Record(context.Background(), e)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["tag"] != "mcp:s:read#1" {
		t.Fatalf("slog record tag %v, want mcp:s:read#1: %s", rec["tag"], buf.String())
	}
	line, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSONL(bytes.NewReader(line))
	if err != nil || len(back) != 1 || back[0].Tag != e.Tag {
		t.Fatalf("JSONL round trip of the tag: %v %+v", err, back)
	}
}

func TestDefaultTag(t *testing.T) {
	r := NewRing(4)
	s := DefaultTag(r, "run-1")
	s.Record(context.Background(), Event{RequestID: "a"})
	s.Record(context.Background(), Event{RequestID: "b", Tag: "mcp:7"})
	evs := r.Events()
	if evs[0].Tag != "run-1" || evs[1].Tag != "mcp:7" {
		t.Fatalf("tags %q, %q", evs[0].Tag, evs[1].Tag)
	}
}
