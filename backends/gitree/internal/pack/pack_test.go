package pack

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/capfs/capfs/backends/gitree/internal/gittest"
	"github.com/capfs/capfs/vfs"
)

// countEntries counts the entries of each pack type in the store's packs.
func countEntries(t *testing.T, ps *Store) map[int]int {
	t.Helper()
	n := map[int]int{}
	var hb [maxHeader]byte
	for _, p := range ps.packs {
		for _, off := range p.ends[:len(p.ends)-1] {
			e, err := p.header(off, hb[:])
			if err != nil {
				t.Fatal(err)
			}
			n[e.typ]++
		}
	}
	return n
}

// TestPackReaderMatchesGit reads every object of deltified packs (OFS_DELTA and
// REF_DELTA, with and without the delta base cache) through the direct pack
// reader and compares it with the git CLI's reading: types, bytes and sizes.
func TestPackReaderMatchesGit(t *testing.T) {
	for _, ref := range []bool{false, true} {
		d := gittest.DeltaRepo(t, ref)
		objs := gittest.Objects(t, d)
		for _, cache := range []int64{DefaultDeltaBaseCacheSize, 0} {
			t.Run(fmt.Sprintf("ref=%v,cache=%d", ref, cache), func(t *testing.T) {
				ps := Open(filepath.Join(d, ".git"), cache, false)
				if ps == nil {
					t.Fatal("no pack opened")
				}
				defer ps.Close()
				kinds := countEntries(t, ps)
				deltaKind := packOfsDelta
				if ref {
					deltaKind = packRefDelta
				}
				if kinds[deltaKind] < 10 {
					t.Fatalf("pack entries by type %v: want deltas of type %d", kinds, deltaKind)
				}
				counts := map[string]int{}
				for h, o := range objs {
					counts[o.Type]++
					typ, data, err := ps.Read(h, -1)
					if err != nil || typ.String() != o.Type || !bytes.Equal(data, o.Data) {
						t.Fatalf("%s %s: %s of %d bytes (want %d), %v", o.Type, h, typ, len(data), len(o.Data), err)
					}
					typ, size, err := ps.Info(h)
					if err != nil || typ.String() != o.Type || size != int64(len(o.Data)) {
						t.Fatalf("%s %s: info %s %d (want %d), %v", o.Type, h, typ, size, len(o.Data), err)
					}
					if len(o.Data) > 0 {
						if _, _, err := ps.Read(h, int64(len(o.Data))-1); err != ErrTooLarge {
							t.Fatalf("%s %s read with a max under its size: %v", o.Type, h, err)
						}
					}
				}
				if counts["blob"] < 40 || counts["tree"] < 10 {
					t.Fatalf("objects by type: %v", counts)
				}
			})
		}
	}
}

// TestPackReaderConcurrent reads every blob from several goroutines at once with
// a delta base cache too small to hold them all (run it with -race).
func TestPackReaderConcurrent(t *testing.T) {
	d := gittest.DeltaRepo(t, false)
	objs := gittest.Objects(t, d)
	ps := Open(filepath.Join(d, ".git"), 64<<10, false)
	defer ps.Close()
	var ids []plumbing.Hash
	for h, o := range objs {
		if o.Type == "blob" {
			ids = append(ids, h)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := range ids {
				h := ids[(i+w*7)%len(ids)]
				_, data, err := ps.Read(h, -1)
				if err != nil || !bytes.Equal(data, objs[h].Data) {
					errs <- fmt.Errorf("blob %s: %d bytes, %v", h, len(data), err)
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
	if ps.bases.used > 64<<10 {
		t.Fatalf("delta base cache holds %d bytes over its budget", ps.bases.used)
	}
}

// TestApplyDeltaRejectsCorruption feeds applyDelta deltas that lie about sizes or
// copy outside the base.
func TestApplyDeltaRejectsCorruption(t *testing.T) {
	base := []byte("hello, world")
	good := []byte{12, 5, 0x91, 7, 5} // copy 5 bytes from offset 7
	if out, err := applyDelta(base, good); err != nil || string(out) != "world" {
		t.Fatalf("good delta: %q, %v", out, err)
	}
	for _, bad := range [][]byte{
		{11, 5, 0x91, 7, 5},       // wrong base size
		{12, 6, 0x91, 7, 5},       // wrong result size
		{12, 5, 0x91, 9, 5},       // copy past the base's end
		{12, 5, 0x00},             // reserved instruction
		{12, 3, 3, 'a', 'b'},      // insert past the delta's end
		{12, 5, 0x91, 7},          // truncated copy
		{0x80, 0x80, 0x80, 0x80},  // unterminated size
		{12, 2, 2, 'a', 'b', 'c'}, // output past the declared size
	} {
		if out, err := applyDelta(base, bad); err == nil {
			t.Fatalf("delta %v applied: %q", bad, out)
		}
	}
}

// TestCorruptPack flips bytes inside a pack's entries: every object then reads
// either correctly or with an error, never wrong bytes or a panic. A pack whose
// trailer no longer matches its index is refused, for every object it names.
func TestCorruptPack(t *testing.T) {
	d := gittest.DeltaRepo(t, false)
	objs := gittest.Objects(t, d)
	gitDir := filepath.Join(d, ".git")
	packs, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "pack-*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs: %v", packs)
	}
	orig, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(5))
	for round := 0; round < 4; round++ {
		bad := bytes.Clone(orig)
		for k := 0; k < 20; k++ {
			bad[12+rng.Intn(len(bad)-32)] ^= byte(1 + rng.Intn(255))
		}
		if err := os.WriteFile(packs[0], bad, 0o644); err != nil {
			t.Fatal(err)
		}
		ps := Open(gitDir, int64(round%2)*DefaultDeltaBaseCacheSize, false)
		if ps == nil || len(ps.packs) != 1 {
			t.Fatal("pack refused: only its entries were changed")
		}
		failed := 0
		for h, o := range objs {
			if o.Type != "blob" {
				continue
			}
			_, data, err := ps.Read(h, -1)
			if err != nil {
				failed++
				continue
			}
			if !bytes.Equal(data, o.Data) {
				t.Fatalf("round %d: blob %s read wrong bytes without an error", round, h)
			}
		}
		ps.Close()
		if failed == 0 {
			t.Fatalf("round %d: 20 corrupted bytes went unnoticed", round)
		}
	}
	// A changed trailer no longer matches the index: git refuses such a pack,
	// and so does the reader, with io_error for every object the index names,
	// without handing it to go-git (gitree's TestMismatchedPackRefused opens it).
	bad := bytes.Clone(orig)
	bad[len(bad)-1] ^= 1
	if err := os.WriteFile(packs[0], bad, 0o644); err != nil {
		t.Fatal(err)
	}
	ps := Open(gitDir, 0, false)
	if ps == nil || len(ps.packs) != 0 || len(ps.bad) != 1 {
		t.Fatalf("packs opened: %+v", ps)
	}
	for h := range objs {
		if _, _, err := ps.Read(h, -1); vfs.CodeOf(err) != vfs.CodeIO || !strings.Contains(err.Error(), "does not match its index") {
			t.Fatalf("object %s of the mismatched pack: %v", h, err)
		}
		if _, _, err := ps.Info(h); vfs.CodeOf(err) != vfs.CodeIO {
			t.Fatalf("object %s of the mismatched pack: info %v", h, err)
		}
	}
}
