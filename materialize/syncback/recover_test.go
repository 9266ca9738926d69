//go:build linux

package syncback_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/vfs"
)

// writeCrashJournal leaves in jdir what a sync killed before its only step
// (a.txt: old -> new) leaves: a committed journal and a checkout.
func writeCrashJournal(t *testing.T, jdir string) (journal, checkout string) {
	t.Helper()
	checkout = filepath.Join(t.TempDir(), "capfs-checkout-1")
	must(t, os.Mkdir(checkout, 0o700))
	must(t, os.WriteFile(filepath.Join(checkout, "a.txt"), []byte("new\n"), 0o644))
	mtime := time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)
	must(t, os.Chtimes(filepath.Join(checkout, "a.txt"), mtime, mtime))
	entry := func(data string, tm time.Time) materialize.Entry {
		sum := sha256.Sum256([]byte(data))
		return materialize.Entry{Size: int64(len(data)), Mode: 0o644, ModTime: tm, Digest: hex.EncodeToString(sum[:])}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	old, ne := entry("old\n", time.Now()), entry("new\n", mtime)
	for _, rec := range []any{
		map[string]any{"capfs_sync_journal": 1, "label": "test", "checkout": checkout, "created": time.Now(), "steps": 1, "ops": 1},
		map[string]any{"step": map[string]any{"kind": "modified", "path": "a.txt", "old": old, "new": ne, "perm": 0o644}},
		map[string]any{"op": []any{0, "create"}},
		map[string]any{"commit": 1},
	} {
		must(t, enc.Encode(rec))
	}
	must(t, os.MkdirAll(jdir, 0o700))
	journal = filepath.Join(jdir, "1-1.journal")
	must(t, os.WriteFile(journal, b.Bytes(), 0o600))
	return journal, checkout
}

// crashed is a host directory whose a.txt holds content, a Dir over it, and
// in jdir the journal and checkout of a sync killed before its only step
// (writeCrashJournal).
func crashed(t *testing.T, content string) (host, jdir, journal, checkout string, d *dir.Dir) {
	t.Helper()
	host = t.TempDir()
	must(t, os.WriteFile(filepath.Join(host, "a.txt"), []byte(content), 0o644))
	jdir = t.TempDir()
	journal, checkout = writeCrashJournal(t, jdir)
	pb, err := physical.New(host)
	must(t, err)
	t.Cleanup(func() { pb.Close() })
	d, _ = dir.New(pb)
	return host, jdir, journal, checkout, d
}

// Two Recovers of one journal at once: one applies it, the other finds it in
// use or already finished; the change is applied once and the journal and
// the checkout are gone.
func TestRecoverOnce(t *testing.T) {
	host, jdir, journal, checkout, d := crashed(t, "old\n")
	js, err := syncback.Pending(jdir)
	if err != nil || len(js) != 1 || js[0].Path != journal || !js[0].Committed || js[0].Label != "test" || js[0].Checkout != checkout {
		t.Fatalf("PendingJournals: %v %+v", err, js)
	}
	var wg sync.WaitGroup
	reps := make([]*syncback.Report, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[i], errs[i] = syncback.Recover(ctx, d, journal, syncback.RecoverOptions{})
		}()
	}
	wg.Wait()
	applied := 0
	for i := range 2 {
		switch {
		case errs[i] == nil && len(reps[i].Applied) == 1 && reps[i].Checkout == "":
			applied++
		case errs[i] == nil && len(reps[i].Applied) == 0 && len(reps[i].NotApplied) == 0:
		case vfs.CodeOf(errs[i]) == vfs.CodeConflict && reps[i] == nil:
		default:
			t.Errorf("Recover %d: %v %+v", i, errs[i], reps[i])
		}
	}
	if applied != 1 {
		t.Fatalf("applied %d times", applied)
	}
	b, _ := os.ReadFile(filepath.Join(host, "a.txt"))
	fi, _ := os.Stat(filepath.Join(host, "a.txt"))
	if string(b) != "new\n" || !fi.ModTime().Equal(time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)) {
		t.Fatalf("a.txt %q %v", b, fi.ModTime())
	}
	for _, p := range []string{journal, checkout} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left: %v", p, err)
		}
	}
	// Again: nothing to do.
	if rep, err := syncback.Recover(ctx, d, journal, syncback.RecoverOptions{}); err != nil || len(rep.Applied) != 0 {
		t.Fatalf("again: %v %+v", err, rep)
	}
}

// Recover never removes what a journal names unless it is a checkout
// directory; a host edit since the crash is a conflict, listed, and keeps the
// checkout.
func TestRecoverConflictKeepsCheckout(t *testing.T) {
	host, jdir, journal, checkout, d := crashed(t, "the host's\n")
	rep, err := syncback.Recover(ctx, d, journal, syncback.RecoverOptions{})
	if vfs.CodeOf(err) != vfs.CodeConflict || rep == nil || len(rep.NotApplied) != 1 || rep.NotApplied[0].Cause != syncback.CauseConflict ||
		rep.Checkout != checkout {
		t.Fatalf("Recover: %v %+v", err, rep)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "a.txt")); string(b) != "the host's\n" {
		t.Fatalf("a.txt %q", b)
	}
	if _, err := os.Stat(filepath.Join(checkout, "a.txt")); err != nil {
		t.Fatalf("checkout: %v", err)
	}
	if js, _ := syncback.Pending(jdir); len(js) != 0 {
		t.Fatalf("journal left: %+v", js)
	}
}
