package pack

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"hash/crc32"
	"io"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/gitree/internal/packgen"
)

// FuzzInflate is the inflater's differential test against compress/zlib (zlib
// framing and compress/flate's DEFLATE): on any input, both decode the same
// bytes, or both fail. The package's decoder needs the output size; it is given
// the size compress/zlib found when that succeeds, and otherwise every size it
// could accept: the length of everything it decodes before failing (read
// through the streaming mode with a size no stream can reach), and the length
// compress/zlib decoded before failing. Both modes are checked: whole
// (inflateInto) and streaming (streamInflate from the start, checksum checked).
func FuzzInflate(f *testing.F) {
	for _, s := range testStreams(f) {
		if len(s[1]) <= 1024 {
			f.Add(s[1])
		}
	}
	for _, level := range []int{zlib.NoCompression, zlib.BestSpeed, zlib.DefaultCompression, zlib.HuffmanOnly} {
		for _, data := range []string{"", "a", "hello, hello, hello world\n", "func main() {\n\tfmt.Println(\"x\")\n}\n"} {
			var b bytes.Buffer
			w, _ := zlib.NewWriterLevel(&b, level)
			w.Write([]byte(data))
			w.Close()
			f.Add(b.Bytes())
		}
	}
	f.Add(packgen.Zeros(3000))
	f.Add(packgen.Stored([]byte("stored block")))
	f.Fuzz(func(t *testing.T, z []byte) {
		if len(z) > 4096 {
			return
		}
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-done:
			case <-time.After(60 * time.Second): // fails only on a hang
				panic(fmt.Sprintf("no answer in 60 s on %x", z))
			}
		}()
		bound := int64(len(z))*1032 + 64 // deflate's largest expansion
		var want []byte
		zr, werr := zlib.NewReader(bytes.NewReader(z))
		if werr == nil {
			want, werr = io.ReadAll(io.LimitReader(zr, bound+1))
		}
		if werr == nil {
			out := make([]byte, len(want))
			if err := inflateInto(out, z); err != nil || !bytes.Equal(out, want) {
				t.Fatalf("compress/zlib decodes %d bytes; inflateInto: %v (equal %v)", len(want), err, bytes.Equal(out, want))
			}
			si := &streamInflate{src: bytes.NewReader(z), end: int64(len(z)), size: int64(len(want))}
			got, err := readStreamAll(si)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("compress/zlib decodes %d bytes; the stream %d: %v", len(want), len(got), err)
			}
			return
		}
		// compress/zlib fails: so must every size the decoder could be given.
		si := &streamInflate{src: bytes.NewReader(z), end: int64(len(z)), size: bound + 1}
		got, err := readStreamAll(si)
		if err == nil {
			t.Fatalf("compress/zlib fails (%v); the stream reads %d bytes", werr, len(got))
		}
		if !bytes.HasPrefix(got, want) && !bytes.HasPrefix(want, got) {
			t.Fatalf("compress/zlib fails (%v) after %d bytes, the stream (%v) after %d: they differ", werr, len(want), err, len(got))
		}
		for _, n := range []int{len(got), len(want)} {
			if err := inflateInto(make([]byte, n), z); err == nil {
				t.Fatalf("compress/zlib fails (%v); inflateInto decodes %d bytes", werr, n)
			}
		}
	})
}

// readStreamAll reads si from the start to its end.
func readStreamAll(si *streamInflate) ([]byte, error) {
	if err := si.reset(nil); err != nil {
		return nil, err
	}
	return io.ReadAll(readerFunc(si.read))
}

// TestHuffmanCompleteness builds tables from code lengths as compress/flate
// accepts or refuses them: complete codes, no code, and a single one-bit code
// are accepted; incomplete and over-subscribed codes are not.
func TestHuffmanCompleteness(t *testing.T) {
	for _, c := range []struct {
		lengths []uint8
		ok      bool
	}{
		{[]uint8{1, 1}, true},
		{[]uint8{2, 2, 2, 2}, true},
		{[]uint8{1, 2, 3, 3}, true},
		{[]uint8{0, 0, 0}, true}, // no code: using it fails
		{[]uint8{0, 1, 0}, true}, // one one-bit code, as zlib allows
		{[]uint8{1, 2}, false},   // incomplete
		{[]uint8{2, 2, 2}, false},
		{[]uint8{0, 2, 0}, false}, // a single code longer than one bit
		{[]uint8{1, 1, 1}, false}, // over-subscribed
		{[]uint8{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 15}, true},
		{[]uint8{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, false},
	} {
		var h huffman
		if err := h.init(c.lengths); (err == nil) != c.ok {
			t.Errorf("lengths %v: %v, want accepted %v", c.lengths, err, c.ok)
		}
	}
	// A zlib header announcing a window over 32 KiB (CINFO 8) is refused, as
	// compress/zlib refuses it; CINFO 7 is not.
	if zlibHeader(0x88, 0x1c) == nil || zlibHeader(0x78, 0x9c) != nil {
		t.Fatal("zlib header CINFO check")
	}
}

// TestStreamCRC streams a pack entry from start to end checking its index CRC:
// the right CRC reads, a wrong one fails at the end.
func TestStreamCRC(t *testing.T) {
	s := testStreams(t)["mixed/level-1"]
	data, z := s[0], s[1]
	head := []byte{0xb5, 0x01}
	want := crc32.ChecksumIEEE(append(bytes.Clone(head), z...))
	for _, c := range []struct {
		crc uint32
		ok  bool
	}{{want, true}, {want ^ 1, false}} {
		si := &streamInflate{src: bytes.NewReader(z), end: int64(len(z)), size: int64(len(data)),
			crcCheck: true, crcHead: head, crcWant: c.crc}
		got, err := readStreamAll(si)
		if c.ok && (err != nil || !bytes.Equal(got, data)) {
			t.Fatalf("right CRC: %d bytes, %v", len(got), err)
		}
		if !c.ok && err != errStreamCRC {
			t.Fatalf("wrong CRC: %v", err)
		}
	}
}
