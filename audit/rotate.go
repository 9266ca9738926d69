package audit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// RotateOptions says when a [JSONL] sink's file rotates and which rotated files
// are kept (see [Rotate]).
//
// The file rotates when a write would take it past MaxSize. It is renamed to its
// name with the UTC time inserted before the extension: audit.jsonl becomes
// audit-2026-11-28T10-45-00.123.jsonl, the names lumberjack gives. Then a new
// file is started. The write waits for the rename and the new file only.
//
// A background goroutine compresses each rotated file with zstd once nothing has
// written to it for Grace. The compressed file is name + ".zst", written to a
// temporary file, synced and renamed; then the plain file is removed. The
// goroutine removes the oldest rotated files while there are more than MaxFiles,
// or they take more than MaxTotal bytes on disk. A file waiting for its
// compression counts in MaxFiles, and in MaxTotal once compressed. A file left
// uncompressed (a process that exited during its Grace, a crash) is compressed
// by the next sink on the same path, at its open or its rotation.
//
// Several processes may append to one log. Each checks, at most every Recheck,
// that the path still names the file it writes to. When another process rotated
// it, it starts writing the new file. Grace leaves those writers time to notice
// before the rotated file is compressed.
type RotateOptions struct {
	MaxSize  int64         // rotate when a write would take the file past it; must be > 0
	MaxFiles int           // rotated files kept at most; 0: no bound; negative: none kept
	MaxTotal int64         // bytes on disk the rotated files may take together; 0: no bound
	Recheck  time.Duration // 0: DefaultRecheck; negative: at every write
	Grace    time.Duration // 0: DefaultGrace; negative: compress at once
}

// Defaults of RotateOptions.
const (
	DefaultRecheck = time.Second
	DefaultGrace   = 3 * time.Second
)

// backupLayout is the time in a rotated file's name (lumberjack's).
const backupLayout = "2006-01-02T15-04-05.000"

// rotatingFile is a JSONL sink's file under RotateOptions.
type rotatingFile struct {
	path string
	o    RotateOptions
	warn func(error) // failures that lose no event: a rotation, a compression

	mu     sync.Mutex
	f      *os.File
	size   int64
	last   time.Time // when it last checked that path names f
	closed bool

	kick chan struct{} // maintenance wanted (1-buffered)
	stop chan struct{} // closed by Close
	done chan struct{} // closed when maintenance has stopped
}

func openRotating(path string, o RotateOptions, warn func(error)) (*rotatingFile, error) {
	if o.MaxSize <= 0 {
		return nil, errors.New("rotation needs a size greater than 0")
	}
	if o.Recheck == 0 {
		o.Recheck = DefaultRecheck
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	r := &rotatingFile{path: path, o: o, warn: warn,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if err := r.open(); err != nil {
		return nil, err
	}
	r.kick <- struct{}{} // what an earlier process left
	go r.maintainLoop()
	return r, nil
}

// open starts writing the file at path (created 0600 when missing).
func (r *rotatingFile) open() error {
	f, size, err := openLog(r.path)
	if err != nil {
		return err
	}
	r.f, r.size, r.last = f, size, time.Now()
	return nil
}

// openLog opens the log at path for appending (created 0600 when missing)
// and returns it with its size. A file whose last line was cut short (a
// crash in a write) gets a newline first, so that the next line is not
// glued to the torn one.
func openLog(path string) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	size := fi.Size()
	var last [1]byte
	if size > 0 && fi.Mode().IsRegular() {
		if _, err := f.ReadAt(last[:], size-1); err == nil && last[0] != '\n' {
			if n, err := f.Write([]byte{'\n'}); err == nil {
				size += int64(n)
			}
		}
	}
	return f, size, nil
}

// Write appends p in one write call, rotating first when p would take the
// file past MaxSize. A failed rotation is reported and p written anyway.
func (r *rotatingFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, os.ErrClosed
	}
	r.follow()
	if r.size > 0 && r.size+int64(len(p)) > r.o.MaxSize {
		if err := r.rotate(); err != nil {
			r.warn(fmt.Errorf("audit: rotate JSONL sink: %w", err))
		}
	}
	n, err := r.f.Write(p)
	r.size += int64(n)
	return n, err
}

