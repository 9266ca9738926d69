package gitree

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/capfs/capfs/internal/rofile"
	"github.com/capfs/capfs/vfs"
)

// bigBlobRepo commits a 2 MiB text blob, then a slightly edited copy in a second
// commit, and repacks, so HEAD's big.txt is stored one way (whole or as a delta)
// and HEAD~1's the other. It returns the repository and both versions.
func bigBlobRepo(t *testing.T) (string, []byte, []byte) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not on PATH")
	}
	d := t.TempDir()
	runGit(t, d, "init", "-q")
	rng := rand.New(rand.NewSource(3))
	var b bytes.Buffer
	for i := 0; b.Len() < 2<<20; i++ {
		fmt.Fprintf(&b, "%08d %x %s\n", i, rng.Int63(), strings.Repeat("ab", rng.Intn(20)))
	}
	v1 := b.Bytes()
	write(t, filepath.Join(d, "big.txt"), string(v1), 0o644)
	runGit(t, d, "add", "-A")
	runGit(t, d, "commit", "-q", "-m", "v1")
	v2 := bytes.Clone(v1)
	copy(v2[len(v2)/2:], "EDITED")
	write(t, filepath.Join(d, "big.txt"), string(v2), 0o644)
	runGit(t, d, "add", "-A")
	runGit(t, d, "commit", "-q", "-m", "v2")
	runGit(t, d, "repack", "-adfq")
	// The git CLI's reading is the reference.
	for rev, want := range map[string][]byte{"HEAD": v2, "HEAD~1": v1} {
		cmd := exec.Command("git", "cat-file", "blob", rev+":big.txt")
		cmd.Dir = d
		out, err := cmd.Output()
		if err != nil || !bytes.Equal(out, want) {
			t.Fatalf("git cat-file %s: %d bytes, %v", rev, len(out), err)
		}
	}
	return d, v1, v2
}

// smallCheckpoints spaces checkpoints 128 KiB apart for the test, so that a small
// blob has many.
func smallCheckpoints(t *testing.T) {
	old := minCheckpointSpacing
	minCheckpointSpacing = 128 << 10
	t.Cleanup(func() { minCheckpointSpacing = old })
}

// TestStreamedRandomAccess reads a large packed blob, streamed (threshold set
// low), at random offsets backwards and forwards, and checks the bytes against
// the git CLI's; an undeltified blob restarts from a checkpoint near the offset
// instead of inflating from the start; a deltified one is served from memory.
func TestStreamedRandomAccess(t *testing.T) {
	smallCheckpoints(t)
	d, v1, v2 := bigBlobRepo(t)
	ctx := context.Background()
	kinds := map[string]bool{}
	for rev, want := range map[string][]byte{"HEAD": v2, "HEAD~1": v1} {
		g, err := Open(d, rev, WithStreamThreshold(64<<10))
		if err != nil {
			t.Fatal(err)
		}
		h, err := g.OpenFile(ctx, vfs.MustParse("big.txt"), os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		ss, streamed := h.(*rofile.File).Source().(*streamSource)
		if !streamed {
			t.Fatal("not streamed")
		}
		rng := rand.New(rand.NewSource(int64(len(rev))))
		size := int64(len(want))
		buf := make([]byte, 70000)
		check := func(off int64, n int) {
			t.Helper()
			got, err := h.ReadAt(buf[:n], off)
			end := min(off+int64(n), size)
			if int64(got) != end-off || (err != nil && !(err == io.EOF && end < off+int64(n))) ||
				!bytes.Equal(buf[:got], want[off:end]) {
				t.Fatalf("%s: ReadAt(%d, %d) = %d, %v", rev, off, n, got, err)
			}
		}
		// First a read near the end (inflating everything before it once), then
		// random reads anywhere.
		check(size-100, 100)
		for i := 0; i < 50; i++ {
			check(rng.Int63n(size), 1+rng.Intn(len(buf)))
		}
		switch src := ss.src.(type) {
		case *packedBlob:
			kinds["whole"] = true
			src.idx.mu.Lock()
			n := len(src.idx.cps)
			src.idx.mu.Unlock()
			if n < 8 {
				t.Fatalf("%s: %d checkpoints for %d bytes", rev, n, size)
			}
			// Backwards reads restart from a checkpoint at most one spacing (plus a
			// deflate block) before the offset.
			for i := 0; i < 8; i++ {
				off := size/2 + rng.Int63n(size/2)
				check(off, 1000)
				check(off-500_000, 10)
				if gap := off - 500_000 - src.from; gap < 0 || gap > src.idx.spacing+256<<10 {
					t.Fatalf("%s: read at %d restarted at %d", rev, off-500_000, src.from)
				}
			}
		case memBlob:
			kinds["delta"] = true
		default:
			t.Fatalf("%s: blob source %T", rev, src)
		}
		// A sequential read from the start to the end verifies the checksum.
		if _, err := h.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		all, err := io.ReadAll(h)
		if err != nil || !bytes.Equal(all, want) {
			t.Fatalf("%s: ReadAll: %d bytes, %v", rev, len(all), err)
		}
		h.Close()
		g.Close()
	}
	if !kinds["whole"] || !kinds["delta"] {
		t.Fatalf("blob storage seen: %v (want one whole, one delta)", kinds)
	}
}

// TestStreamedConcurrent reads one large blob through several handles at once;
// they share its checkpoints (run with -race).
func TestStreamedConcurrent(t *testing.T) {
	smallCheckpoints(t)
	d, _, v2 := bigBlobRepo(t)
	g, err := Open(d, "HEAD", WithStreamThreshold(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			h, err := g.OpenFile(context.Background(), vfs.MustParse("big.txt"), os.O_RDONLY, 0)
			if err != nil {
				errs <- err
				return
			}
			defer h.Close()
			rng := rand.New(rand.NewSource(int64(w)))
			buf := make([]byte, 4096)
			for i := 0; i < 15; i++ {
				off := rng.Int63n(int64(len(v2) - len(buf)))
				if n, err := h.ReadAt(buf, off); n != len(buf) || err != nil || !bytes.Equal(buf, v2[off:off+int64(n)]) {
					errs <- fmt.Errorf("ReadAt(%d) = %d, %v", off, n, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
