package gitree

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"

	"github.com/capfs/capfs/internal/rofile"
	"github.com/capfs/capfs/vfs"
)

// streamHeapWindow is the most that reading a streamed blob of any size through
// OpenFile may allocate, from OpenFile to Close: the decoder's window (32 KiB of
// history and 256 KiB of output), 64 KiB of input and the blob's checkpoints
// (at most 128 of 32 KiB: 4 MiB), with room to spare.
const streamHeapWindow = 32 << 20

// bigBlobLine is line i of the large blob the streaming test generates:
// compressible like text, but not trivially.
func bigBlobLine(b []byte, i int) []byte {
	// No fmt: boxing the numbers would allocate in the measured read.
	for p := 100_000_000_000; p > 1 && i < p; p /= 10 {
		b = append(b, '0') // zero-padded to 12 digits
	}
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(uint32(i)*2654435761), 16)
	b = append(b, " the quick brown fox "...)
	b = strconv.AppendInt(b, int64(i%977), 10)
	return append(b, '\n')
}

// writeBigBlob writes the first size bytes of the generated content to w.
func writeBigBlob(w io.Writer, size int64) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	var line []byte
	for i, n := 0, int64(0); n < size; i++ {
		line = bigBlobLine(line[:0], i)
		k := min(int64(len(line)), size-n)
		if _, err := bw.Write(line[:k]); err != nil {
			return err
		}
		n += k
	}
	return bw.Flush()
}

// TestStreamedBlobHeapBoundStress (run by make stress, whose -run matches
// "Stress", with CAPFS_STRESS=1) commits one large blob with git fast-import (which
// stores it whole in a pack) and reads it through OpenFile from start to end,
// comparing every byte: the whole read allocates at most streamHeapWindow
// bytes (runtime.MemStats.TotalAlloc, which bounds the heap's growth), whatever
// the blob's size. The blob is 64 MiB in a normal run and 512 MiB with
// CAPFS_STRESS=1; the bound is the same.
func TestStreamedBlobHeapBoundStress(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not on PATH")
	}
	size := int64(64 << 20)
	if os.Getenv("CAPFS_STRESS") == "1" {
		size = 512 << 20
	}
	d := t.TempDir()
	runGit(t, d, "init", "-q", "--bare")
	cmd := exec.Command("git", "-c", "fastimport.unpackLimit=1", "fast-import", "--quiet") // keep the pack, however few its objects
	cmd.Dir = d
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	werr := func() error {
		if _, err := fmt.Fprintf(in, "blob\nmark :1\ndata %d\n", size); err != nil {
			return err
		}
		if err := writeBigBlob(in, size); err != nil {
			return err
		}
		_, err := io.WriteString(in, "\ncommit refs/heads/main\ncommitter t <t@e> 0 +0000\ndata 3\nbig\nM 100644 :1 big\n\n")
		return err
	}()
	in.Close()
	if err := cmd.Wait(); err != nil || werr != nil {
		t.Fatalf("git fast-import: %v, %v\n%s", err, werr, stderr.String())
	}

	g, err := Open(d, "main")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h, err := g.OpenFile(context.Background(), vfs.MustParse("big"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	ss, streamed := h.(*rofile.File).Source().(*streamSource)
	if info, _ := h.Stat(); !streamed || info.Size != size {
		t.Fatalf("streamed %v, size %d (want %d)", streamed, info.Size, size)
	}
	cmp := &compareWriter{}
	buf := make([]byte, 256<<10)
	n, err := io.CopyBuffer(cmp, h, buf)
	if err != nil || n != size || cmp.bad >= 0 {
		t.Fatalf("read %d of %d bytes, %v; first difference at %d", n, size, err, cmp.bad)
	}
	if fmt.Sprintf("%T", ss.src) != "*pack.packedBlob" {
		t.Fatalf("blob source %T, want the packed stream", ss.src)
	}
	h.Close()
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("read %d MiB streamed: %.1f MiB allocated (bound %d MiB), heap %d -> %d MiB",
		size>>20, float64(alloc)/(1<<20), streamHeapWindow>>20, before.HeapAlloc>>20, after.HeapAlloc>>20)
	if alloc > streamHeapWindow {
		t.Fatalf("reading a %d MiB blob allocated %d bytes (bound %d)", size>>20, alloc, streamHeapWindow)
	}
}

// compareWriter checks what is written against the generated blob.
type compareWriter struct {
	off  int64
	i    int    // next line to generate
	buf  []byte // the line generated last
	line []byte // its bytes not yet compared
	bad  int64
	init bool
}

func (c *compareWriter) Write(p []byte) (int, error) {
	if !c.init {
		c.init, c.bad = true, -1
	}
	n := len(p)
	for len(p) > 0 {
		if len(c.line) == 0 {
			c.buf = bigBlobLine(c.buf[:0], c.i)
			c.line = c.buf
			c.i++
		}
		k := min(len(p), len(c.line))
		if c.bad < 0 && !bytes.Equal(p[:k], c.line[:k]) {
			c.bad = c.off
		}
		p, c.line = p[k:], c.line[k:]
		c.off += int64(k)
	}
	return n, nil
}
