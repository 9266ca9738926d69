package audit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultSyncInterval is how often, at most, a JSONL sink opened without a sync
// option calls fsync: 1 s.
const DefaultSyncInterval = time.Second

// ErrSinkClosed is reported for events recorded after Close, through
// [JSONL.Errors] and the [OnError] callback. Sync and a second Close return it.
var ErrSinkClosed = fmt.Errorf("audit: sink is closed: %w", fs.ErrClosed)

// JSONL is a [Sink] that appends each event to a file as one line of JSON (JSON
// Lines). Use [OpenJSONL]; the zero JSONL is unusable. It is safe for concurrent
// use.
//
// # Lines never interleave
//
// The file is opened O_APPEND. Each event is encoded in memory and handed to the
// kernel in one write call of the whole line. Within one process the [*os.File]
// serializes writes. Across processes appending to the same file, O_APPEND makes
// each write land whole at the end of the file (on local filesystems; not on
// NFS). Without [Compact], nothing is buffered in user space. A line is visible
// to readers of the file as soon as Record returns, whatever the sync policy.
// With Compact, a compact record is written the same way, whole, when it is
// written.
//
// # Durability: the fsync policy
//
// Visible is not durable: until fsync, a line can be lost if the machine (not
// just the process) goes down. The policy is chosen at open:
//
//   - [SyncInterval](d), the default with d = [DefaultSyncInterval]: a background
//     goroutine calls fsync at most every d, and only when something was written
//     since the last one. A crash loses at most the last d of events. Record never
//     waits for the disk beyond its one write call.
//   - [SyncEvery]: Record calls fsync after each write, in the caller's goroutine.
//     It returns only when the line is on stable storage. The guest's call waits
//     for the disk: this is the one policy under which a slow disk slows guests.
//   - [SyncNever]: fsync only at Close (and Sync). Durability is left to the OS's
//     writeback.
//
// Close always syncs. Some failures cannot be returned to the guest, whose call
// has already happened. These are an event whose encoding fails (a time outside
// years 0-9999), a failed write or fsync, and events recorded after Close. They
// are counted ([JSONL.Errors]) and passed to the [OnError] callback, if any.
//
// # Rotation and the compact form
//
// With [Rotate], the file is rotated by size, and its rotated files are
// compressed and bounded (see [RotateOptions]). With [Compact], successful calls
// are held for a moment and written as compact records, one line for many
// events. Their lines are visible, and synced, once written.
type JSONL struct {
	f       logFile
	every   bool
	onError func(error)
	sync    func() error // f.Sync; replaced in tests
	cmp     *compactor   // nil: every event written at once, as a plain line

	mu     sync.RWMutex // write lock: Close; read lock: Record, Sync
	closed bool

	dirty   atomic.Bool // written since the last fsync
	written atomic.Uint64
	errs    atomic.Uint64

	stop chan struct{} // closed by Close to stop the interval syncer
	done chan struct{} // closed by the interval syncer when it exits
}

// JSONLOption configures [OpenJSONL].
type JSONLOption func(*jsonlConfig)

type syncMode int

const (
	syncInterval syncMode = iota
	syncEvery
	syncNever
)

type jsonlConfig struct {
	mode     syncMode
	interval time.Duration
	onError  func(error)
	// Test seams: the fsync call, the interval syncer's clock, and a signal that
	// the syncer has handled a tick.
	sync   func(*os.File) error
	tick   func() (<-chan time.Time, func())
	ticked func()

	compact time.Duration  // 0: no compact form
	rotate  *RotateOptions // nil: never rotated
}

// logFile is what a JSONL sink writes to: an *os.File, or a rotatingFile.
type logFile interface {
	Write([]byte) (int, error)
	Sync() error
	Close() error
}

// DefaultCompactInterval is how long, at most, a sink opened with [Compact](0)
// holds an event before writing it: 1 s.
const DefaultCompactInterval = time.Second

// Compact makes the sink write calls in the compact form (see the package doc).
// It holds each call for at most d (d <= 0: [DefaultCompactInterval]). It groups
// those that share subject, op, outcome, code, rule, grant and tag, and writes
// each group as one compact record. Refusals, calls with a destination and
// summaries are written at once as plain lines. So the file is in time order
// only within each record. Sync and Close write what is held first. A process
// killed without Close loses what it held: up to d of calls.
func Compact(d time.Duration) JSONLOption {
	return func(c *jsonlConfig) {
		if d <= 0 {
			d = DefaultCompactInterval
		}
		c.compact = d
	}
}

// Rotate makes the sink rotate its file as o says (see [RotateOptions]).
func Rotate(o RotateOptions) JSONLOption {
	return func(c *jsonlConfig) { c.rotate = &o }
}

// SyncEvery makes Record fsync the file after every event, before returning.
func SyncEvery() JSONLOption { return func(c *jsonlConfig) { c.mode = syncEvery } }

