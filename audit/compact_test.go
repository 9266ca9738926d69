package audit

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mixedEvents is a run's worth of varied events: several subjects, ops, tags
// and zones; paths sharing prefixes, multi-byte and invalid UTF-8; guest paths
// that are the path's tail and some that are not; refusals, destinations and
// summaries among them; times with a monotonic reading, some going backwards.
func mixedEvents(n int) []Event {
	rng := rand.New(rand.NewPCG(1, 2))
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("X", 5*3600+1800)}
	ops := []string{"read", "stat", "list", "write", "create", "mkdir", "remove"}
	names := []string{"index.js", "package.json", "é/ü.js", "日本.txt", "a\xffb", "x\"y\\z", "lib/\u2028.js"}
	start := time.Now()
	out := make([]Event, n)
	for i := range out {
		pkg := fmt.Sprintf("pkg%d", rng.IntN(40))
		p := "project/node_modules/" + pkg + "/" + names[rng.IntN(len(names))]
		e := Event{
			Time:      start.Add(time.Duration(i*1000-rng.IntN(3000)) * time.Microsecond).In(zones[rng.IntN(3)]),
			RequestID: "a1b2c3d4e5f6-" + strconv.Itoa(i+1),
			Subject:   []string{"capfs/run", "agent-7"}[rng.IntN(2)],
			Op:        ops[rng.IntN(len(ops))],
			Path:      p,
			GuestPath: strings.TrimPrefix(p, "project/"),
			Outcome:   OK,
			Rule:      []string{"", "default"}[rng.IntN(2)],
			Duration:  time.Duration(rng.IntN(200000)),
			Tag:       []string{"", "run-1", "run-2"}[rng.IntN(3)],
		}
		switch rng.IntN(20) {
		case 0:
			e.Outcome, e.Code, e.Rule = Denied, "fs_permission_denied", "deny-secrets"
		case 1:
			e.Outcome, e.Code = Failed, "fs_not_found"
		case 2:
			e.Op, e.Dest = "rename", p+".tmp"
		case 3:
			e.Count = 12
		case 4:
			e.GuestPath = "../elsewhere/" + names[rng.IntN(len(names))]
		case 5:
			e.Path, e.GuestPath = "", "\x00bad"
		}
		out[i] = e
	}
	return out
}

// writeLog writes evs through a JSONL sink with opts and returns the file.
func writeLog(t testing.TB, evs []Event, opts ...JSONLOption) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	j, err := OpenJSONL(path, append([]JSONLOption{SyncNever()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		j.Record(context.Background(), e)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if j.Errors() != 0 || j.Written() != uint64(len(evs)) {
		t.Fatalf("Errors() = %d, Written() = %d, want 0 and %d", j.Errors(), j.Written(), len(evs))
	}
	return path
}

// plainLines is each event as its plain line, sorted: the same for the same
// events in any order.
func plainLines(evs []Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = string(AppendJSON(nil, e))
	}
	slices.Sort(out)
	return out
}

// TestCompactRoundTrip: every event written in the compact form reads back
// with every field as the plain form gives it, and the compact log is smaller
// and made of compact records.
func TestCompactRoundTrip(t *testing.T) {
	evs := mixedEvents(5000)
	plain := readEvents(t, writeLog(t, evs))
	cpath := writeLog(t, evs, Compact(time.Hour))
	compact := readEvents(t, cpath)
	if len(compact) != len(evs) {
		t.Fatalf("%d events read back, want %d", len(compact), len(evs))
	}
	want, got := plainLines(plain), plainLines(compact)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event differs:\n got %s\nwant %s", got[i], want[i])
		}
	}
	data, _ := os.ReadFile(cpath)
	if !bytes.Contains(data, []byte(`{"bulk":`)) {
		t.Fatal("no compact record in the log")
	}
	if lines := bytes.Count(data, []byte("\n")); lines > len(evs)/2 {
		t.Errorf("%d lines for %d events: not compact", lines, len(evs))
	}
}

