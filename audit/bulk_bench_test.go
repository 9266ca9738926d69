package audit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// npmCI is a synthetic lazy `npm ci` of n events, as a capfs run records it:
// the sandbox's first look at the project and the old node_modules through
// the lazy layer (stat, list, read; lookups of names not there yet fail with
// fs_not_found), then the sync-back (remove, mkdir, write), one subject and
// one run tag, request ids from one process's counter, paths from the tree's
// root with the guest's path under project/, calls a few to a few hundred
// microseconds apart, neighbouring calls interleaved as the FUSE threads
// interleave them.
func npmCI(n int) []Event {
	rng := rand.New(rand.NewPCG(27, 6))
	words := []string{"core", "utils", "parser", "types", "plugin", "loader", "runtime", "helpers", "cli", "config", "fs", "stream"}
	dirs := []string{"", "lib/", "dist/", "dist/esm/", "dist/cjs/", "src/", "lib/internal/", "types/"}
	var files []string
	for p := 0; len(files) < n; p++ {
		pkg := words[p%len(words)] + "-" + words[(p/len(words))%len(words)] + strconv.Itoa(p/144)
		if p%5 == 0 {
			pkg = "@scope" + strconv.Itoa(p%7) + "/" + pkg
		}
		files = append(files, "node_modules/"+pkg+"/package.json", "node_modules/"+pkg+"/README.md")
		for range 5 + rng.IntN(40) {
			files = append(files, "node_modules/"+pkg+"/"+dirs[rng.IntN(len(dirs))]+words[rng.IntN(len(words))]+strconv.Itoa(rng.IntN(50))+".js")
		}
	}
	type phase struct {
		op, code string
		share    int // per 100 events
	}
	phases := []phase{{"stat", "", 25}, {"list", "", 5}, {"read", "", 10}, {"stat", "fs_not_found", 10},
		{"remove", "", 5}, {"mkdir", "", 5}, {"write", "", 40}}
	start := time.Date(2026, 11, 28, 10, 45, 0, 0, time.UTC)
	t := start
	out := make([]Event, 0, n)
	for _, ph := range phases {
		for i := range n * ph.share / 100 {
			t = t.Add(time.Duration(5+rng.IntN(200)) * time.Microsecond)
			g := files[(i*7)%len(files)]
			e := Event{Time: t, RequestID: "9f3a1c2b7d4e-" + strconv.Itoa(1000+len(out)), Subject: "capfs/run", Op: ph.op,
				Path: "project/" + g, GuestPath: g, Outcome: OK, Duration: time.Duration(3000 + rng.IntN(400000)), Tag: "run:5e2c8a17b3d90f64"}
			if ph.code != "" {
				e.Outcome, e.Code = Failed, ph.code
			}
			out = append(out, e)
		}
	}
	for i := 0; i+1 < len(out); i += 2 { // neighbours interleaved
		if rng.IntN(3) == 0 {
			out[i], out[i+1] = out[i+1], out[i]
		}
	}
	return out
}

// BenchmarkBulkRun writes a synthetic lazy npm ci of 100,000 events as plain
// lines and in the compact form, then compresses each as rotation does, and
// reports the bytes per event of each.
//
//	go test -run '^$' -bench BulkRun -benchtime 3x ./audit
func BenchmarkBulkRun(b *testing.B) {
	evs := npmCI(100_000)
	n := float64(len(evs))
	var sizes [4]int64
	for b.Loop() {
		for i, opts := range [][]JSONLOption{nil, {Compact(time.Hour)}} {
			path := writeLog(b, evs, opts...)
			fi, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := compressFile(path); err != nil {
				b.Fatal(err)
			}
			zi, err := os.Stat(path + ".zst")
			if err != nil {
				b.Fatal(err)
			}
			sizes[2*i], sizes[2*i+1] = fi.Size(), zi.Size()
		}
	}
	b.ReportMetric(float64(sizes[0])/n, "plain-B/event")
	b.ReportMetric(float64(sizes[1])/n, "plain.zst-B/event")
	b.ReportMetric(float64(sizes[2])/n, "compact-B/event")
	b.ReportMetric(float64(sizes[3])/n, "compact.zst-B/event")
}

// TestBulkRunRoundTrip: the benchmark's run reads back whole from its
// compressed compact log, each run's changes answerable.
func TestBulkRunRoundTrip(t *testing.T) {
	evs := npmCI(20_000)
	path := writeLog(t, evs, Compact(time.Hour))
	if err := compressFile(path); err != nil {
		t.Fatal(err)
	}
	backup := backupName(path, time.Now())
	if err := os.Rename(path+".zst", backup+".zst"); err != nil {
		t.Fatal(err)
	}
	var got []Event
	if err := ScanLog(path, func(e Event) error { got = append(got, e); return nil },
		func(f string, err error) error { return fmt.Errorf("%s: %w", filepath.Base(f), err) }); err != nil {
		t.Fatal(err)
	}
	want, have := plainLines(evs), plainLines(got)
	if len(want) != len(have) {
		t.Fatalf("%d events, want %d", len(have), len(want))
	}
	for i := range want {
		if want[i] != have[i] {
			t.Fatalf("event differs:\n got %s\nwant %s", have[i], want[i])
		}
	}
}

// BenchmarkBulkRecord is the cost of one Record of the synthetic run's
// events on a JSONL sink (SyncNever), plain and compact.
func BenchmarkBulkRecord(b *testing.B) {
	evs := npmCI(100_000)
	for _, c := range []struct {
		name string
		opts []JSONLOption
	}{{"plain", nil}, {"compact", []JSONLOption{Compact(time.Hour)}}} {
		b.Run(c.name, func(b *testing.B) {
			j, err := OpenJSONL(filepath.Join(b.TempDir(), "a.jsonl"), append([]JSONLOption{SyncNever()}, c.opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				j.Record(context.Background(), evs[i%len(evs)])
				i++
			}
			if err := j.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