// SyncInterval makes a background goroutine fsync the file at most every d, when
// events were written since the last fsync. This is the default, with
// [DefaultSyncInterval]. d <= 0 keeps DefaultSyncInterval.
func SyncInterval(d time.Duration) JSONLOption {
	return func(c *jsonlConfig) {
		c.mode = syncInterval
		if d > 0 {
			c.interval = d
		}
	}
}

// SyncNever leaves durability to the OS until Sync or Close.
func SyncNever() JSONLOption { return func(c *jsonlConfig) { c.mode = syncNever } }

// OnError sets a callback for errors the sink cannot return to anyone.
// These are failed encodes, writes and fsyncs, and events recorded after Close.
// Under [Rotate] it also receives the failures of rotation that lose no event (a
// rename, a compression, a removal), which [JSONL.Errors] does not count. It is
// called in the goroutine that hit the error (a guest's, the interval syncer's
// or rotation's). So it must be safe for concurrent use, and quick. Errors may
// name the file's host path: they are for the host, never the guest.
func OnError(fn func(error)) JSONLOption { return func(c *jsonlConfig) { c.onError = fn } }

// OpenJSONL opens the file at path for appending audit events.
// It creates the file with mode 0600 if needed. An existing file is appended
// to, never truncated, and keeps its permissions. The caller must Close the
// sink, which stops its background syncer.
func OpenJSONL(path string, opts ...JSONLOption) (*JSONL, error) {
	cfg := jsonlConfig{mode: syncInterval, interval: DefaultSyncInterval}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	j := &JSONL{every: cfg.mode == syncEvery, onError: cfg.onError}
	if cfg.rotate != nil {
		r, err := openRotating(path, *cfg.rotate, j.warn)
		if err != nil {
			return nil, fmt.Errorf("audit: open JSONL sink: %w", err)
		}
		j.f, j.sync = r, r.Sync
	} else {
		f, _, err := openLog(path)
		if err != nil {
			return nil, fmt.Errorf("audit: open JSONL sink: %w", err)
		}
		j.f, j.sync = f, f.Sync
		if cfg.sync != nil {
			j.sync = func() error { return cfg.sync(f) }
		}
	}
	if cfg.compact > 0 {
		j.cmp = newCompactor(cfg.compact, j.writeLine)
	}
	if cfg.mode == syncInterval {
		tick := cfg.tick
		if tick == nil {
			tick = func() (<-chan time.Time, func()) {
				t := time.NewTicker(cfg.interval)
				return t.C, t.Stop
			}
		}
		c, stopTicker := tick()
		j.stop, j.done = make(chan struct{}), make(chan struct{})
		go j.syncLoop(c, stopTicker, cfg.ticked)
	}
	return j, nil
}

// syncLoop is the SyncInterval policy's background goroutine.
func (j *JSONL) syncLoop(tick <-chan time.Time, stopTicker, ticked func()) {
	defer close(j.done)
	defer stopTicker()
	for {
		select {
		case <-j.stop:
			return
		case <-tick:
			if j.dirty.Swap(false) {
				if err := j.sync(); err != nil {
					j.fail(fmt.Errorf("audit: fsync JSONL sink: %w", err))
				}
			}
			if ticked != nil {
				ticked()
			}
		}
	}
}

// lineBufs holds the buffers events are encoded into (*[]byte).
var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Record appends e to the file as one line, in one write call.
// Under [SyncEvery] it also calls fsync. Under [Compact], a successful call is
// held and written with others. Failures are counted and reported to the
// [OnError] callback.
func (j *JSONL) Record(_ context.Context, e Event) {
	if j.cmp != nil {
		j.cmp.record(e)
		return
	}
	bp := lineBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 64<<10 {
			lineBufs.Put(bp)
		}
	}()
	*bp = AppendJSON((*bp)[:0], e)
	if len(*bp) == 0 {
		j.fail(fmt.Errorf("audit: encode event %s: its time is outside years 0-9999", e.RequestID))
		return
	}
	j.writeLine(*bp, 1)
}

// writeLine writes one line standing for n events (none written when the line
// is empty: an event JSON cannot hold).
func (j *JSONL) writeLine(b []byte, n int) {
	if len(b) == 0 {
		j.fail(errors.New("audit: encode event: its time is outside years 0-9999"))
		return
	}
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		j.fail(ErrSinkClosed)
		return
	}
	if _, err := j.f.Write(b); err != nil {
		j.fail(fmt.Errorf("audit: write JSONL sink: %w", err))
		return
	}
	j.written.Add(uint64(n))
	if !j.every {
		j.dirty.Store(true)
		return
	}
	if err := j.sync(); err != nil {
		j.fail(fmt.Errorf("audit: fsync JSONL sink: %w", err))
	}
}

