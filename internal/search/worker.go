package search

import (
	"bytes"
	"context"
	"io"
	"os"
	"sync"

	"github.com/capfs/capfs/vfs"
)

// worker searches files with buffers of its own.
type worker struct {
	s      *searcher
	expect context.Context // the search's context with vfs.ExpectRegular, for the files the walk listed
	buf    []byte
	lower  []byte
}

// bufs keeps the read buffers of finished searches for the next (a search
// would otherwise grow a buffer per worker from nothing each time).
var bufs sync.Pool

// keepBuf is the largest buffer bufs keeps: one that grew for a larger file is
// left to the garbage collector.
const keepBuf = 4 << 20

// minBuf is the size of a worker's first buffer.
const minBuf = 64 << 10

// release gives the worker's read buffer back to bufs.
func (w *worker) release() {
	if c := cap(w.buf); c >= minBuf && c <= keepBuf {
		b := w.buf[:c]
		bufs.Put(&b)
	}
	w.buf = nil
}

func (w *worker) search(ctx context.Context, sl *slot) {
	s := w.s
	// A file the walk listed as regular is opened with the hint, which lets the
	// physical backend open it in one system call (vfs.ExpectRegular); a root
	// the caller named is opened as any path is.
	octx := ctx
	if sl.regular {
		octx = w.expect
	}
	h, err := s.d.Open(octx, sl.path, os.O_RDONLY, 0)
	if err != nil {
		failSlot(ctx, sl, err)
		return
	}
	defer h.Close()
	// The status the open checked (no fstat), else Stat's.
	info, ok := h.OpenStat()
	if !ok {
		if info, err = h.Stat(); err != nil {
			failSlot(ctx, sl, err)
			return
		}
	}
	if !info.Mode().IsRegular() {
		return
	}
	size := info.Size()
	if size > s.opts.MaxFileSize {
		sl.skip = &Skip{Path: sl.path, Reason: SkipTooLarge, Size: size}
		return
	}
	n, binary, err := w.read(h, size, s.opts.Custom == nil || s.opts.SkipBinary)
	switch {
	case err != nil:
		failSlot(ctx, sl, err)
		return
	case int64(n) > s.opts.MaxFileSize:
		sl.skip = &Skip{Path: sl.path, Reason: SkipTooLarge, Size: int64(n)}
		return
	case binary:
		sl.binary = true
		return
	}
	w.match(sl, w.buf[:n])
}

// failSlot records err, met opening or reading sl's file: a revoked Dir or
// an ended search is fatal; a refusal, a file too large and any other error
// skip the file.
func failSlot(ctx context.Context, sl *slot, err error) {
	code := vfs.CodeOf(err)
	switch {
	case code == vfs.CodeRevoked || code == vfs.CodeCanceled || ctx.Err() != nil:
		sl.fatal = err
	case code == vfs.CodePermission:
		sl.skip = &Skip{Path: sl.path, Reason: SkipDenied, Err: err}
	case code == vfs.CodeTooLarge:
		sl.skip = &Skip{Path: sl.path, Reason: SkipTooLarge, Err: err}
	default:
		sl.skip = &Skip{Path: sl.path, Reason: SkipUnreadable, Err: err}
	}
}

// match searches data, sl's file as read, with Options.Custom or the
// pattern.
func (w *worker) match(sl *slot, data []byte) {
	sl.searched = true
	if custom := w.s.opts.Custom; custom != nil {
		if v, ok := custom(sl.path, data); ok {
			sl.file = &File{Path: sl.path, Value: v}
		}
		return
	}
	sl.file = w.scan(sl.path, data)
}

// firstChunk is how much of a file larger than it is read before the rest,
// when binary files are not searched: a NUL byte in its first binarySniff
// bytes ends the read there.
const firstChunk = 64 << 10

// read reads the file open as h, of the given size at its open, into w.buf and
// returns how many bytes it read: the whole file, or more than MaxFileSize
// bytes of it when it is larger, or, with sniff, the first bytes of a binary
// file (binary true: a NUL byte in its first binarySniff bytes).
//
// It asks for one byte more than size, so a file still of that size is read with
// one read: a read that returns less than asked for, once size bytes are in, is
// taken as the end of the file (for a regular file it is: the kernel fills a read
// up to the end), and one that fills the buffer means the file grew, so it reads
// on to the end. A file that reports size 0 (as special files do) is read until
// a read returns nothing. With sniff, a file larger than firstChunk is read
// first up to firstChunk bytes and looked at for a NUL byte.
func (w *worker) read(h io.Reader, size int64, sniff bool) (n int, binary bool, err error) {
	limit := w.s.opts.MaxFileSize
	if w.buf == nil {
		if b, ok := bufs.Get().(*[]byte); ok {
			w.buf = *b
		}
	}
	sniffAt, want := readPlan(size, sniff)
	w.grow(0, want)
	for {
		if n == len(w.buf) {
			if int64(n) > limit {
				return n, false, nil
			}
			w.grow(n, 2*n)
		}
		end := len(w.buf)
		if sniffAt > n && size > firstChunk {
			end = sniffAt
		}
		asked := end - n
		k, err := h.Read(w.buf[n:end])
		n += k
		if err != nil && err != io.EOF {
			return n, false, err
		}
		eof := readEnded(err, k, asked, size, n)
		if sniffAt >= 0 && (n >= sniffAt || eof) {
			if bytes.IndexByte(w.buf[:min(n, binarySniff)], 0) >= 0 {
				return n, true, nil
			}
			sniffAt = -1
			w.grow(n, int(size)+1) // the rest of a large file
		}
		if eof {
			return n, false, nil
		}
	}
}

