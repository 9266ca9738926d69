package search

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// scripted is a file as worker.read meets it: content read from a position,
// at most max bytes per Read when max > 0, counting the Reads.
type scripted struct {
	data  []byte
	off   int
	max   int
	reads int
	asked []int
}

func (s *scripted) Read(b []byte) (int, error) {
	s.reads++
	s.asked = append(s.asked, len(b))
	if s.off >= len(s.data) {
		return 0, io.EOF
	}
	n := len(b)
	if s.max > 0 && n > s.max {
		n = s.max
	}
	n = copy(b[:n], s.data[s.off:])
	s.off += n
	return n, nil
}

func newWorker(maxSize int64) *worker {
	return &worker{s: &searcher{opts: Options{MaxFileSize: maxSize}}}
}

// TestReadSizes checks worker.read against files whose size at the open is not
// their size at the read: one Read for a file as large as its open said; a
// file that grew is read to its end, one that shrank to its end; a short Read
// before the open's size is not taken as the end; a file reporting size 0 is
// read until a Read returns nothing; one that grew past MaxFileSize is
// reported as more than it.
func TestReadSizes(t *testing.T) {
	text := bytes.Repeat([]byte("hello world\n"), 1000) // 12000 bytes
	for _, tc := range []struct {
		name      string
		data      []byte
		size      int64
		max       int // bytes per Read, 0 for any
		maxSize   int64
		wantN     int
		wantReads int // 0: do not check
	}{
		{name: "as opened", data: text, size: int64(len(text)), wantN: len(text), wantReads: 1},
		{name: "empty", data: nil, size: 0, wantN: 0},
		{name: "grew", data: text, size: 100, wantN: len(text)},
		{name: "shrank", data: text[:50], size: int64(len(text)), wantN: 50},
		{name: "short reads", data: text, size: int64(len(text)), max: 1000, wantN: len(text)},
		{name: "size 0 (special)", data: text, size: 0, max: 4096, wantN: len(text)},
		{name: "grew too large", data: text, size: 10, maxSize: 5000, wantN: -1},
		{name: "large, read in chunks", data: bytes.Repeat(text, 20), size: int64(20 * len(text)), wantN: 20 * len(text), wantReads: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			maxSize := tc.maxSize
			if maxSize == 0 {
				maxSize = DefaultMaxFileSize
			}
			w := newWorker(maxSize)
			f := &scripted{data: tc.data, max: tc.max}
			n, binary, err := w.read(f, tc.size, true)
			if err != nil || binary {
				t.Fatalf("read: n %d binary %v err %v", n, binary, err)
			}
			if tc.wantN < 0 {
				if int64(n) <= maxSize {
					t.Fatalf("read %d bytes of a file grown past MaxFileSize %d: not reported as more", n, maxSize)
				}
				return
			}
			if n != tc.wantN || !bytes.Equal(w.buf[:n], tc.data[:n]) {
				t.Fatalf("read %d bytes, want %d (same content: %v)", n, tc.wantN, bytes.Equal(w.buf[:n], tc.data[:min(n, len(tc.data))]))
			}
			if tc.wantReads > 0 && f.reads != tc.wantReads {
				t.Errorf("%d Reads (asked %v), want %d", f.reads, f.asked, tc.wantReads)
			}
		})
	}
}

// TestReadBinarySniff checks that a NUL byte in the first binarySniff bytes
// makes a file binary after reading no more than firstChunk bytes of a large
// file, that one after them does not, and that without sniff (Options.Custom)
// the whole file is read.
func TestReadBinarySniff(t *testing.T) {
	big := bytes.Repeat([]byte("abcdefghij\n"), 30000) // 330000 bytes
	early := bytes.Clone(big)
	early[binarySniff-1] = 0
	late := bytes.Clone(big)
	late[binarySniff] = 0
	small := []byte("a\x00b\n")

	w := newWorker(DefaultMaxFileSize)
	f := &scripted{data: early}
	n, binary, err := w.read(f, int64(len(early)), true)
	if err != nil || !binary || n > firstChunk {
		t.Errorf("NUL at %d of a large file: binary %v after %d bytes (err %v); want binary after at most %d", binarySniff-1, binary, n, err, firstChunk)
	}
	f = &scripted{data: late}
	n, binary, err = w.read(f, int64(len(late)), true)
	if err != nil || binary || n != len(late) {
		t.Errorf("NUL at %d of a large file: binary %v, %d bytes (err %v); want text, all %d", binarySniff, binary, n, err, len(late))
	}
	f = &scripted{data: small}
	if _, binary, _ = w.read(f, int64(len(small)), true); !binary || f.reads != 1 {
		t.Errorf("small binary file: binary %v after %d Reads", binary, f.reads)
	}
	f = &scripted{data: early}
	if n, binary, _ = w.read(f, int64(len(early)), false); binary || n != len(early) {
		t.Errorf("without sniff: binary %v, %d bytes; want all %d", binary, n, len(early))
	}
}

// TestReadError checks that a Read error is returned.
func TestReadError(t *testing.T) {
	w := newWorker(DefaultMaxFileSize)
	boom := errors.New("boom")
	if _, _, err := w.read(failing{boom}, 10, true); err != boom {
		t.Fatalf("err %v, want boom", err)
	}
}

type failing struct{ err error }

func (f failing) Read([]byte) (int, error) { return 0, f.err }
