package audit

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// rawEvent is an event on a name that is not UTF-8.
func rawEvent(id, name string) Event {
	e := sampleEvent(id)
	e.Path, e.GuestPath = "src/"+name, name
	return e
}

// TestRawPathsPrintApart: two names that differ only in a byte that is not
// UTF-8 are written apart, in internal/termsafe's escaped form, by the JSONL
// sink (plain and compact) and the slog sink, and read back as their bytes.
// Before, JSON made each byte U+FFFD: both names printed "caf\ufffd".
func TestRawPathsPrintApart(t *testing.T) {
	a, b := rawEvent("1", "caf\xe9"), rawEvent("2", "caf\xe8")
	la, lb := string(AppendJSON(nil, a)), string(AppendJSON(nil, b))
	for _, c := range []struct{ line, want string }{{la, `caf\\xe9`}, {lb, `caf\\xe8`}} {
		if strings.Contains(c.line, `\ufffd`) || !strings.Contains(c.line, `"path":"src/`+c.want+`"`) ||
			!strings.Contains(c.line, `"guest_path":"`+c.want+`"`) {
			t.Errorf("line %s; want the paths as %s", c.line, c.want)
		}
	}
	if la == strings.Replace(lb, `"2"`, `"1"`, 1) {
		t.Error("two names print the same")
	}
	// A valid name is written as before, and a path with a backslash (which
	// no name holds) escaped, so that it never reads as an escaped name.
	ok := sampleEvent("3")
	if got, want := string(AppendJSON(nil, ok)), `"path":"src/main.go","guest_path":"main.go"`; !strings.Contains(got, want) {
		t.Errorf("valid names: %s; want %s", got, want)
	}
	lit := rawEvent("4", `caf\xe9`)
	lit.Dest = "d\xff"
	evs := []Event{a, b, ok, lit, a, b}
	for _, opts := range [][]JSONLOption{nil, {Compact(time.Hour)}} {
		got := readEvents(t, writeLog(t, evs, opts...))
		if len(got) != len(evs) {
			t.Fatalf("%d events read back, want %d", len(got), len(evs))
		}
		byID := map[string]Event{}
		for _, e := range got {
			byID[e.RequestID] = e
		}
		for _, e := range evs {
			r := byID[e.RequestID]
			if r.Path != e.Path || r.GuestPath != e.GuestPath || r.Dest != e.Dest {
				t.Errorf("compact %v: read back %q %q %q; wrote %q %q %q", opts != nil, r.Path, r.GuestPath, r.Dest, e.Path, e.GuestPath, e.Dest)
			}
		}
	}
	var buf bytes.Buffer
	s := NewSlog(slog.New(slog.NewJSONHandler(&buf, nil)))
	s.Record(context.Background(), a)
	s.Record(context.Background(), b)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"path":"src/caf\\xe9"`) || !strings.Contains(lines[1], `"path":"src/caf\\xe8"`) {
		t.Errorf("slog lines %q; want the paths escaped apart", lines)
	}
}

// TestPathTextRoundTrip: pathBytes undoes pathText, and pathText leaves UTF-8
// without a backslash as it is.
func TestPathTextRoundTrip(t *testing.T) {
	for _, s := range []string{"", "a/b", "caf\xe9", "é/日本", "a\\b", `x\xe9`, "\x00bad", "\u202e\xff", "a\nb"} {
		if got := pathBytes(pathText(s)); got != s {
			t.Errorf("pathBytes(pathText(%q)) = %q", s, got)
		}
	}
	for _, s := range []string{"a/b", "é/日本", "a\nb", "\u202e"} {
		if pathText(s) != s {
			t.Errorf("pathText(%q) = %q; want it as it is", s, pathText(s))
		}
	}
}
