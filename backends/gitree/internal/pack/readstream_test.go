package pack

import (
	"bytes"
	"fmt"
	"math/rand"
	"path/filepath"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/capfs/capfs/backends/gitree/internal/gittest"
)

// smallCheckpoints spaces checkpoints 128 KiB apart for the test, so that a small
// blob has many.
func smallCheckpoints(t *testing.T) {
	old := minCheckpointSpacing
	minCheckpointSpacing = 128 << 10
	t.Cleanup(func() { minCheckpointSpacing = old })
}

// streamed opens big.txt of rev in repository d through Stream.
func streamed(t *testing.T, ps *Store, d, rev string, size int64) Blob {
	t.Helper()
	h := plumbing.NewHash(gittest.RunGit(t, d, "rev-parse", rev+":big.txt"))
	b, err := ps.Stream(h, size)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStreamedRandomAccess reads a large packed blob, streamed, at random
// offsets backwards and forwards, and checks the bytes against the git CLI's;
// an undeltified blob restarts from a checkpoint near the offset instead of
// inflating from the start; a deltified one is served from memory.
func TestStreamedRandomAccess(t *testing.T) {
	smallCheckpoints(t)
	d, v1, v2 := gittest.BigBlobRepo(t)
	ps := Open(filepath.Join(d, ".git"), DefaultDeltaBaseCacheSize, false)
	defer ps.Close()
	kinds := map[string]bool{}
	for rev, want := range map[string][]byte{"HEAD": v2, "HEAD~1": v1} {
		size := int64(len(want))
		b := streamed(t, ps, d, rev, size)
		rng := rand.New(rand.NewSource(int64(len(rev))))
		buf := make([]byte, 70000)
		check := func(off int64, n int) {
			t.Helper()
			end := min(off+int64(n), size)
			got, err := b.ReadAt(buf[:end-off], off)
			if int64(got) != end-off || err != nil || !bytes.Equal(buf[:got], want[off:end]) {
				t.Fatalf("%s: ReadAt(%d, %d) = %d, %v", rev, off, end-off, got, err)
			}
		}
		// First a read near the end (inflating everything before it once), then
		// random reads anywhere.
		check(size-100, 100)
		for i := 0; i < 50; i++ {
			check(rng.Int63n(size), 1+rng.Intn(len(buf)))
		}
		switch src := b.(type) {
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
		// A read from the start to the end verifies the checksum.
		all := make([]byte, size)
		if n, err := b.ReadAt(all, 0); n != len(all) || err != nil || !bytes.Equal(all, want) {
			t.Fatalf("%s: whole read: %d bytes, %v", rev, n, err)
		}
		b.Close()
	}
	if !kinds["whole"] || !kinds["delta"] {
		t.Fatalf("blob storage seen: %v (want one whole, one delta)", kinds)
	}
}

// TestStreamedConcurrent reads one large blob through several Blobs at once;
// they share its checkpoints (run with -race).
func TestStreamedConcurrent(t *testing.T) {
	smallCheckpoints(t)
	d, _, v2 := gittest.BigBlobRepo(t)
	ps := Open(filepath.Join(d, ".git"), DefaultDeltaBaseCacheSize, false)
	defer ps.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for w := 0; w < 3; w++ {
		b := streamed(t, ps, d, "HEAD", int64(len(v2)))
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			defer b.Close()
			rng := rand.New(rand.NewSource(int64(w)))
			buf := make([]byte, 4096)
			for i := 0; i < 15; i++ {
				off := rng.Int63n(int64(len(v2) - len(buf)))
				if n, err := b.ReadAt(buf, off); n != len(buf) || err != nil || !bytes.Equal(buf, v2[off:off+int64(n)]) {
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