// readPlan is where read looks for a NUL byte (-1: nowhere, without sniff)
// and how many bytes it asks for first: one more than size, or with sniff
// firstChunk of a file larger than that.
func readPlan(size int64, sniff bool) (sniffAt, want int) {
	sniffAt, want = -1, int(size)+1
	if !sniff {
		return sniffAt, want
	}
	if size > firstChunk {
		return firstChunk, firstChunk
	}
	return binarySniff, want
}

// readEnded reports whether a read that returned k of the asked bytes (err)
// ends a file of size bytes once n are in: at EOF, an empty read, or a short
// read once size bytes are in.
func readEnded(err error, k, asked int, size int64, n int) bool {
	return err == io.EOF || k == 0 || (k < asked && size > 0 && int64(n) >= size)
}

// grow makes w.buf (its whole capacity, as its length) hold at least want
// bytes, keeping its first n.
func (w *worker) grow(n, want int) {
	if cap(w.buf) >= want {
		w.buf = w.buf[:cap(w.buf)]
		return
	}
	nb := make([]byte, max(want+want/4, minBuf))
	copy(nb, w.buf[:n])
	w.buf = nb
}

// scan finds the matching lines of data.
func (w *worker) scan(p string, data []byte) *File {
	m := w.s.m
	hay := data
	if m.fold {
		if cap(w.lower) < len(data) {
			w.lower = make([]byte, len(data)+len(data)/4)
		}
		hay = asciiLower(w.lower[:len(data)], data)
	}
	perLine := m.re != nil && (m.bufRe == nil || bytes.IndexByte(data, '\r') >= 0)
	sc := lineScan{m: m, opts: &w.s.opts, data: data, hay: hay, lineNo: 1}
	pos := 0
	for pos < len(data) {
		ls, le := m.next(data, hay, pos, perLine)
		if ls < 0 {
			break
		}
		sc.lineNo += bytes.Count(data[sc.counted:ls], nl)
		sc.counted = ls
		if sc.f == nil {
			sc.f = &File{Path: p}
		}
		sc.f.Count++
		switch sc.opts.Mode {
		case FilesWithMatches:
			return sc.f
		case Content:
			var done bool
			if pos, done = sc.content(ls, le); done {
				return sc.f
			}
		default:
			pos = le + 1
		}
	}
	return sc.f
}

// lineScan is scan's state in Content mode: the file so far and where the
// lines reported end.
type lineScan struct {
	m         *matcher
	opts      *Options
	data, hay []byte
	f         *File
	lineNo    int // the number of the line starting at counted
	counted   int
	lastEnd   int // offset past the last line reported (context included)
	lastNum   int // the number of the last line reported
}

// content reports the matching line [ls, le) with its context, and returns
// the offset to search on from; done when the file reached the limit.
func (sc *lineScan) content(ls, le int) (next int, done bool) {
	if sc.opts.Before > 0 {
		sc.before(ls)
	}
	sc.f.Lines = append(sc.f.Lines, Line{Num: sc.lineNo, Text: clone(trimCR(sc.data[ls:le])), Match: true})
	sc.lastNum = sc.lineNo
	if sc.atLimit() {
		return 0, true
	}
	if next, done = sc.after(le); done {
		return 0, true
	}
	sc.lastEnd = min(next, len(sc.data))
	return next, false
}

// atLimit reports whether the file has Options.Limit matching lines.
func (sc *lineScan) atLimit() bool {
	return sc.opts.Limit > 0 && sc.f.Count >= sc.opts.Limit
}

// before reports the context lines before the match starting at ls, not
// overlapping what was shown.
func (sc *lineScan) before(ls int) {
	data := sc.data
	var pre []Line
	start, num := ls, sc.lineNo
	for k := 0; k < sc.opts.Before && start > sc.lastEnd && start > 0; k++ {
		prevEnd := start - 1
		prevStart := bytes.LastIndexByte(data[:prevEnd], '\n') + 1
		if prevStart < sc.lastEnd {
			break
		}
		num--
		pre = append(pre, Line{Num: num, Text: clone(trimCR(data[prevStart:prevEnd]))})
		start = prevStart
	}
	for k := len(pre) - 1; k >= 0; k-- {
		if pre[k].Num > sc.lastNum {
			sc.f.Lines = append(sc.f.Lines, pre[k])
		}
	}
}

// after reports the context lines after the match ending at le, any of
// which may match (and extend the context), and returns the offset past
// them; done when the file reached the limit.
func (sc *lineScan) after(le int) (next int, done bool) {
	data := sc.data
	next = le + 1
	left := sc.opts.After
	for left > 0 && next < len(data) {
		e := bytes.IndexByte(data[next:], '\n')
		end := len(data)
		if e >= 0 {
			end = next + e
		}
		sc.lineNo++
		sc.counted = next
		line := data[next:end]
		if sc.m.lineMatch(trimCR(line), sc.hay[next:end]) {
			sc.f.Count++
			sc.f.Lines = append(sc.f.Lines, Line{Num: sc.lineNo, Text: clone(trimCR(line)), Match: true})
			left = sc.opts.After
			if sc.atLimit() {
				return next, true
			}
		} else {
			sc.f.Lines = append(sc.f.Lines, Line{Num: sc.lineNo, Text: clone(trimCR(line))})
			left--
		}
		sc.lastNum = sc.lineNo
		next = end + 1
	}
	return next, false
}

var nl = []byte{'\n'}

func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

func asciiLower(dst, src []byte) []byte {
	for i, c := range src {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst[i] = c
	}
	return dst
}