// follow starts writing the file at path when path no longer names r.f
// (another process rotated or removed it), checking at most every Recheck.
func (r *rotatingFile) follow() {
	if r.o.Recheck > 0 && time.Since(r.last) < r.o.Recheck {
		return
	}
	r.last = time.Now()
	fi, err := r.f.Stat()
	if err != nil {
		return
	}
	if pi, err := os.Stat(r.path); err == nil && os.SameFile(fi, pi) {
		r.size = fi.Size() // other processes' writes count too
		return
	}
	old := r.f
	if err := r.open(); err != nil {
		r.warn(fmt.Errorf("audit: reopen JSONL sink: %w", err))
		return
	}
	old.Close()
}

// rotate renames the file to a free rotated name and starts a new one.
func (r *rotatingFile) rotate() error {
	name, err := freeBackupName(r.path, time.Now())
	if err != nil {
		return err
	}
	if err := os.Rename(r.path, name); err != nil {
		return err
	}
	old := r.f
	if err := r.open(); err != nil {
		return err // go on writing the rotated file
	}
	old.Close()
	select {
	case r.kick <- struct{}{}:
	default:
	}
	return nil
}

// Sync fsyncs the current file.
func (r *rotatingFile) Sync() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return os.ErrClosed
	}
	return r.f.Sync()
}

// Close closes the file and waits for the maintenance goroutine: a
// compression under way finishes; files still in their Grace are left for
// the next sink.
func (r *rotatingFile) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return os.ErrClosed
	}
	r.closed = true
	err := r.f.Close()
	r.mu.Unlock()
	close(r.stop)
	<-r.done
	return err
}

func (r *rotatingFile) maintainLoop() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			r.maintain(true)
			return
		case <-r.kick:
			r.maintain(false)
		}
	}
}

// maintain compresses the rotated files that have rested and applies the
// bounds; unless stopping, it waits for resting files (or Close).
func (r *rotatingFile) maintain(stopping bool) {
	for {
		wait := r.compressRested(stopping)
		r.bound()
		if wait <= 0 {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-r.stop:
			t.Stop()
			return // maintainLoop makes the last pass
		case <-t.C:
		}
	}
}

// compressRested compresses the rotated files nothing has written to for
// Grace, removes plain files already compressed and temporary files left by
// a crash, and returns how long until the next file rests (0: none waits).
func (r *rotatingFile) compressRested(stopping bool) time.Duration {
	bs, tmps, err := listBackups(r.path)
	if err != nil {
		r.warn(fmt.Errorf("audit: list rotated logs: %w", err))
		return 0
	}
	for _, t := range tmps {
		if fi, err := os.Lstat(t); err == nil && time.Since(fi.ModTime()) > time.Minute {
			os.Remove(t)
		}
	}
	var wait time.Duration
	for _, b := range bs {
		switch {
		case b.plain == "":
		case b.zst != "":
			os.Remove(b.plain) // compressed, then interrupted before the removal
		case time.Until(b.mod.Add(r.o.Grace)) > 0:
			if rest := time.Until(b.mod.Add(r.o.Grace)); !stopping && (wait == 0 || rest < wait) {
				wait = rest
			}
		default:
			if err := compressFile(b.plain); err != nil && !errors.Is(err, os.ErrNotExist) { // not: another process's work
				r.warn(fmt.Errorf("audit: compress rotated log: %w", err))
			}
		}
	}
	return wait
}

// bound removes the oldest rotated files beyond MaxFiles and MaxTotal.
func (r *rotatingFile) bound() {
	bs, _, err := listBackups(r.path)
	if err != nil {
		return
	}
	var total int64
	kept, full := 0, r.o.MaxFiles < 0
	for i := len(bs) - 1; i >= 0; i-- {
		b := bs[i]
		size := b.size
		if b.zst == "" {
			size = 0 // waiting for its compression: counted once compressed
		}
		if !full && (r.o.MaxFiles == 0 || kept < r.o.MaxFiles) && (r.o.MaxTotal <= 0 || total+size <= r.o.MaxTotal) {
			kept++
			total += size
			continue
		}
		full = true // oldest first: nothing older stays
		for _, n := range []string{b.zst, b.plain} {
			if n != "" {
				if err := os.Remove(n); err != nil && !errors.Is(err, os.ErrNotExist) {
					r.warn(fmt.Errorf("audit: remove rotated log: %w", err))
				}
			}
		}
	}
}

