package pack

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"sync"
	"testing"
)

// testStreams returns zlib streams of varied data at every kind of block git's
// zlib can emit: stored (level 0), fixed and dynamic Huffman, long runs.
func testStreams(t testing.TB) map[string][2][]byte {
	streamsOnce.Do(func() { streams = makeTestStreams() })
	return streams
}

var (
	streamsOnce sync.Once
	streams     map[string][2][]byte
)

func makeTestStreams() map[string][2][]byte {
	rng := rand.New(rand.NewSource(7))
	text := func(n int) []byte {
		words := []string{"func", "return", "if err != nil {", "}", "package", "import", "\n", "\t", "x", "yy"}
		var b bytes.Buffer
		for b.Len() < n {
			b.WriteString(words[rng.Intn(len(words))])
			if rng.Intn(9) == 0 {
				fmt.Fprintf(&b, "%d", rng.Int())
			}
		}
		return b.Bytes()[:n]
	}
	random := func(n int) []byte { b := make([]byte, n); rng.Read(b); return b }
	mixed := append(append(append(text(300000), make([]byte, 200000)...), random(150000)...), text(400000)...)
	datas := map[string][]byte{
		"empty": {}, "one": {'x'}, "text": text(100000), "random": random(70000),
		"zeros": make([]byte, 256<<10), "mixed": mixed,
	}
	out := map[string][2][]byte{}
	for name, data := range datas {
		for _, level := range []int{zlib.NoCompression, zlib.BestSpeed, zlib.DefaultCompression, zlib.BestCompression, zlib.HuffmanOnly} {
			var b bytes.Buffer
			w, _ := zlib.NewWriterLevel(&b, level)
			w.Write(data)
			w.Close()
			out[fmt.Sprintf("%s/level%d", name, level)] = [2][]byte{data, b.Bytes()}
		}
	}
	return out
}

// TestInflateInto decodes whole streams into exact-size buffers and compares
// them with compress/zlib's input; corrupting the stream or lying about the size
// fails.
func TestInflateInto(t *testing.T) {
	for name, s := range testStreams(t) {
		data, z := s[0], s[1]
		out := make([]byte, len(data))
		if err := inflateInto(out, z); err != nil || !bytes.Equal(out, data) {
			t.Fatalf("%s: %v (equal %v)", name, err, bytes.Equal(out, data))
		}
		if err := inflateInto(make([]byte, len(data)+1), z); err == nil {
			t.Fatalf("%s: inflated into a buffer one byte too long", name)
		}
		if len(data) > 0 {
			if err := inflateInto(make([]byte, len(data)-1), z); err == nil {
				t.Fatalf("%s: inflated into a buffer one byte too short", name)
			}
		}
		bad := bytes.Clone(z)
		bad[len(bad)-1] ^= 1 // the checksum
		if err := inflateInto(out, bad); err == nil {
			t.Fatalf("%s: bad checksum accepted", name)
		}
		if err := inflateInto(out, z[:len(z)-5]); err == nil {
			t.Fatalf("%s: truncated stream accepted", name)
		}
	}
}

// TestStreamInflateCheckpoints streams each stream to its end (checksum checked),
// recording a checkpoint at every block boundary, then resumes from every
// checkpoint and reads to the end, comparing with the original data.
func TestStreamInflateCheckpoints(t *testing.T) {
	for name, s := range testStreams(t) {
		data, z := s[0], s[1]
		src := bytes.NewReader(append([]byte("junk before"), append(z, "junk after"...)...))
		si := &streamInflate{src: src, start: 11, end: 11 + int64(len(z)), size: int64(len(data))}
		var cps []checkpoint
		si.d.onBoundary = nil
		if err := si.reset(nil); err != nil {
			t.Fatal(err)
		}
		si.d.onBoundary = func(d *inflate) { cps = append(cps, d.snapshot()) }
		got, err := io.ReadAll(readerFunc(si.read))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: streamed %d bytes (want %d): %v", name, len(got), len(data), err)
		}
		if strings.HasPrefix(name, "mixed/") && len(cps) < 3 {
			t.Fatalf("%s: only %d checkpoints", name, len(cps))
		}
		if len(cps) > 4 {
			cps = []checkpoint{cps[0], cps[len(cps)/3], cps[2*len(cps)/3], cps[len(cps)-1]}
		}
		for i, c := range cps {
			if err := si.reset(&c); err != nil {
				t.Fatal(err)
			}
			if si.pos() != c.out {
				t.Fatalf("%s: at %d after reset to %d", name, si.pos(), c.out)
			}
			rest, err := io.ReadAll(readerFunc(si.read))
			if err != nil || !bytes.Equal(rest, data[c.out:]) {
				t.Fatalf("%s: from checkpoint %d (out %d, bit %d): %d bytes, %v", name, i, c.out, c.bit, len(rest), err)
			}
		}
		// A corrupted checksum fails a read from the start at the end.
		bad := bytes.Clone(z)
		bad[len(bad)-2] ^= 1
		si2 := &streamInflate{src: bytes.NewReader(bad), end: int64(len(bad)), size: int64(len(data))}
		if err := si2.reset(nil); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(readerFunc(si2.read)); err == nil {
			t.Fatalf("%s: bad checksum accepted", name)
		}
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }

// BenchmarkInflate compares the package's whole-object inflate with
// klauspost/compress's (as WithLibraryInflater uses it, allocating the output)
// and compress/zlib on Go-like text.
func BenchmarkInflate(b *testing.B) {
	s := testStreams(b)["mixed/level-1"]
	data, z := s[0], s[1]
	out := make([]byte, len(data))
	b.Run("inflateInto", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := inflateInto(out, z); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("klauspost/compress", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			got, err := libInflateAll(z, int64(len(data)))
			if err != nil || len(got) != len(data) {
				b.Fatal(err)
			}
		}
	})
	b.Run("compress/zlib", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			zr, err := zlib.NewReader(bytes.NewReader(z))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(zr, out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestInflateCorrupt mutates valid streams at random (flipped bits, truncation,
// spliced bytes): decoding each must fail or produce exactly the original data,
// never panic.
func TestInflateCorrupt(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	all := testStreams(t)
	for _, name := range []string{"text/level-1", "text/level1", "text/level0", "text/level9", "one/level-2"} {
		data, z := all[name][0], all[name][1]
		if len(z) == 0 {
			t.Fatalf("no stream %s", name)
		}
		for i := 0; i < 120; i++ {
			bad := bytes.Clone(z)
			switch i % 3 {
			case 0:
				for k := 0; k < 1+rng.Intn(3); k++ {
					bad[rng.Intn(len(bad))] ^= 1 << rng.Intn(8)
				}
			case 1:
				bad = bad[:rng.Intn(len(bad))]
			default:
				j := rng.Intn(len(bad))
				bad = append(bad[:j:j], append(make([]byte, 1+rng.Intn(8)), bad[j:]...)...)
				rng.Read(bad[j : j+1])
			}
			out := make([]byte, len(data))
			if err := inflateInto(out, bad); err == nil && !bytes.Equal(out, data) {
				t.Fatalf("%s mutation %d: wrong data accepted", name, i)
			}
			si := &streamInflate{src: bytes.NewReader(bad), end: int64(len(bad)), size: int64(len(data))}
			if err := si.reset(nil); err == nil {
				got, err := io.ReadAll(readerFunc(si.read))
				if err == nil && !bytes.Equal(got, data) {
					t.Fatalf("%s mutation %d: stream accepted wrong data", name, i)
				}
			}
		}
	}
}
