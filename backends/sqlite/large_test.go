package sqlite

import (
	"io"
	"os"
	"runtime"
	"testing"
)

// TestLargeFileStress streams a file much larger than a chunk through 1 MiB
// writes and reads and checks that the live Go heap stays bounded (no whole-file
// buffer anywhere): 32 MiB in a normal run, 1 GiB under CAPFS_STRESS=1. The
// data cache is kept at 4 MiB and the heap is measured after a collection, so
// the bound (16 MiB) is under the file's size and a whole-file buffer fails it.
func TestLargeFileStress(t *testing.T) {
	size := int64(32 << 20)
	if os.Getenv("CAPFS_STRESS") != "" {
		size = 1 << 30
	}
	f, _ := newFS(t, WithDataCache(4<<20))
	buf := make([]byte, 1<<20)
	var peak uint64
	sample := func() {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	}
	h, err := f.OpenFile(bg, P("big"), os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	for off := int64(0); off < size; off += int64(len(buf)) {
		for i := range buf {
			buf[i] = byte(off>>20) ^ byte(i)
		}
		_, err := h.Write(buf)
		must(t, err)
		if off%(16<<20) == 0 {
			sample()
		}
	}
	must(t, h.Close())
	h, err = f.OpenFile(bg, P("big"), os.O_RDONLY, 0)
	must(t, err)
	defer h.Close()
	for off := int64(0); ; off += int64(len(buf)) {
		n, err := io.ReadFull(h, buf)
		if err == io.EOF {
			if off != size {
				t.Fatalf("read %d bytes, want %d", off, size)
			}
			break
		}
		must(t, err)
		for i := range n {
			if buf[i] != byte(off>>20)^byte(i) {
				t.Fatalf("byte %d differs", off+int64(i))
			}
		}
		if off%(16<<20) == 0 {
			sample()
		}
	}
	if limit := uint64(16 << 20); peak > limit {
		t.Fatalf("Go heap peaked at %d MiB streaming a %d MiB file", peak>>20, size>>20)
	}
	t.Logf("streamed %d MiB; Go heap peak %d MiB", size>>20, peak>>20)
}
