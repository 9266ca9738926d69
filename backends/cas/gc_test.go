package cas

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestGC(t *testing.T) {
	s := newStore(t)
	keep := snap(t, s, build(t, "k=keep", "d/", "d/shared=shared"))
	if err := s.SaveRoot("keep", keep); err != nil {
		t.Fatal(err)
	}
	drop := snap(t, s, build(t, "x=drop me", "d/", "d/shared=shared"))
	junk, _ := s.PutBytes(bg, []byte("junk"))
	young, _ := s.PutBytes(bg, []byte("young"))
	// Age everything but "young", and the pins.
	old := time.Now().Add(-2 * time.Hour)
	filepath.Walk(s.dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && p != s.blobPath(young) {
			os.Chtimes(p, old, old)
		}
		return nil
	})
	st, err := s.GC(bg, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyTree(bg, keep); err != nil {
		t.Fatalf("a named tree lost a blob: %v", err)
	}
	for _, d := range []Digest{drop, junk, DigestOf([]byte("drop me"))} {
		if ok, _ := s.Has(d); ok {
			t.Errorf("%s survived the collection", d)
		}
	}
	if ok, _ := s.Has(young); !ok {
		t.Error("a blob within the grace period was deleted")
	}
	// Deleted: drop's root directory, "drop me", "junk" (d/ is shared with keep).
	if st.Deleted != 3 || st.Young != 1 {
		t.Errorf("stats %+v, want 3 deleted and 1 young", st)
	}
	// A broken root stops the collection before it deletes anything.
	b, _ := s.ReadBlob(bg, keep, -1)
	dir, _ := DecodeDirectory(b)
	os.Remove(s.blobPath(dir.Dirs[0].Digest))
	before := countBlobs(s)
	if _, err := s.GC(bg, 0); err == nil {
		t.Fatal("GC with an unreadable tree succeeded")
	}
	if countBlobs(s) != before {
		t.Fatal("GC deleted blobs although it could not mark a tree")
	}
}

func countBlobs(s *Store) int {
	n := 0
	filepath.Walk(filepath.Join(s.dir, "blobs"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// TestGCRacesIngest runs collections with no grace period at all while
// snapshots of changing trees are taken and named, re-using blobs of earlier
// rounds (through content and through the stat cache, which reads no blob):
// every named root must stay whole. Snapshot's Name option names the root under
// the ingest lock, so nothing but the lock protects it here, not timing.
func TestGCRacesIngest(t *testing.T) {
	s := newStore(t)
	rounds := 12
	if os.Getenv("CAPFS_STRESS") != "" {
		rounds = 200
	}
	hosts := []string{t.TempDir(), t.TempDir()}
	for _, h := range hosts {
		writeTree(t, h, 30)
	}
	var writers, collector sync.WaitGroup
	stop := make(chan struct{})
	gcs, deleted := 0, 0
	collector.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			st, err := s.GC(bg, 0)
			if err != nil {
				t.Error(err)
				return
			}
			gcs++
			deleted += st.Deleted
		}
	})
	for w := range 2 {
		writers.Go(func() {
			for i := range rounds {
				var d Digest
				var err error
				if i%2 == 0 {
					m := build(t, "d/", fmt.Sprintf("d/f=%d-%d", w, i), fmt.Sprintf("g=%d", i%3), "same=same")
					d, err = s.Snapshot(bg, m, SnapshotOptions{Name: fmt.Sprintf("w%d", w)})
				} else {
					os.WriteFile(filepath.Join(hosts[w], "d0/s0/f0.txt"), []byte(fmt.Sprintf("%d-%d", w, i)), 0o644)
					d, err = s.SnapshotHost(bg, hosts[w], SnapshotOptions{Name: fmt.Sprintf("w%d", w)})
				}
				if err != nil {
					t.Error(err)
					return
				}
				if err := s.VerifyTree(bg, d); err != nil {
					t.Errorf("worker %d round %d: %v", w, i, err)
					return
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	collector.Wait()
	for _, r := range []string{"w0", "w1"} {
		d, err := s.Root(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.VerifyTree(bg, d); err != nil {
			t.Errorf("root %s broken after racing GC: %v", r, err)
		}
	}
	if deleted == 0 {
		t.Error("the collections deleted nothing: the race did not happen")
	}
	t.Logf("%d collections deleted %d blobs while %d snapshots ran", gcs, deleted, 2*rounds)
}

// TestGCGracePeriodKeepsUnnamedSnapshot: a snapshot not yet named survives a
// collection within the grace period, and not after it.
func TestGCGracePeriodKeepsUnnamedSnapshot(t *testing.T) {
	s := newStore(t)
	d := snap(t, s, build(t, "a=unnamed"))
	if _, err := s.GC(bg, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyTree(bg, d); err != nil {
		t.Fatalf("an unnamed snapshot within the grace period was collected: %v", err)
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := s.GC(bg, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Has(d); ok {
		t.Fatal("an unnamed snapshot older than the grace period survived")
	}
}