// Sync commits every event written so far to stable storage (fsync), whatever the
// policy. It returns ErrSinkClosed after Close.
func (j *JSONL) Sync() error {
	if j.cmp != nil {
		j.cmp.flush()
	}
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		return ErrSinkClosed
	}
	j.dirty.Store(false)
	return j.sync()
}

// Close stops the background syncer, fsyncs and closes the file. Events recorded
// afterwards are dropped and counted as errors. A second Close returns ErrSinkClosed.
func (j *JSONL) Close() error {
	if j.cmp != nil {
		j.cmp.close()
	}
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrSinkClosed
	}
	j.closed = true
	j.mu.Unlock()
	if j.stop != nil {
		close(j.stop)
		<-j.done
	}
	serr := j.sync()
	if serr != nil {
		serr = fmt.Errorf("audit: fsync JSONL sink: %w", serr)
	}
	return errors.Join(serr, j.f.Close())
}

// Written returns how many events have been written to the file by this sink.
func (j *JSONL) Written() uint64 { return j.written.Load() }

// Errors returns how many failures (encode, write, fsync, record after Close) the
// sink has had.
func (j *JSONL) Errors() uint64 { return j.errs.Load() }

// warn reports a failure that lost no event.
func (j *JSONL) warn(err error) {
	if j.onError != nil {
		j.onError(err)
	}
}

func (j *JSONL) fail(err error) {
	j.errs.Add(1)
	if j.onError != nil {
		j.onError(err)
	}
}

// maxJSONLLine bounds one line ReadJSONL accepts: events are small (guest paths are
// cut at 512 bytes) and a compact record is cut at compactMaxBytes, so anything
// longer is neither.
const maxJSONLLine = 1 << 20

// ReadJSONL reads the events a [JSONL] sink wrote, in file order.
// It reads plain lines and compact records alike. Blank lines are skipped.
// Fields it does not know are ignored, so files written by a newer version
// still read. A line that is not an event may be a last line cut short by a
// crash. On such a line it returns the events before it and a [*LineError].
// [ScanJSONL] reads past such lines.
func ReadJSONL(r io.Reader) ([]Event, error) {
	var out []Event
	err := ScanJSONL(r, func(e Event) error {
		out = append(out, e)
		return nil
	}, func(le *LineError) error { return le })
	return out, err
}

// LineError is a line of a log that is not an event, or not one this version
// reads. It is a line cut short by a crash (and perhaps appended to
// afterwards), or a compact record that does not decode.
type LineError struct {
	Line int // from 1
	Err  error
}

// Error returns the line number and the reason.
func (e *LineError) Error() string { return fmt.Sprintf("audit: JSONL line %d: %v", e.Line, e.Err) }

// Unwrap returns the reason.
func (e *LineError) Unwrap() error { return e.Err }

// ScanJSONL reads the events of a JSONL log from r and calls fn for each, in
// file order. It reads plain lines and compact records alike.
//
// A line that is not an event is passed to bad and skipped; for a compact
// record, all its events are skipped. bad may be nil. A line cut short by a
// crash may have had the next one appended to it. When such a line ends with a
// whole event or record, that one is read. A non-nil error from fn or bad stops
// the scan and is returned. So is a read error (a compressed file cut short),
// after the events before it.
func ScanJSONL(r io.Reader, fn func(Event) error, bad func(*LineError) error) error {
	if bad == nil {
		bad = func(*LineError) error { return nil }
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxJSONLLine)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ferr error
		err := decodeLine(line, func(e Event) error {
			ferr = fn(e)
			return ferr
		})
		if ferr != nil {
			return ferr
		}
		if err != nil {
			if berr := bad(&LineError{Line: n, Err: err}); berr != nil {
				return berr
			}
			if ferr := decodeTail(line, fn); ferr != nil {
				return ferr
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("audit: reading JSONL: %w", err)
	}
	return nil
}

// maxTailTries bounds the places decodeTail tries in one bad line. Each try
// may scan to the line's end, so without it a hostile line of nested
// `{"time":` takes time quadratic in its length (tens of seconds for 1 MiB);
// a line torn by crashes has one such place per tear.
const maxTailTries = 16

// decodeTail reads the event or record that ends a bad line, if one does:
// from the first place where one starts and decodes to the end, among the
// first maxTailTries places where one starts. It returns fn's error only.
func decodeTail(line []byte, fn func(Event) error) error {
	tries := 0
	for i := 1; i < len(line) && tries < maxTailTries; i++ {
		j := bytes.Index(line[i:], []byte(`{"`))
		if j < 0 {
			return nil
		}
		i += j
		rest := line[i:]
		if !bytes.HasPrefix(rest, []byte(`{"time":`)) && !bytes.HasPrefix(rest, []byte(`{"bulk":`)) {
			continue
		}
		tries++
		var ferr error
		if decodeLine(rest, func(e Event) error { ferr = fn(e); return ferr }) == nil || ferr != nil {
			return ferr
		}
	}
	return nil
}