// compressFile writes name+".zst" and removes name.
func compressFile(name string) (err error) {
	in, err := os.Open(name)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(name), filepath.Base(name)+".zst.tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	enc, err := zstd.NewWriter(tmp, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	if _, err := io.Copy(enc, in); err != nil {
		enc.Close()
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), name+".zst"); err != nil {
		return err
	}
	if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// backup is one rotated file: plain, compressed, or both (compressed, and
// the plain one not yet removed).
type backup struct {
	plain, zst string    // paths; "" when absent
	t          time.Time // from the name
	size       int64     // of both files
	mod        time.Time // of the plain file
}

// backupName is the rotated name of path at t.
func backupName(path string, t time.Time) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-" + t.UTC().Format(backupLayout) + ext
}

// freeBackupName is backupName at t, or a millisecond later, and so on, until
// neither it nor its compressed file exists.
func freeBackupName(path string, t time.Time) (string, error) {
	for range 1000 {
		n := backupName(path, t)
		_, err1 := os.Lstat(n)
		_, err2 := os.Lstat(n + ".zst")
		if errors.Is(err1, os.ErrNotExist) && errors.Is(err2, os.ErrNotExist) {
			return n, nil
		}
		t = t.Add(time.Millisecond)
	}
	return "", errors.New("no free name for the rotated file")
}

// listBackups returns the rotated files of path, oldest first, and the
// temporary files of compressions.
func listBackups(path string) ([]backup, []string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	ext := filepath.Ext(base)
	prefix := strings.TrimSuffix(base, ext) + "-"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	byTime := map[string]*backup{}
	var tmps []string
	for _, ent := range ents {
		name := ent.Name()
		if !strings.HasPrefix(name, prefix) || !ent.Type().IsRegular() {
			continue
		}
		rest := name[len(prefix):]
		if strings.Contains(rest, ext+".zst.tmp") {
			tmps = append(tmps, filepath.Join(dir, name))
			continue
		}
		stamp, zst := strings.CutSuffix(rest, ext+".zst")
		if !zst {
			var ok bool
			if stamp, ok = strings.CutSuffix(rest, ext); !ok {
				continue
			}
		}
		t, err := time.Parse(backupLayout, stamp)
		if err != nil {
			continue
		}
		fi, err := ent.Info()
		if err != nil {
			continue
		}
		b := byTime[stamp]
		if b == nil {
			b = &backup{t: t}
			byTime[stamp] = b
		}
		b.size += fi.Size()
		if zst {
			b.zst = filepath.Join(dir, name)
		} else {
			b.plain, b.mod = filepath.Join(dir, name), fi.ModTime()
		}
	}
	out := make([]backup, 0, len(byTime))
	for _, b := range byTime {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].t.Before(out[j].t) })
	return out, tmps, nil
}

