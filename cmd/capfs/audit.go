package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capfs/capfs/audit"
)

// Audit log defaults: the log rotates when it would pass defaultAuditMaxSize;
// its rotated files are compressed (zstd) and kept while there are at most
// defaultAuditMaxFiles of them taking at most defaultAuditMaxTotal on disk,
// the oldest removed first. Events are written in the compact form (see
// package audit): a lazy npm ci's 177,077 events take about 9 MB as written
// and 2.5 MB once rotated, not 47 (bench/RESULTS.md).
const (
	defaultAuditMaxSize  = 16 << 20
	defaultAuditMaxFiles = 100
	defaultAuditMaxTotal = 64 << 20
)

// auditLevels are the --audit-level values: which outcomes are recorded.
var auditLevels = map[string]func(audit.Outcome) bool{
	"all":    func(audit.Outcome) bool { return true },
	"errors": func(o audit.Outcome) bool { return o != audit.OK },
	"denied": func(o audit.Outcome) bool { return o == audit.Denied },
}

// auditSettings are the audit flags as given.
type auditSettings struct {
	dest     string // a file, "off" or "stderr"
	name     string // dest as the user wrote it, for messages ("": dest)
	maxSize  string // "" = default; "none" = never rotate
	maxFiles int    // -1 = default; 0 = keep no rotated file
	maxTotal string // "" = default; "none" = no bound
	level    string // "" = all
}

// auditRecheck is how often a rotating sink checks that its file is still the
// one at its path (see audit.RotateOptions.Recheck); 0 checks at every write.
// auditGrace is how long a rotated file rests before its compression
// (audit.RotateOptions.Grace: 0 is the default, negative compresses at once).
var (
	auditRecheck = time.Second
	auditGrace   time.Duration
)

// shown is the destination as messages name it: as the user wrote it.
func (st auditSettings) shown() string {
	if st.name != "" {
		return st.name
	}
	return st.dest
}

// auditKeywords are the --audit destinations that are no file.
var auditKeywords = map[string]bool{"off": true, "none": true, "stderr": true, "-": true}

// openAuditSink opens the audit destination: "off" records nothing, "stderr"
// writes JSON Lines to standard error, and a file is appended to by an
// audit.JSONL sink in the compact form, rotated by size (audit.Rotate: the full
// file renamed with a timestamp, compressed in the background, the oldest
// rotated files removed beyond maxFiles and maxTotal). With --audit-max-size
// none, the file is never rotated. A path that is not a regular file
// (/dev/null, a FIFO) is written to as it is, never rotated or fsynced. It
// returns the sink and the function that flushes and closes it.
func openAuditSink(st auditSettings, stderr io.Writer) (audit.Sink, func() error, error) {
	keep := auditLevels["all"]
	if st.level != "" {
		k, ok := auditLevels[st.level]
		if !ok {
			return nil, nil, usageErrorf("--audit-level %s: want all, errors or denied", st.level)
		}
		keep = k
	}
	switch st.dest {
	case "off", "none":
		return audit.Discard, func() error { return nil }, nil
	case "stderr", "-":
		s := &writerSink{w: stderr, keep: keep}
		return s, s.Close, nil
	}
	rot, err := rotateOptions(st)
	if err != nil {
		return nil, nil, err
	}
	// Surface a bad path now, and tell a regular file from /dev/null or a FIFO.
	f, err := os.OpenFile(st.dest, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, usageErrorf("--audit %s: %v (use --audit=off to record nothing)", st.shown(), cause(err))
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, usageErrorf("--audit %s: %v", st.shown(), cause(err))
	}
	if !fi.Mode().IsRegular() {
		s := &writerSink{w: f, keep: keep, closer: f}
		return s, s.Close, nil
	}
	f.Close()
	var fails firstError
	opts := []audit.JSONLOption{audit.Compact(0), audit.OnError(fails.record)}
	if rot != nil {
		opts = append(opts, audit.Rotate(*rot))
	}
	j, err := audit.OpenJSONL(st.dest, opts...)
	if err != nil {
		return nil, nil, usageErrorf("--audit %s: %v", st.shown(), cause(err))
	}
	closeSink := func() error {
		err := j.Close()
		if n := j.Errors(); n > 0 {
			err = errors.Join(err, fmt.Errorf("audit log: %d %s: %v", n, plural(int(n), "failure", "failures"), fails.get()))
		} else if w := fails.get(); w != nil {
			fmt.Fprintf(stderr, "capfs: audit log: %v (no event lost)\n", w) // a rotation's failure
		}
		return err
	}
	if st.level == "" || st.level == "all" {
		return j, closeSink, nil
	}
	return audit.Filter(j, func(e audit.Event) bool { return keep(e.Outcome) }), closeSink, nil
}

