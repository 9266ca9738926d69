package sqlite

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/capfs/capfs/vfs"
)

// TestGroupCommitShares: operations in flight together share one commit, and
// each returns only once that commit is done. Two operations enter; the first
// to leave does not commit (the other is still in flight) and waits; the second
// commits both.
func TestGroupCommitShares(t *testing.T) {
	f, _ := newFS(t)
	st := f.st
	w := st.w
	w.maxAge = time.Hour // only the last to leave commits, however slow the machine
	before := w.commits.Load()
	w.enter()
	w.enter()
	b1, err := st.exec("mkdir", vfs.Root, func() error { return w.x(w.setMtime, 1, 0, int64(1)) })
	must(t, err)
	done := make(chan error)
	go func() { done <- w.leave(b1) }()
	select {
	case err := <-done:
		t.Fatalf("the first operation returned (%v) before the batch committed", err)
	default:
	}
	b2, err := st.exec("mkdir", vfs.Root, func() error { return w.x(w.setMtime, 2, 0, int64(1)) })
	must(t, err)
	if b1 != b2 {
		t.Fatal("operations in flight together went into different batches")
	}
	must(t, w.leave(b2))
	must(t, <-done)
	if n := w.commits.Load() - before; n != 1 {
		t.Fatalf("%d commits for two operations in flight together, want 1", n)
	}
}

// TestGroupCommitConcurrent: many writers share commits (fewer commits than
// operations), reported, not asserted beyond correctness: the sharing depends
// on the scheduler.
func TestGroupCommitConcurrent(t *testing.T) {
	f, _ := newFS(t)
	before := f.st.w.commits.Load()
	var wg sync.WaitGroup
	const workers, each = 8, 50
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := f.WriteFile(bg, P(fmt.Sprintf("w%d-%d", w, i)), []byte("x"), 0o644); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d operations, %d commits", workers*each, f.st.w.commits.Load()-before)
}