// LogFiles returns the files of the log at path, oldest first.
// Its rotated files come first (the compressed one of each when there are
// both), then path itself when it exists.
func LogFiles(path string) ([]string, error) {
	bs, _, err := listBackups(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, b := range bs {
		if b.zst != "" {
			out = append(out, b.zst)
		} else {
			out = append(out, b.plain)
		}
	}
	if _, err := os.Stat(path); err == nil {
		out = append(out, path)
	}
	return out, nil
}

// maxLogWindow bounds the window of a ".zst" file OpenLogFile decodes, and
// so the decoder's memory: compressFile writes 8 MiB windows (the encoder's
// default), and the zstd tool's levels up to 19 as well; a hostile header
// asking for more (up to 512 MiB by default) is refused, not allocated.
const maxLogWindow = 32 << 20

// DecompressFactor bounds what a compressed rotated file may decompress to, as
// a multiple of [RotateOptions].MaxSize. A rotated file holds at most MaxSize,
// plus what other processes wrote in the second or so before they saw the
// rotation. A compressed file that decompresses past its bound is a zstd bomb,
// not a log, and is read no further ([ErrTooLarge]).
const DecompressFactor = 16

// DefaultMaxDecompressed is the bound on what one compressed file of a log
// decompresses to, when the reader is given none ([MaxDecompressed]). It is
// 256 MiB: [DecompressFactor] times a 16 MiB rotation size (capfs's default).
// A log rotated at more is read with MaxDecompressed.
const DefaultMaxDecompressed = 256 << 20

// ErrTooLarge is matched by the error of a compressed log file read past its
// decompressed bound ([MaxDecompressed]).
var ErrTooLarge = errors.New("audit: compressed log file decompresses past its bound")

// ReadOption configures OpenLogFile, ScanLog and ScanLogFile.
type ReadOption func(*readOptions)

type readOptions struct{ maxDecompressed int64 }

func readOpts(opts []ReadOption) readOptions {
	o := readOptions{maxDecompressed: DefaultMaxDecompressed}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// MaxDecompressed bounds what one compressed file may decompress to: n
// bytes, past which its reader fails with ErrTooLarge. A log rotated at
// MaxSize is read with n = MaxSize * DecompressFactor. n <= 0 keeps the
// default, DefaultMaxDecompressed.
func MaxDecompressed(n int64) ReadOption {
	return func(o *readOptions) {
		if n > 0 {
			o.maxDecompressed = n
		}
	}
}

// OpenLogFile opens one file of a log for reading, decompressing a ".zst"
// one within its bound (see MaxDecompressed).
func OpenLogFile(name string, opts ...ReadOption) (io.ReadCloser, error) {
	o := readOpts(opts)
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(name, ".zst") {
		return f, nil
	}
	d, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxLogWindow))
	if err != nil {
		f.Close()
		return nil, err
	}
	return zstdFile{&bounded{r: d, left: o.maxDecompressed, max: o.maxDecompressed}, d, f}, nil
}

type zstdFile struct {
	r io.Reader
	d *zstd.Decoder
	f *os.File
}

func (z zstdFile) Read(p []byte) (int, error) { return z.r.Read(p) }

func (z zstdFile) Close() error {
	z.d.Close()
	return z.f.Close()
}

// bounded reads r up to max bytes; more is ErrTooLarge, not a quiet end.
type bounded struct {
	r         io.Reader
	left, max int64
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, err := b.r.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, fmt.Errorf("%w (%d bytes)", ErrTooLarge, b.max)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// ScanLog reads every event of the log at path and calls fn for each, in file
// order. It reads the rotated files first (see [LogFiles]).
//
// A line that is not an event is passed to bad (if not nil) with the file's
// name, and the scan goes on. So is a file that cannot be read to its end (a
// compressed file cut short). A non-nil error from fn or bad stops it and is
// returned. A compressed file is read within its bound (see [MaxDecompressed]).
// Past it, the file's events so far are kept and [ErrTooLarge] goes to bad.
func ScanLog(path string, fn func(Event) error, bad func(file string, err error) error, opts ...ReadOption) error {
	files, err := LogFiles(path)
	if err != nil {
		return err
	}
	for _, name := range files {
		if err := ScanLogFile(name, fn, bad, opts...); err != nil {
			return err
		}
	}
	return nil
}

// errStop marks an error from ScanLog's callbacks inside scanFile.
type errStop struct{ err error }

func (e errStop) Error() string { return e.err.Error() }

// ScanLogFile reads the events of one file of a log (one of LogFiles), as
// ScanLog reads each.
func ScanLogFile(name string, fn func(Event) error, bad func(file string, err error) error, opts ...ReadOption) error {
	if bad == nil {
		bad = func(string, error) error { return nil }
	}
	rc, err := OpenLogFile(name, opts...)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // removed by a rotation since it was listed
		}
		return bad(name, err)
	}
	defer rc.Close()
	err = ScanJSONL(rc, func(e Event) error {
		if err := fn(e); err != nil {
			return errStop{err}
		}
		return nil
	}, func(le *LineError) error {
		if err := bad(name, le); err != nil {
			return errStop{err}
		}
		return nil
	})
	var stop errStop
	if errors.As(err, &stop) {
		return stop.err
	}
	if err != nil {
		return bad(name, err)
	}
	return nil
}
