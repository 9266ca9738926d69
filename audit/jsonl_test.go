package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Test seams: count fsyncs, drive the interval syncer by hand.
func withSyncFunc(fn func(*os.File) error) JSONLOption {
	return func(c *jsonlConfig) { c.sync = fn }
}

func withTicker(c <-chan time.Time, stop, ticked func()) JSONLOption {
	return func(cfg *jsonlConfig) {
		cfg.tick = func() (<-chan time.Time, func()) { return c, stop }
		cfg.ticked = ticked
	}
}

func sampleEvent(id string) Event {
	return Event{
		Time:      time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC),
		RequestID: id,
		Subject:   "agent-run:c1/r1",
		Op:        "write",
		Path:      "src/main.go",
		GuestPath: "main.go",
		Outcome:   OK,
		Rule:      "allow-all",
		Duration:  1500 * time.Microsecond,
	}
}

func readEvents(t *testing.T, path string) []Event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := ReadJSONL(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("ReadJSONL: %v", err)
	}
	return evs
}

func TestJSONLConcurrentWritersWriteWholeLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	j, err := OpenJSONL(path, SyncNever())
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, per = 8, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				e := sampleEvent(fmt.Sprintf("g%d-%d", g, i))
				// Varying lengths make torn or interleaved writes show up as bad JSON.
				e.GuestPath = strings.Repeat("x", (g*37+i)%300)
				j.Record(context.Background(), e)
			}
		}()
	}
	wg.Wait()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if j.Written() != goroutines*per || j.Errors() != 0 {
		t.Fatalf("Written() = %d, Errors() = %d; want %d and 0", j.Written(), j.Errors(), goroutines*per)
	}
	evs := readEvents(t, path)
	if len(evs) != goroutines*per {
		t.Fatalf("file holds %d events, want %d", len(evs), goroutines*per)
	}
	seen := map[string]bool{}
	for _, e := range evs {
		if seen[e.RequestID] {
			t.Fatalf("request %s written twice", e.RequestID)
		}
		seen[e.RequestID] = true
		var g, i int
		if _, err := fmt.Sscanf(e.RequestID, "g%d-%d", &g, &i); err != nil {
			t.Fatalf("bad request id %q", e.RequestID)
		}
		if want := strings.Repeat("x", (g*37+i)%300); e.GuestPath != want {
			t.Fatalf("event %s: guest path of length %d, want %d", e.RequestID, len(e.GuestPath), len(want))
		}
	}
}

// TestJSONLHelperProcess is not a test: TestJSONLProcessesAppendWholeLines runs the
// test binary with it selected to get a second writer process.
func TestJSONLHelperProcess(t *testing.T) {
	path := os.Getenv("CAPFS_AUDIT_HELPER_FILE")
	if path == "" {
		t.Skip("helper process only")
	}
	n, _ := strconv.Atoi(os.Getenv("CAPFS_AUDIT_HELPER_N"))
	j, err := OpenJSONL(path, SyncNever())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		e := sampleEvent(fmt.Sprintf("p%d-%d", os.Getpid(), i))
		e.GuestPath = strings.Repeat("y", i%400)
		j.Record(context.Background(), e)
	}
	if err := j.Close(); err != nil || j.Errors() != 0 {
		t.Fatalf("Close: %v, Errors() = %d", err, j.Errors())
	}
}

func TestJSONLProcessesAppendWholeLines(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	const n = 300
	var cmds []*exec.Cmd
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestJSONLHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "CAPFS_AUDIT_HELPER_FILE="+path, "CAPFS_AUDIT_HELPER_N="+strconv.Itoa(n))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("helper output: %s", out.String())
			}
		})
		cmds = append(cmds, cmd)
	}
	j, err := OpenJSONL(path, SyncNever())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		e := sampleEvent(fmt.Sprintf("main-%d", i))
		e.GuestPath = strings.Repeat("z", (i*7)%500)
		j.Record(context.Background(), e)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper process: %v", err)
		}
	}
	evs := readEvents(t, path)
	if len(evs) != 3*n {
		t.Fatalf("file holds %d events, want %d", len(evs), 3*n)
	}
	perWriter := map[string]int{}
	for _, e := range evs {
		perWriter[e.RequestID[:strings.IndexByte(e.RequestID, '-')]]++
	}
	if len(perWriter) != 3 {
		t.Fatalf("events from %d writers, want 3: %v", len(perWriter), perWriter)
	}
	for w, c := range perWriter {
		if c != n {
			t.Fatalf("writer %s: %d events, want %d", w, c, n)
		}
	}
}

