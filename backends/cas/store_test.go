package cas

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
)

func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestStoreRoundTrip(t *testing.T) {
	s := newStore(t)
	text := []byte(strings.Repeat("compressible text, ", 5000))
	for name, b := range map[string][]byte{
		"empty": nil, "small": []byte("hi"), "text": text, "random": randBytes(100_000, 1),
		"large text": bytes.Repeat(text, 60), "large random": randBytes(4<<20+4096, 2),
	} {
		d, err := s.Put(bg, bytes.NewReader(b))
		if err != nil {
			t.Fatal(name, err)
		}
		if d != DigestOf(b) {
			t.Fatalf("%s: Put digest %s, want %s", name, d, DigestOf(b))
		}
		got, err := s.ReadBlob(bg, d, -1)
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("%s: ReadBlob: %d bytes, %v", name, len(got), err)
		}
		rc, err := s.OpenBlob(bg, d)
		if err != nil {
			t.Fatal(err)
		}
		got, err = io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("%s: OpenBlob: %d bytes, %v", name, len(got), err)
		}
		if len(b) == 0 {
			if _, err := os.Stat(s.blobPath(d)); err == nil {
				t.Error("the empty blob was written to a file")
			}
			continue
		}
		fi, _ := os.Stat(s.blobPath(d))
		compressible := len(b) > 1000 && name != "random" && name != "large random"
		if compressible && fi.Size() >= int64(len(b))/4 {
			t.Errorf("%s: %d bytes at rest for %d", name, fi.Size(), len(b))
		}
		if !compressible && fi.Size() != int64(len(b))+1 {
			t.Errorf("%s: %d bytes at rest for %d incompressible bytes", name, fi.Size(), len(b))
		}
	}
	// No temporary file is left behind.
	if ents, _ := os.ReadDir(s.dir + "/tmp"); len(ents) != 0 {
		t.Errorf("tmp holds %d files", len(ents))
	}
}

func TestStoreCorruption(t *testing.T) {
	s := newStore(t)
	for name, b := range map[string][]byte{
		"small raw": randBytes(5000, 3), "small zstd": []byte(strings.Repeat("z", 5000)),
		"large raw": randBytes(4<<20+4096, 4), "large zstd": bytes.Repeat([]byte("abcdefgh"), 1<<19+512),
	} {
		d, err := s.PutBytes(bg, b)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := os.ReadFile(s.blobPath(d))
		damaged := map[string][]byte{
			"truncated": raw[:len(raw)-7],
			"extended":  append(append([]byte{}, raw...), 'x'),
			"empty":     nil,
			"bad tag":   append([]byte{9}, raw[1:]...),
		}
		// Flipped bits everywhere in the file: a flip zstd does not notice
		// (in a field that does not change the output) may read back the right
		// bytes; anything else must be ErrCorrupt, never other bytes.
		step := len(raw) / 6
		if len(raw) > smallBlob {
			step = len(raw) / 2 // large files: fewer flips, each read is 4 MiB under -race
		}
		for i := 1; i < len(raw); i += max(1, step) {
			damaged[fmt.Sprintf("flipped@%d", i)] = flip(raw, i)
		}
		for how, bad := range damaged {
			os.WriteFile(s.blobPath(d), bad, 0o600)
			got, err := s.ReadBlob(bg, d, -1)
			if !errors.Is(err, ErrCorrupt) && !(err == nil && bytes.Equal(got, b) && strings.HasPrefix(how, "flipped")) {
				t.Errorf("%s %s: ReadBlob: %v, want ErrCorrupt", name, how, err)
			}
			rc, err := s.OpenBlob(bg, d)
			if err == nil {
				got, err = io.ReadAll(rc)
				rc.Close()
			}
			if !errors.Is(err, ErrCorrupt) && !(err == nil && bytes.Equal(got, b) && strings.HasPrefix(how, "flipped")) {
				t.Errorf("%s %s: streamed read: %v, want ErrCorrupt", name, how, err)
			}
		}
		os.WriteFile(s.blobPath(d), raw, 0o600)
	}
	if _, err := s.ReadBlob(bg, DigestOf([]byte("never stored")), -1); !errors.Is(err, ErrMissing) {
		t.Errorf("missing blob: %v", err)
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte{}, b...)
	c[i] ^= 0x40
	return c
}

func TestPutDigestMismatch(t *testing.T) {
	s := newStore(t)
	for _, n := range []int{10, 6 << 20} {
		b := randBytes(n, 5)
		want := DigestOf(append([]byte{1}, b[1:]...))
		if err := s.PutDigest(bg, want, bytes.NewReader(b)); !errors.Is(err, ErrMismatch) {
			t.Fatalf("%d bytes: PutDigest of other bytes: %v", n, err)
		}
		if ok, _ := s.Has(want); ok {
			t.Fatal("a mismatching blob was stored")
		}
		short := DigestOf(b)
		short.Size--
		if err := s.PutDigest(bg, short, bytes.NewReader(b)); !errors.Is(err, ErrMismatch) {
			t.Fatalf("%d bytes: PutDigest with a wrong size: %v", n, err)
		}
		if err := s.PutDigest(bg, DigestOf(b), bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLargeBlobBoundedMemoryStress stores and reads back a blob larger than the
// memory the store may use for it: 16 MiB, and the 1 GiB with
// CAPFS_STRESS=1 (make stress). Everything allocated while storing and reading
// it back (TotalAlloc, not just the live heap) stays under 48 MiB whatever the
// size.
func TestLargeBlobBoundedMemoryStress(t *testing.T) {
	n := int64(16 << 20)
	if os.Getenv("CAPFS_STRESS") != "" {
		n = 1 << 30
	}
	s := newStore(t)
	src := io.LimitReader(&pattern{}, n)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	d, err := s.Put(bg, src)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := s.OpenBlob(bg, d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.Copy(io.Discard, rc)
	rc.Close()
	runtime.ReadMemStats(&m1)
	if err != nil || got != n {
		t.Fatalf("read back %d bytes, %v", got, err)
	}
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 48<<20 {
		t.Errorf("storing and reading %d MiB allocated %d MiB", n>>20, alloc>>20)
	} else {
		t.Logf("storing and reading %d MiB allocated %.1f MiB", n>>20, float64(alloc)/(1<<20))
	}
}

// pattern is an endless, mildly compressible stream.
type pattern struct{ i uint64 }

func (p *pattern) Read(b []byte) (int, error) {
	for k := range b {
		p.i++
		b[k] = byte(p.i*p.i>>7) ^ byte(p.i>>13)
	}
	return len(b), nil
}
