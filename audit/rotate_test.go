package audit

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// rotLog writes n events with ids 0..n-1 through a rotating sink (its
// options o, plus opts) on dir/audit.jsonl, and returns the path.
func rotLog(t *testing.T, dir string, from, n int, o RotateOptions, opts ...JSONLOption) string {
	t.Helper()
	path := filepath.Join(dir, "audit.jsonl")
	var (
		mu   sync.Mutex // OnError runs in the writer and in the maintenance goroutine
		errs []error
	)
	onErr := func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
	j, err := OpenJSONL(path, append([]JSONLOption{SyncNever(), Rotate(o), OnError(onErr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < from+n; i++ {
		e := sampleEvent(strconv.Itoa(i))
		e.Path = "project/node_modules/some-package/lib/file" + strconv.Itoa(i) + ".js"
		j.Record(context.Background(), e)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 0 {
		t.Fatalf("sink errors: %v", errs)
	}
	return path
}

// scanAll reads the whole log at path with ScanLog, failing on anything bad.
func scanAll(t *testing.T, path string) []string {
	t.Helper()
	var ids []string
	err := ScanLog(path, func(e Event) error {
		ids = append(ids, e.RequestID)
		return nil
	}, func(file string, err error) error {
		t.Errorf("%s: %v", filepath.Base(file), err)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func seq(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return out
}

// TestRotateCompressesAndReadsBack: a log past its size rotates; every
// rotated file is compressed (nothing plain or temporary left) and the whole
// log, compressed files first, reads back every event in order.
func TestRotateCompressesAndReadsBack(t *testing.T) {
	dir := t.TempDir()
	path := rotLog(t, dir, 0, 3000, RotateOptions{MaxSize: 64 << 10, Grace: -1})
	files := names(t, dir)
	zst := 0
	for _, n := range files {
		switch {
		case n == "audit.jsonl":
		case strings.HasPrefix(n, "audit-") && strings.HasSuffix(n, ".jsonl.zst"):
			zst++
		default:
			t.Errorf("unexpected file %s", n)
		}
	}
	if zst < 5 {
		t.Fatalf("%d compressed rotated files, want several: %v", zst, files)
	}
	if ids := scanAll(t, path); !slices.Equal(ids, seq(0, 3000)) {
		t.Fatalf("read back %d events, want 3000 in order", len(ids))
	}
	// The current file stays within the size.
	if fi, _ := os.Stat(path); fi.Size() > 64<<10 {
		t.Errorf("current file %d bytes, over the size", fi.Size())
	}
}

// TestRotateBoundsTotalAndCount: the oldest rotated files are removed first,
// until they fit MaxTotal and MaxFiles; what is left is the newest events, in
// order, up to the last.
func TestRotateBoundsTotalAndCount(t *testing.T) {
	for _, o := range []RotateOptions{
		{MaxSize: 32 << 10, Grace: -1, MaxTotal: 6 << 10},
		{MaxSize: 32 << 10, Grace: -1, MaxFiles: 2},
		{MaxSize: 32 << 10, Grace: -1, MaxFiles: -1},
	} {
		dir := t.TempDir()
		path := rotLog(t, dir, 0, 4000, o)
		bs, _, err := listBackups(path)
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for _, b := range bs {
			total += b.size
		}
		switch {
		case o.MaxTotal > 0 && (total > o.MaxTotal || len(bs) == 0):
			t.Errorf("%+v: %d rotated files of %d bytes", o, len(bs), total)
		case o.MaxFiles > 0 && len(bs) != o.MaxFiles, o.MaxFiles < 0 && len(bs) != 0:
			t.Errorf("%+v: %d rotated files: %v", o, len(bs), names(t, dir))
		}
		ids := scanAll(t, path)
		if len(ids) == 0 || len(ids) == 4000 {
			t.Fatalf("%+v: %d events left", o, len(ids))
		}
		first, _ := strconv.Atoi(ids[0])
		if !slices.Equal(ids, seq(first, 4000)) {
			t.Errorf("%+v: the events left are not the newest in order: %v...", o, ids[:3])
		}
	}
}

// TestRotateLeavesRestingFilesToTheNextSink: a rotated file still in its
// Grace at Close stays plain and reads; the next sink on the path compresses
// it. A compressed file beside its plain one (a compression interrupted
// before the removal) is read once, and the plain one removed.
func TestRotateLeavesRestingFilesToTheNextSink(t *testing.T) {
	dir := t.TempDir()
	path := rotLog(t, dir, 0, 1000, RotateOptions{MaxSize: 64 << 10, Grace: time.Hour})
	bs, _, _ := listBackups(path)
	if len(bs) == 0 || bs[0].plain == "" || bs[0].zst != "" {
		t.Fatalf("rotated files at Close: %v", names(t, dir))
	}
	// A compression interrupted after its rename.
	if err := compressFile(bs[0].plain); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bs[0].plain, []byte("not read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ids := scanAll(t, path); !slices.Equal(ids, seq(0, 1000)) {
		t.Fatalf("read %d events, want 1000 in order", len(ids))
	}
	rotLog(t, dir, 1000, 1, RotateOptions{MaxSize: 64 << 10, Grace: -1})
	for _, n := range names(t, dir) {
		if n != "audit.jsonl" && !strings.HasSuffix(n, ".zst") {
			t.Errorf("left plain after the next sink: %s", n)
		}
	}
	if ids := scanAll(t, path); !slices.Equal(ids, seq(0, 1001)) {
		t.Fatalf("read %d events, want 1001 in order", len(ids))
	}
}

// TestScanLogReportsTornFiles: a compressed rotated file cut short, and a
// plain one with a torn line, are reported with their names; the events
// before the cut, and every other file, still read.
func TestScanLogReportsTornFiles(t *testing.T) {
	dir := t.TempDir()
	path := rotLog(t, dir, 0, 3000, RotateOptions{MaxSize: 64 << 10, Grace: -1})
	files, err := LogFiles(path)
	if err != nil || len(files) < 3 {
		t.Fatalf("LogFiles = %v, %v", files, err)
	}
	cut := files[1]
	fi, _ := os.Stat(cut)
	if err := os.Truncate(cut, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	// A crash mid-line, then more appended.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"time":"2025-01-02T03:04:05Z","request_id":"to`)
	f.Write(AppendJSON(nil, sampleEvent("after")))
	f.Close()
	var bad []string
	var ids []string
	err = ScanLog(path, func(e Event) error {
		ids = append(ids, e.RequestID)
		return nil
	}, func(file string, err error) error {
		bad = append(bad, filepath.Base(file)+": "+err.Error())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 2 || !strings.HasPrefix(bad[0], filepath.Base(cut)) || !strings.Contains(bad[1], "line") {
		t.Fatalf("reported %q", bad)
	}
	if len(ids) < 1000 || ids[len(ids)-1] != "after" || !slices.Contains(ids, "0") {
		t.Fatalf("read %d events, last %q", len(ids), ids[len(ids)-1])
	}
	// A callback's error stops the scan.
	stop := errors.New("stop")
	if err := ScanLog(path, func(Event) error { return stop }, func(string, error) error { return nil }); err != stop {
		t.Fatalf("ScanLog with a failing callback = %v", err)
	}
}

// TestRotateFollowsAnotherProcess: when another writer rotates the file, a
// sink's next event (after Recheck) lands in the new file, not the rotated
// one, and nothing is lost.
func TestRotateFollowsAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	o := RotateOptions{MaxSize: 16 << 10, Grace: -1, Recheck: -1}
	long, err := OpenJSONL(path, SyncNever(), Rotate(o))
	if err != nil {
		t.Fatal(err)
	}
	long.Record(context.Background(), sampleEvent("long-1"))
	rotLog(t, dir, 0, 500, o)
	long.Record(context.Background(), sampleEvent("long-2"))
	if err := long.Close(); err != nil {
		t.Fatal(err)
	}
	cur, err := ReadJSONL(mustOpen(t, path))
	if err != nil || len(cur) == 0 || cur[len(cur)-1].RequestID != "long-2" {
		t.Fatalf("current file: %d events, %v", len(cur), err)
	}
	ids := scanAll(t, path)
	if len(ids) != 502 || ids[0] != "long-1" {
		t.Fatalf("read %d events, first %q", len(ids), ids[0])
	}
}

func mustOpen(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestOpenLogFileRefusesHugeWindow checks that a compressed file whose header
// asks for a window past maxLogWindow is refused, not decoded.
func TestOpenLogFileRefusesHugeWindow(t *testing.T) {
	var buf bytes.Buffer
	enc, err := zstd.NewWriter(&buf, zstd.WithWindowSize(2*maxLogWindow), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	line := `{"time":"2026-11-28T10:45:00Z","request_id":"1","op":"read","path":"a","outcome":"ok"}` + "\n"
	enc.Write([]byte(strings.Repeat(line, 4096))) // past one block: the header keeps the window
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(t.TempDir(), "audit-2026-11-28T10-45-00.000.jsonl.zst")
	if err := os.WriteFile(name, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	rc, err := OpenLogFile(name)
	if err == nil {
		_, err = io.ReadAll(rc)
		rc.Close()
	}
	if err == nil {
		t.Fatal("a file with a window past maxLogWindow decoded")
	}
}