// TestCompactHoldsUntilSyncAndWritesRefusalsAtOnce: calls are held (up to the
// interval) and written at Sync; a refusal is written at once.
func TestCompactHoldsUntilSyncAndWritesRefusalsAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	j, err := OpenJSONL(path, SyncNever(), Compact(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	for i := range 3 {
		j.Record(ctx, sampleEvent(strconv.Itoa(i)))
	}
	if evs := readEvents(t, path); len(evs) != 0 {
		t.Fatalf("%d events written before the interval or Sync, want 0", len(evs))
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if evs := readEvents(t, path); len(evs) != 3 {
		t.Fatalf("after Sync: %d events, want 3", len(evs))
	}
	j.Record(ctx, sampleEvent("held"))
	d := sampleEvent("refused")
	d.Outcome, d.Code = Denied, "fs_permission_denied"
	j.Record(ctx, d)
	evs := readEvents(t, path)
	if len(evs) != 4 || evs[3].RequestID != "refused" {
		t.Fatalf("after a refusal: %+v", evs)
	}
}

// TestCompactWritesWithinTheInterval: what is held is written when the
// interval ends, without Sync or Close.
func TestCompactWritesWithinTheInterval(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	j, err := OpenJSONL(path, SyncNever(), Compact(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	j.Record(context.Background(), sampleEvent("1"))
	j.Record(context.Background(), sampleEvent("2"))
	for len(readEvents(t, path)) != 2 { // the test's timeout bounds the wait
		time.Sleep(time.Millisecond)
	}
}

// TestCompactRecordsAreCheckedStrictly: a compact record that does not decode
// to events is one bad line, its events all left out, and the lines around it
// still read.
func TestCompactRecordsAreCheckedStrictly(t *testing.T) {
	good := `{"bulk":2,"time":"2025-01-02T03:04:05Z","op":"read","outcome":"ok","events":[[0,0,"r-1",5,0,"a/é",2],[7,2,"2",6,2,"b",2]]}`
	evs, err := ReadJSONL(strings.NewReader(good + "\n"))
	if err != nil || len(evs) != 2 {
		t.Fatalf("good record: %+v, %v", evs, err)
	}
	if e := evs[1]; e.RequestID != "r-2" || e.Path != "a/b" || e.GuestPath != "b" || e.Duration != 6 ||
		!e.Time.Equal(time.Date(2025, 1, 2, 3, 4, 5, 7, time.UTC)) || e.Op != "read" {
		t.Fatalf("second event: %+v", e)
	}
	bad := []string{
		`{"bulk":3,"time":"2025-01-02T03:04:05Z","op":"read","outcome":"ok","events":[[0,0,"r",5,0,"a",0]]}`,                     // count
		`{"bulk":1,"time":"2025-01-02T03:04:05Z","op":"read","outcome":"ok","events":[[0,4,"r",5,0,"a",0]]}`,                     // keep past the end
		`{"bulk":2,"time":"2025-01-02T03:04:05Z","op":"read","outcome":"ok","events":[[0,0,"r",5,0,"é",0],[0,0,"s",5,1,"x",0]]}`, // mid-rune
		`{"bulk":1,"time":"2025-01-02T03:04:05Z","op":"read","outcome":"ok","events":[[0,0,"r",5,0,"a",9]]}`,                     // guest offset
		`{"bulk":1,"time":"2025-01-02T03:04:05Z","op":"read","path":"p","outcome":"ok","events":[[0,0,"r",5,0,"a",0]]}`,          // header path
		`{"bulk":1,"time":"2025-01-02T03:04:05Z","op":"read","outcome":"ok","events":[[0,0,"r",5,0,"a"]]}`,                       // six fields
		`{"bulk":1,"time":"2025-01-02T03:04:05Z","op":"read","outcome":"ok","events":[[0.5,0,"r",5,0,"a",0]]}`,                   // not an integer
		`{"bulk":0,"time":"2025-01-02T03:04:05Z","op":"read","outcome":"ok","events":[]}`,                                        // empty
	}
	for _, b := range bad {
		var skipped []*LineError
		var got []Event
		err := ScanJSONL(strings.NewReader(good+"\n"+b+"\n"+good+"\n"), func(e Event) error {
			got = append(got, e)
			return nil
		}, func(le *LineError) error { skipped = append(skipped, le); return nil })
		if err != nil || len(got) != 4 || len(skipped) != 1 || skipped[0].Line != 2 {
			t.Errorf("%s: %d events, skipped %v, %v", b, len(got), skipped, err)
		}
	}
}

// TestScanJSONLSkipsTornLines: a line cut short by a crash, then appended to
// by the next process, is reported, and the whole event that ends it read;
// what follows it still reads. A torn last line is reported.
func TestScanJSONLSkipsTornLines(t *testing.T) {
	l1, l2 := AppendJSON(nil, sampleEvent("1")), AppendJSON(nil, sampleEvent("2"))
	data := string(l1) + string(l1[:30]) + string(l2) + string(l2) + string(l2[:20])
	var ids []string
	var lines []int
	err := ScanJSONL(strings.NewReader(data), func(e Event) error {
		ids = append(ids, e.RequestID)
		return nil
	}, func(le *LineError) error { lines = append(lines, le.Line); return nil })
	if err != nil || !slices.Equal(ids, []string{"1", "2", "2"}) || !slices.Equal(lines, []int{2, 4}) {
		t.Fatalf("events %v, bad lines %v, %v", ids, lines, err)
	}
}

// TestScanJSONLBoundsTornLineTries: the whole event that ends a bad line is
// read when fewer than maxTailTries torn events come before it, and past that
// the line is skipped whole, so that a hostile line costs a bounded number of
// decodes.
func TestScanJSONLBoundsTornLineTries(t *testing.T) {
	l1, l2 := AppendJSON(nil, sampleEvent("1")), AppendJSON(nil, sampleEvent("2"))
	torn := func(n int) string { return "x" + strings.Repeat(string(l1[:30]), n) + string(l2) }
	for _, c := range []struct {
		tears int
		want  []string
	}{{maxTailTries - 1, []string{"2"}}, {maxTailTries, nil}} {
		var ids []string
		err := ScanJSONL(strings.NewReader(torn(c.tears)), func(e Event) error {
			ids = append(ids, e.RequestID)
			return nil
		}, nil)
		if err != nil || !slices.Equal(ids, c.want) {
			t.Errorf("%d torn events before a whole one: read %v, %v; want %v", c.tears, ids, err, c.want)
		}
	}
}

// FuzzReadCompact: whatever ReadJSONL reads from compact records (or plain
// lines) writes back in the compact form and reads again as the same events.
func FuzzReadCompact(f *testing.F) {
	seed := writeLog(f, mixedEvents(40), Compact(time.Hour))
	data, err := os.ReadFile(seed)
	if err != nil {
		f.Fatal(err)
	}
	for l := range bytes.Lines(data) {
		f.Add(l)
	}
	f.Add([]byte(`{"bulk":2,"time":"2025-01-02T03:04:05Z","op":"read","outcome":"ok","events":[[0,0,"r-1",5,0,"a/é",2],[7,2,"2",6,2,"b","g"]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := ReadJSONL(bytes.NewReader(data))
		if err != nil || len(evs) == 0 {
			return
		}
		path := filepath.Join(t.TempDir(), "a.jsonl")
		j, err := OpenJSONL(path, SyncNever(), Compact(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			j.Record(context.Background(), e)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if j.Errors() != 0 {
			return // an event JSON cannot write back (a time outside years 0-9999)
		}
		want, got := plainLines(evs), plainLines(readEvents(t, path))
		if !slices.Equal(got, want) {
			t.Fatalf("read back:\n%q\nwant\n%q", got, want)
		}
	})
}

// TestCompactRecordExpansionIsBounded: a record whose events each keep a long
// path plus a byte (a few bytes each in the file, a copy of the path each once
// decoded) is refused past maxExpanded, not decoded into gigabytes.
func TestCompactRecordExpansionIsBounded(t *testing.T) {
	const pathLen = 256 << 10
	n := maxExpanded/pathLen + 2
	var b strings.Builder
	fmt.Fprintf(&b, `{"bulk":%d,"time":"2025-01-02T03:04:05Z","op":"read","outcome":"ok","events":[[0,0,"r",5,0,"%s",0]`, n, strings.Repeat("a", pathLen))
	for range n - 1 {
		fmt.Fprintf(&b, `,[0,1,"",5,%d,"b",0]`, pathLen)
	}
	b.WriteString("]}\n")
	if b.Len() > maxJSONLLine {
		t.Fatalf("record of %d bytes: past the line bound", b.Len())
	}
	var got int
	var skipped []*LineError
	err := ScanJSONL(strings.NewReader(b.String()), func(Event) error { got++; return nil },
		func(le *LineError) error { skipped = append(skipped, le); return nil })
	if err != nil || got != 0 || len(skipped) != 1 {
		t.Fatalf("%d events, skipped %v, %v", got, skipped, err)
	}
}