func TestJSONLLinesAreVisibleBeforeClose(t *testing.T) {
	for name, opt := range map[string]JSONLOption{
		"every": SyncEvery(), "interval": SyncInterval(time.Hour), "never": SyncNever(),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			j, err := OpenJSONL(path, opt)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			for i := range 3 {
				j.Record(context.Background(), sampleEvent(fmt.Sprint(i)))
				// A second reader, opened afresh, sees the line at once.
				evs := readEvents(t, path)
				if len(evs) != i+1 || evs[i] != sampleEvent(fmt.Sprint(i)) {
					t.Fatalf("after %d records the file holds %+v", i+1, evs)
				}
			}
		})
	}
}

func TestJSONLSyncEveryFsyncsEachEvent(t *testing.T) {
	var syncs atomic.Int64
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	j, err := OpenJSONL(path, SyncEvery(), withSyncFunc(func(f *os.File) error {
		syncs.Add(1)
		return f.Sync()
	}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		j.Record(context.Background(), sampleEvent(fmt.Sprint(i)))
		if got := syncs.Load(); got != int64(i+1) {
			t.Fatalf("after %d records: %d fsyncs", i+1, got)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if syncs.Load() != 6 {
		t.Fatalf("Close did not fsync: %d fsyncs", syncs.Load())
	}
	if evs := readEvents(t, path); len(evs) != 5 {
		t.Fatalf("%d events after Close, want 5", len(evs))
	}
}

func TestJSONLSyncNeverFsyncsOnlyOnRequest(t *testing.T) {
	var syncs atomic.Int64
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	j, err := OpenJSONL(path, SyncNever(), withSyncFunc(func(f *os.File) error {
		syncs.Add(1)
		return f.Sync()
	}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		j.Record(context.Background(), sampleEvent(fmt.Sprint(i)))
	}
	if syncs.Load() != 0 {
		t.Fatalf("SyncNever: %d fsyncs before Sync", syncs.Load())
	}
	if err := j.Sync(); err != nil || syncs.Load() != 1 {
		t.Fatalf("Sync: %v, %d fsyncs", err, syncs.Load())
	}
	if err := j.Close(); err != nil || syncs.Load() != 2 {
		t.Fatalf("Close: %v, %d fsyncs", err, syncs.Load())
	}
	if evs := readEvents(t, path); len(evs) != 5 {
		t.Fatalf("%d events after Close, want 5", len(evs))
	}
}

func TestJSONLSyncIntervalFsyncsOnlyWhenDirty(t *testing.T) {
	var syncs atomic.Int64
	tick, handled := make(chan time.Time), make(chan struct{})
	var tickerStopped atomic.Bool
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	j, err := OpenJSONL(path, SyncInterval(time.Hour), withTicker(tick, func() { tickerStopped.Store(true) }, func() { handled <- struct{}{} }),
		withSyncFunc(func(f *os.File) error {
			syncs.Add(1)
			return f.Sync()
		}))
	if err != nil {
		t.Fatal(err)
	}
	// One tick, and wait until the syncer has handled it.
	settle := func() { tick <- time.Time{}; <-handled }
	settle()
	if syncs.Load() != 0 {
		t.Fatalf("%d fsyncs with nothing written", syncs.Load())
	}
	j.Record(context.Background(), sampleEvent("a"))
	j.Record(context.Background(), sampleEvent("b"))
	if syncs.Load() != 0 {
		t.Fatalf("Record fsynced under SyncInterval (%d)", syncs.Load())
	}
	settle()
	if syncs.Load() != 1 {
		t.Fatalf("after a tick: %d fsyncs, want 1", syncs.Load())
	}
	settle()
	if syncs.Load() != 1 {
		t.Fatalf("ticks with nothing new written fsynced: %d fsyncs", syncs.Load())
	}
	j.Record(context.Background(), sampleEvent("c"))
	settle()
	if syncs.Load() != 2 {
		t.Fatalf("after another write and tick: %d fsyncs, want 2", syncs.Load())
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if syncs.Load() != 3 || !tickerStopped.Load() {
		t.Fatalf("Close: %d fsyncs (want 3), ticker stopped %v", syncs.Load(), tickerStopped.Load())
	}
	if evs := readEvents(t, path); len(evs) != 3 {
		t.Fatalf("%d events after Close, want 3", len(evs))
	}
}

func TestJSONLDefaultPolicyWritesEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	j, err := OpenJSONL(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		j.Record(context.Background(), sampleEvent(fmt.Sprint(i)))
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if evs := readEvents(t, path); len(evs) != 10 {
		t.Fatalf("%d events, want 10", len(evs))
	}
}

func TestJSONLCreatesPrivateFileAndAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	j, err := OpenJSONL(path, SyncNever())
	if err != nil {
		t.Fatal(err)
	}
	j.Record(context.Background(), sampleEvent("first"))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("new file has mode %v, want 0600", st.Mode().Perm())
	}
	j, err = OpenJSONL(path, SyncNever())
	if err != nil {
		t.Fatal(err)
	}
	j.Record(context.Background(), sampleEvent("second"))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	evs := readEvents(t, path)
	if len(evs) != 2 || evs[0].RequestID != "first" || evs[1].RequestID != "second" {
		t.Fatalf("reopening did not append: %+v", evs)
	}
	if _, err := OpenJSONL(filepath.Join(path, "x")); err == nil {
		t.Fatal("OpenJSONL under a regular file succeeded")
	}
}

func TestJSONLErrorsAreCountedAndReported(t *testing.T) {
	var mu sync.Mutex
	var reported []error
	onErr := OnError(func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() })
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	boom := errors.New("disk on fire")
	var failSync atomic.Bool
	j, err := OpenJSONL(path, SyncEvery(), onErr, withSyncFunc(func(f *os.File) error {
		if failSync.Load() {
			return boom
		}
		return f.Sync()
	}))
	if err != nil {
		t.Fatal(err)
	}
	// An event JSON cannot encode: nothing is written.
	bad := sampleEvent("bad")
	bad.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	j.Record(context.Background(), bad)
	if j.Errors() != 1 || j.Written() != 0 {
		t.Fatalf("unencodable event: Errors() = %d, Written() = %d", j.Errors(), j.Written())
	}
	// A failing fsync.
	failSync.Store(true)
	j.Record(context.Background(), sampleEvent("unsynced"))
	if j.Errors() != 2 || j.Written() != 1 {
		t.Fatalf("failed fsync: Errors() = %d, Written() = %d", j.Errors(), j.Written())
	}
	failSync.Store(false)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// After Close.
	j.Record(context.Background(), sampleEvent("late"))
	if j.Errors() != 3 {
		t.Fatalf("record after Close: Errors() = %d, want 3", j.Errors())
	}
	if err := j.Close(); !errors.Is(err, ErrSinkClosed) || !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second Close = %v, want ErrSinkClosed", err)
	}
	if err := j.Sync(); !errors.Is(err, ErrSinkClosed) {
		t.Fatalf("Sync after Close = %v, want ErrSinkClosed", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 3 || !errors.Is(reported[1], boom) || !errors.Is(reported[2], ErrSinkClosed) {
		t.Fatalf("reported errors: %v", reported)
	}
	if evs := readEvents(t, path); len(evs) != 1 || evs[0].RequestID != "unsynced" {
		t.Fatalf("file holds %+v, want only the unsynced event", evs)
	}
}

func TestJSONLWriteFailureIsCounted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	var got atomic.Value
	j, err := OpenJSONL(path, SyncNever(), OnError(func(err error) { got.Store(err) }))
	if err != nil {
		t.Fatal(err)
	}
	// Pull the file out from under the sink: the write fails.
	if err := j.f.Close(); err != nil {
		t.Fatal(err)
	}
	j.Record(context.Background(), sampleEvent("x"))
	if j.Errors() != 1 || j.Written() != 0 {
		t.Fatalf("Errors() = %d, Written() = %d; want 1 and 0", j.Errors(), j.Written())
	}
	if err, _ := got.Load().(error); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("reported %v, want a closed-file error", err)
	}
}

func TestReadJSONL(t *testing.T) {
	e1, e2 := sampleEvent("1"), sampleEvent("2")
	e2.Outcome, e2.Code, e2.Dest, e2.Grant = Denied, "fs_permission_denied", "b", "g-1"
	var buf bytes.Buffer
	j := func(e Event) { // encode as the sink does
		line, err := jsonLine(e)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(line)
	}
	j(e1)
	buf.WriteString("\n  \n")
	j(e2)
	evs, err := ReadJSONL(bytes.NewReader(buf.Bytes()))
	if err != nil || len(evs) != 2 || evs[0] != e1 || evs[1] != e2 {
		t.Fatalf("ReadJSONL = %+v, %v", evs, err)
	}
	// Unknown fields are ignored.
	evs, err = ReadJSONL(strings.NewReader(`{"request_id":"x","future_field":1}` + "\n"))
	if err != nil || len(evs) != 1 || evs[0].RequestID != "x" {
		t.Fatalf("unknown field: %+v, %v", evs, err)
	}
	// A torn last line: the events before it and an error naming the line.
	torn := buf.String() + `{"request_id":"3","op":"wr`
	evs, err = ReadJSONL(strings.NewReader(torn))
	if err == nil || !strings.Contains(err.Error(), "line 5") || len(evs) != 2 {
		t.Fatalf("torn line: %d events, %v", len(evs), err)
	}
	// Two values on a line.
	_, err = ReadJSONL(strings.NewReader(`{"request_id":"a"} {"request_id":"b"}`))
	if err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("two values on a line: %v", err)
	}
	if evs, err := ReadJSONL(strings.NewReader("")); err != nil || len(evs) != 0 {
		t.Fatalf("empty input: %+v, %v", evs, err)
	}
}