// rotateOptions turns the rotation flags into audit.RotateOptions; nil
// under --audit-max-size none.
func rotateOptions(st auditSettings) (*audit.RotateOptions, error) {
	o := &audit.RotateOptions{MaxSize: defaultAuditMaxSize, MaxFiles: defaultAuditMaxFiles,
		MaxTotal: defaultAuditMaxTotal, Recheck: auditRecheck, Grace: auditGrace}
	if o.Recheck == 0 {
		o.Recheck = -1
	}
	if st.maxSize != "" {
		q, err := parseQuota(st.maxSize)
		if err != nil {
			return nil, usageErrorf("--audit-max-size %s: %v", st.maxSize, err)
		}
		if q < 0 {
			return nil, nil
		}
		o.MaxSize = q
	}
	if st.maxTotal != "" {
		q, err := parseQuota(st.maxTotal)
		if err != nil {
			return nil, usageErrorf("--audit-max-total %s: %v", st.maxTotal, err)
		}
		o.MaxTotal = max(q, 0) // none: no bound
	}
	switch {
	case st.maxFiles == 0:
		o.MaxFiles = -1 // keep none
	case st.maxFiles > 0:
		o.MaxFiles = st.maxFiles
	}
	return o, nil
}

// firstError keeps the first error a sink reports.
type firstError struct {
	mu    sync.Mutex
	first error
}

func (f *firstError) record(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.first == nil {
		f.first = err
	}
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}

// writerSink writes each event as one plain JSON line in one Write call, to
// standard error or a file that is not a regular one. Failed writes are
// counted; Close reports them.
type writerSink struct {
	mu     sync.Mutex
	w      io.Writer
	keep   func(audit.Outcome) bool
	closer io.Closer
	errs   atomic.Uint64
	first  error
}

func (s *writerSink) Record(_ context.Context, e audit.Event) {
	if !s.keep(e.Outcome) {
		return
	}
	line := audit.AppendJSON(make([]byte, 0, 512), e)
	if len(line) == 0 {
		s.fail(fmt.Errorf("audit: encode event %s: its time is outside years 0-9999", e.RequestID))
		return
	}
	s.mu.Lock()
	_, err := s.w.Write(line)
	s.mu.Unlock()
	if err != nil {
		s.fail(err)
	}
}

func (s *writerSink) fail(err error) {
	if s.errs.Add(1) == 1 {
		s.mu.Lock()
		s.first = err
		s.mu.Unlock()
	}
}

// Close closes the destination and reports failed writes.
func (s *writerSink) Close() error {
	var errs []error
	if s.closer != nil {
		errs = append(errs, s.closer.Close())
	}
	if n := s.errs.Load(); n > 0 {
		s.mu.Lock()
		errs = append(errs, fmt.Errorf("audit log: %d %s not written: %v", n, plural(int(n), "event", "events"), s.first))
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}

// runTag is the tag of the events of one capfs command that changes the
// project (run, sync) when its calls carry none: the command's name and a
// random id, as in run --grants (authority.RunReport.RunID).
func runTag(command string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return command + ":" + hex.EncodeToString(b[:])
}
