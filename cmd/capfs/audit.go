package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/capfs/capfs/audit"
)

// Audit log defaults: the log rotates when it would pass defaultAuditMaxSize,
// keeping defaultAuditMaxFiles rotated files next to it, so it never holds more
// than (1+defaultAuditMaxFiles) × defaultAuditMaxSize (64 MiB).
const (
	defaultAuditMaxSize  = 16 << 20
	defaultAuditMaxFiles = 3
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
	maxSize  string // "" = default; "none" = never rotate
	maxFiles int    // -1 = default
	level    string // "" = all
}

// openAuditSink opens the audit destination: "off" records nothing, "stderr"
// writes JSON Lines to standard error, and a file is appended to and rotated by
// size (lumberjack: the full file is renamed with a timestamp and a new one
// started; the oldest rotated files beyond maxFiles are removed). With
// --audit-max-size none, the file is never rotated and is fsynced at most every
// second (audit.JSONL). A path that is not a regular file (/dev/null, a FIFO)
// is written to as it is, never rotated or fsynced. It returns the sink and
// the function that flushes and closes it.
func openAuditSink(st auditSettings, stderr io.Writer) (audit.Sink, func() error, error) {
	keep := auditLevels["all"]
	if st.level != "" {
		k, ok := auditLevels[st.level]
		if !ok {
			return nil, nil, usageErrorf("--audit-level %s: want all, errors or denied", st.level)
		}
		keep = k
	}
	maxSize := int64(defaultAuditMaxSize)
	if st.maxSize != "" {
		q, err := parseQuota(st.maxSize)
		if err != nil {
			return nil, nil, usageErrorf("--audit-max-size %s: %v", st.maxSize, err)
		}
		maxSize = q
	}
	maxFiles := defaultAuditMaxFiles
	if st.maxFiles >= 0 {
		maxFiles = st.maxFiles
	}
	switch st.dest {
	case "off", "none":
		return audit.Discard, func() error { return nil }, nil
	case "stderr", "-":
		s := &writerSink{w: stderr, keep: keep}
		return s, s.Close, nil
	}
	// Surface a bad path now (the rotating writer opens lazily), and tell a
	// regular file from /dev/null or a FIFO.
	f, err := os.OpenFile(st.dest, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, usageErrorf("--audit %s: %v (use --audit=off to record nothing)", st.dest, cause(err))
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, usageErrorf("--audit %s: %v", st.dest, cause(err))
	}
	if !fi.Mode().IsRegular() {
		s := &writerSink{w: f, keep: keep, closer: f}
		return s, s.Close, nil
	}
	f.Close()
	if maxSize < 0 {
		j, err := audit.OpenJSONL(st.dest)
		if err != nil {
			return nil, nil, usageErrorf("--audit %s: %v", st.dest, cause(err))
		}
		if st.level == "" || st.level == "all" {
			return j, j.Close, nil
		}
		return audit.Filter(j, func(e audit.Event) bool { return keep(e.Outcome) }), j.Close, nil
	}
	// lumberjack counts whole megabytes.
	mb := int((maxSize + (1<<20 - 1)) >> 20)
	lj := &lumberjack.Logger{Filename: st.dest, MaxSize: max(mb, 1), MaxBackups: maxFiles}
	if maxFiles == 0 {
		// lumberjack's 0 means "keep all": keep none by removing each rotated
		// file at the next rotation is not offered, so keep one.
		lj.MaxBackups = 1
	}
	s := &writerSink{w: lj, keep: keep, closer: lj, follow: &followPath{path: st.dest, reopen: lj.Close}}
	return s, s.Close, nil
}

// auditRecheck is how often a rotating sink checks that its file is still the
// one at its path.
var auditRecheck = time.Second

// followPath keeps a rotating sink writing to the file at its path when
// another capfs process (a CLI command beside a long capfs mcp or capfs run)
// rotated it: at most every auditRecheck it compares the path's inode with the
// one it last saw there and, when they differ, closes its file so that the next
// write opens the path anew. Without it, a process would go on appending to a
// rotated file, and once that file is removed as the oldest, its events would
// be lost.
type followPath struct {
	path   string
	reopen func() error
	ino    uint64
	last   time.Time
}

func (f *followPath) before() {
	if f.ino == 0 || time.Since(f.last) < auditRecheck {
		return
	}
	f.last = time.Now()
	if ino := inodeOf(f.path); ino != f.ino {
		f.reopen()
		f.ino = 0
	}
}

func (f *followPath) after() {
	if f.ino == 0 {
		f.ino, f.last = inodeOf(f.path), time.Now()
	}
}

func inodeOf(p string) uint64 {
	st, err := os.Stat(p)
	if err != nil {
		return 1 // gone: differs from any file's inode, so the sink reopens
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return sys.Ino
	}
	return 0
}

// writerSink writes each event as one JSON line in one Write call. Failed
// writes are counted; Close reports them.
type writerSink struct {
	mu     sync.Mutex
	w      io.Writer
	keep   func(audit.Outcome) bool
	closer io.Closer
	follow *followPath // non-nil for a rotating file
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
	if s.follow != nil {
		s.follow.before()
	}
	_, err := s.w.Write(line)
	if s.follow != nil && err == nil {
		s.follow.after()
	}
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