// jsonLine encodes e the way JSONL.Record does, through a sink on a temporary file.
func jsonLine(e Event) ([]byte, error) {
	dir, err := os.MkdirTemp("", "jsonl")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "a.jsonl")
	j, err := OpenJSONL(path, SyncNever())
	if err != nil {
		return nil, err
	}
	j.Record(context.Background(), e)
	if err := j.Close(); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte(`{"request_id":"1","op":"read","path":"a","outcome":"ok","duration_ns":5}` + "\n"))
	f.Add([]byte("\n\n{}\n{\"time\":\"2025-01-01T00:00:00Z\"}"))
	f.Add([]byte(`{"request_id":"x"} {"request_id":"y"}`))
	f.Add([]byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := ReadJSONL(bytes.NewReader(data))
		if err != nil {
			return
		}
		// What was read writes back and reads again as the same events.
		path := filepath.Join(t.TempDir(), "a.jsonl")
		j, err := OpenJSONL(path, SyncNever())
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
		again := readEvents(t, path)
		if len(again) != len(evs) {
			t.Fatalf("%d events read back, want %d", len(again), len(evs))
		}
		for i := range evs {
			if !again[i].Time.Equal(evs[i].Time) {
				t.Fatalf("event %d: time %v, want %v", i, again[i].Time, evs[i].Time)
			}
			again[i].Time, evs[i].Time = time.Time{}, time.Time{}
			if again[i] != evs[i] {
				t.Fatalf("event %d: %+v, want %+v", i, again[i], evs[i])
			}
		}
	})
}
