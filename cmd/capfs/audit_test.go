package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/capfs/capfs/audit"
)

// compressAtOnce makes rotated files compressed at rotation for the test.
func compressAtOnce(t *testing.T) {
	old := auditGrace
	auditGrace = -1
	t.Cleanup(func() { auditGrace = old })
}

// readLog reads every event of the log at path, rotated files included,
// failing on anything it cannot read.
func readLog(t *testing.T, path string) []audit.Event {
	t.Helper()
	var evs []audit.Event
	err := audit.ScanLog(path, func(e audit.Event) error {
		evs = append(evs, e)
		return nil
	}, func(file string, err error) error {
		t.Errorf("%s: %v", filepath.Base(file), err)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestAuditFollowsRotation has two sinks on one log, as a long capfs mcp and
// CLI commands beside it would: when the second rotates the file, the first's
// next event lands in the current file, not in a rotated one that rotation
// later compresses or removes.
func TestAuditFollowsRotation(t *testing.T) {
	old := auditRecheck
	auditRecheck = 0
	defer func() { auditRecheck = old }()
	compressAtOnce(t)
	d := t.TempDir()
	log := filepath.Join(d, "audit.jsonl")
	st := auditSettings{dest: log, maxSize: "64KiB", maxFiles: 1}
	long, closeLong, err := openAuditSink(st, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	long.Record(t.Context(), audit.Event{RequestID: "long-1", Op: "read", Outcome: audit.Denied})
	busy, closeBusy, err := openAuditSink(st, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 { // refusals are written at once, one line each: the file rotates, and rotates again
		busy.Record(t.Context(), audit.Event{RequestID: strconv.Itoa(i), Op: "stat", Path: strings.Repeat("p", 60), Outcome: audit.Denied})
	}
	if err := closeBusy(); err != nil {
		t.Fatal(err)
	}
	long.Record(t.Context(), audit.Event{RequestID: "long-2", Op: "read", Outcome: audit.Denied})
	if err := closeLong(); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range readAudit(t, log) {
		if e.RequestID == "long-2" {
			found = true
		}
	}
	if !found {
		t.Error("the long-running sink's event after the rotation is not in the current log")
	}
	files, _ := filepath.Glob(filepath.Join(d, "audit*"))
	if len(files) != 2 || !strings.HasSuffix(files[0], ".jsonl.zst") {
		t.Errorf("want the log and 1 compressed rotated file, got %v", files)
	}
}

// npmRun records, through the CLI's sink, what a lazy npm ci does in a run:
// many reads and stats, then the sync-back's mkdirs and writes, a refusal
// among them. It returns the events it recorded.
func npmRun(t *testing.T, sink audit.Sink, tag string, pkgs int) []audit.Event {
	t.Helper()
	var evs []audit.Event
	start := time.Now()
	rec := func(op, p string, o audit.Outcome) {
		e := audit.Event{Time: start.Add(time.Duration(len(evs)) * time.Microsecond), RequestID: fmt.Sprintf("abc-%d", len(evs)),
			Subject: "capfs/run", Op: op, Path: "project/" + p, GuestPath: p, Outcome: o, Duration: 3 * time.Microsecond, Tag: tag}
		if o == audit.Denied {
			e.Code, e.Rule = "fs_permission_denied", "deny-persistence"
		}
		evs = append(evs, e)
		sink.Record(context.Background(), e)
	}
	for i := range pkgs {
		rec("stat", fmt.Sprintf("node_modules/p%d/package.json", i), audit.OK)
		rec("read", fmt.Sprintf("node_modules/p%d/package.json", i), audit.OK)
	}
	for i := range pkgs {
		rec("mkdir", fmt.Sprintf("node_modules/p%d", i), audit.OK)
		rec("write", fmt.Sprintf("node_modules/p%d/index.js", i), audit.OK)
	}
	rec("write", ".git/hooks/post-checkout", audit.Denied)
	return evs
}

// TestAuditCommandAnswersWhatARunChanged: a run written in the compact form
// to a log that rotates (its older files compressed) reads back whole, and
// capfs audit --run last --changes lists exactly the run's changes with their
// decisions, in order; --runs lists both runs.
func TestAuditCommandAnswersWhatARunChanged(t *testing.T) {
	compressAtOnce(t)
	d := t.TempDir()
	log := filepath.Join(d, "audit.jsonl")
	st := auditSettings{dest: log, maxSize: "32KiB", maxFiles: -1}
	sink, closeSink, err := openAuditSink(st, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	first := npmRun(t, sink, "run:1", 300)
	second := npmRun(t, sink, "run:2 checkout", 2000) // run --grants adds to the tag
	if err := closeSink(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(log)
	if !bytes.Contains(data, []byte(`{"bulk":`)) {
		t.Error("the log has no compact record")
	}
	if zst, _ := filepath.Glob(filepath.Join(d, "audit-*.jsonl.zst")); len(zst) == 0 {
		t.Error("the log did not rotate to compressed files")
	}
	if got := readLog(t, log); len(got) != len(first)+len(second) {
		t.Fatalf("read %d events, want %d", len(got), len(first)+len(second))
	}

	var out, errb bytes.Buffer
	if code := execute(t.Context(), environ{}, []string{"--audit", log, "audit", "--json"}, nil, &out, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("capfs audit --json exited %d: %s", code, errb.String())
	}
	if all, err := audit.ReadJSONL(&out); err != nil || len(all) != len(first)+len(second) {
		t.Fatalf("capfs audit --json: %d events, want %d, %v", len(all), len(first)+len(second), err)
	}
	out.Reset()
	if code := execute(t.Context(), environ{}, []string{"--audit", log, "audit", "--run", "last", "--changes"}, nil, &out, &errb); code != 0 {
		t.Fatalf("capfs audit exited %d: %s", code, errb.String())
	}
	var want []string
	for _, e := range second {
		if e.Op != "read" && e.Op != "stat" {
			want = append(want, fmt.Sprintf("%-6s  %-8s %s", e.Outcome, e.Op, e.Path))
		}
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, l := range lines {
		if !strings.Contains(l, want[i]) {
			t.Fatalf("line %d: %q, want %q", i, l, want[i])
		}
	}
	if !strings.Contains(lines[len(lines)-1], "fs_permission_denied") || !strings.Contains(errb.String(), "run:2: 4001 changes (4000 ok, 1 denied, 0 failed)") {
		t.Errorf("last line %q, stderr %q", lines[len(lines)-1], errb.String())
	}

	out.Reset()
	errb.Reset()
	if code := execute(t.Context(), environ{}, []string{"--audit", log, "audit", "--runs"}, nil, &out, &errb); code != 0 {
		t.Fatalf("capfs audit --runs exited %d: %s", code, errb.String())
	}
	if runs := out.String(); !strings.HasPrefix(runs, "run:1 ") || !strings.Contains(runs, "\nrun:2 ") ||
		!strings.Contains(runs, "1201 events, 601 changes, 1 denied") {
		t.Errorf("--runs:\n%s", runs)
	}
}

// TestAuditCommandSkipsTornFiles: a compressed rotated file cut short and a
// torn last line are reported on stderr, not fatal; every other event shows.
func TestAuditCommandSkipsTornFiles(t *testing.T) {
	compressAtOnce(t)
	d := t.TempDir()
	log := filepath.Join(d, "audit.jsonl")
	sink, closeSink, err := openAuditSink(auditSettings{dest: log, maxSize: "16KiB", maxFiles: -1}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	evs := npmRun(t, sink, "run:1", 1000)
	if err := closeSink(); err != nil {
		t.Fatal(err)
	}
	zst, _ := filepath.Glob(filepath.Join(d, "audit-*.jsonl.zst"))
	if len(zst) < 2 {
		t.Fatalf("rotated files: %v", zst)
	}
	cut := zst[len(zst)-1]
	fi, _ := os.Stat(cut)
	if err := os.Truncate(cut, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"time":"2026-01-01T00:00:00Z","request_id":"torn`)
	f.Close()
	var out, errb bytes.Buffer
	if code := execute(t.Context(), environ{}, []string{"--audit", log, "audit", "--json"}, nil, &out, &errb); code != 0 {
		t.Fatalf("capfs audit exited %d: %s", code, errb.String())
	}
	got, err := audit.ReadJSONL(&out)
	if err != nil || len(got) == 0 || len(got) >= len(evs) {
		t.Fatalf("%d of %d events, %v", len(got), len(evs), err)
	}
	read := map[string]bool{}
	for _, e := range got {
		read[e.RequestID] = true
	}
	for _, e := range evs[len(evs)-2:] { // the refusal (written first) and the last write (in the current file)
		if !read[e.RequestID] {
			t.Errorf("event %s not read", e.RequestID)
		}
	}
	msg := errb.String()
	if strings.Count(msg, "(skipped)") != 2 || !strings.Contains(msg, filepath.Base(cut)) || !strings.Contains(msg, "audit.jsonl: audit: JSONL line") {
		t.Errorf("stderr:\n%s", msg)
	}
}

// TestAuditRotationFlags: the rotation flags map onto audit.RotateOptions
// (0 rotated files keeps none; none lifts the total's bound or rotation).
func TestAuditRotationFlags(t *testing.T) {
	for _, c := range []struct {
		st   auditSettings
		want *audit.RotateOptions
	}{
		{auditSettings{maxFiles: -1}, &audit.RotateOptions{MaxSize: 16 << 20, MaxFiles: 100, MaxTotal: 64 << 20}},
		{auditSettings{maxSize: "1MiB", maxFiles: 0, maxTotal: "8MiB"}, &audit.RotateOptions{MaxSize: 1 << 20, MaxFiles: -1, MaxTotal: 8 << 20}},
		{auditSettings{maxFiles: 5, maxTotal: "none"}, &audit.RotateOptions{MaxSize: 16 << 20, MaxFiles: 5}},
		{auditSettings{maxSize: "none", maxFiles: -1}, nil},
	} {
		got, err := rotateOptions(c.st)
		if err != nil {
			t.Fatal(err)
		}
		if got != nil {
			got.Recheck, got.Grace = 0, 0
		}
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%+v: %+v, want %+v", c.st, got, c.want)
		}
	}
	if _, err := rotateOptions(auditSettings{maxTotal: "lots"}); err == nil || exitCodeOf(err) != exitUsage {
		t.Errorf("--audit-max-total lots: %v", err)
	}
}

// TestAuditCommandBoundsZstdBomb: a rotated file that is a zstd bomb (20 MiB
// of blank lines from a file of a few KiB, past the 16 MiB bound of a log
// rotated at 1 MiB; 256 MiB for capfs's default 16 MiB) is read to the bound, reported once on stderr and
// skipped; every other event shows, and --run last still finds the last run.
// Before the bound, capfs audit decompressed the whole file and said nothing.
func TestAuditCommandBoundsZstdBomb(t *testing.T) {
	compressAtOnce(t)
	// A 1 MiB floor bounds each file at 16 MiB (256 MiB by default): the
	// bomb below is 20 MiB, not 300.
	old := auditReadFloor
	auditReadFloor = 1 << 20
	t.Cleanup(func() { auditReadFloor = old })
	d := t.TempDir()
	log := filepath.Join(d, "audit.jsonl")
	sink, closeSink, err := openAuditSink(auditSettings{dest: log, maxSize: "32KiB", maxFiles: -1}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	evs := npmRun(t, sink, "run:1", 300)
	if err := closeSink(); err != nil {
		t.Fatal(err)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	line := func(id string) string {
		return `{"time":"2000-01-01T00:00:00Z","request_id":"` + id + `","op":"write","path":"x","outcome":"ok","tag":"run:bomb"}` + "\n"
	}
	bomb := enc.EncodeAll([]byte(line("bomb-before")), nil)
	blank := enc.EncodeAll([]byte(strings.Repeat(" ", 1<<20-1)+"\n"), nil)
	bomb = append(bomb, bytes.Repeat(blank, 20)...)
	bomb = enc.EncodeAll([]byte(line("bomb-after")), bomb)
	name := "audit-2000-01-01T00-00-00.000.jsonl.zst"
	if err := os.WriteFile(filepath.Join(d, name), bomb, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := execute(t.Context(), environ{}, []string{"--audit", log, "audit", "--json"}, nil, &out, &errb); code != 0 {
		t.Fatalf("capfs audit exited %d: %s", code, errb.String())
	}
	got, err := audit.ReadJSONL(&out)
	if err != nil || len(got) != len(evs)+1 || got[0].RequestID != "bomb-before" {
		t.Errorf("read %d events (%v), want the %d of the log and the bomb's first", len(got), err, len(evs))
	}
	if msg := errb.String(); strings.Count(msg, "(skipped)") != 1 || !strings.Contains(msg, name) || !strings.Contains(msg, "decompresses past") {
		t.Errorf("stderr:\n%s", msg)
	}
	out.Reset()
	errb.Reset()
	if code := execute(t.Context(), environ{}, []string{"--audit", log, "audit", "--run", "last", "--changes"}, nil, &out, &errb); code != 0 {
		t.Fatalf("capfs audit --run last exited %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "run:1: 601 changes (600 ok, 1 denied, 0 failed)") {
		t.Errorf("--run last: stderr %q", errb.String())
	}
}

// TestAuditRunWindow: capfs audit --run prints a run's events in time order
// holding at most runWindow of them, whatever the run's length; events out of
// order by less than the window come out sorted, equal times in log order.
func TestAuditRunWindow(t *testing.T) {
	var got []audit.Event
	r := &runEvents{print: func(e audit.Event) { got = append(got, e) }}
	start := time.Unix(1700000000, 0)
	n := 5 * runWindow
	for i := range n {
		j := i ^ 1 // pairs swapped: out of time order
		if i%1000 == 0 {
			j = i - 500 // and some events 500 back
		}
		r.add(audit.Event{Time: start.Add(time.Duration(j/2) * time.Millisecond), RequestID: strconv.Itoa(i), Outcome: audit.OK})
	}
	r.flush()
	if r.most > runWindow {
		t.Errorf("held %d events at once, want at most %d", r.most, runWindow)
	}
	if len(got) != n {
		t.Fatalf("printed %d events, want %d", len(got), n)
	}
	for i := 1; i < n; i++ {
		a, b := got[i-1], got[i]
		ai, _ := strconv.Atoi(a.RequestID)
		bi, _ := strconv.Atoi(b.RequestID)
		if b.Time.Before(a.Time) || b.Time.Equal(a.Time) && bi < ai {
			t.Fatalf("event %d (%s) printed before %d (%s)", ai, a.Time, bi, b.Time)
		}
	}
	if s := r.summary(false); s != fmt.Sprintf("%d events (%d ok, 0 denied, 0 failed)", n, n) {
		t.Errorf("summary %q", s)
	}
}
