//go:build linux

package run_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/run"
	"github.com/capfs/capfs/materialize/syncback"
)

// crashJournal leaves in the state directory what a sync labelled label,
// killed before its only step (name: old -> new), leaves: a committed
// journal and a checkout.
func crashJournal(t *testing.T, label, name string) string {
	t.Helper()
	checkout := filepath.Join(t.TempDir(), "capfs-checkout-1")
	if err := os.Mkdir(checkout, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(checkout, name), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(checkout, name))
	entry := func(data string, tm time.Time) materialize.Entry {
		sum := sha256.Sum256([]byte(data))
		return materialize.Entry{Size: int64(len(data)), Mode: 0o644, ModTime: tm, Digest: hex.EncodeToString(sum[:])}
	}
	jdir, err := syncback.DefaultJournalDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(jdir, 0o700); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(jdir, label+".journal")
	f, err := os.Create(journal)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, rec := range []any{
		map[string]any{"capfs_sync_journal": 1, "label": label, "checkout": checkout, "created": time.Now(), "steps": 1, "ops": 1},
		map[string]any{"step": map[string]any{"kind": "modified", "path": name, "old": entry("old\n", time.Now()), "new": entry("new\n", fi.ModTime()), "perm": 0o644}},
		map[string]any{"op": []any{0, "create"}},
		map[string]any{"commit": 1},
	} {
		if err := enc.Encode(rec); err != nil {
			t.Fatal(err)
		}
	}
	return journal
}

// TestRecoverLabel: Recover finishes the interrupted sync-back whose journal
// carries the label, telling before and after, and leaves another label's.
func TestRecoverLabel(t *testing.T) {
	t.Setenv(syncback.EnvStateDir, t.TempDir())
	host := t.TempDir()
	for _, name := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(host, name), []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mine, other := crashJournal(t, "mine", "a.txt"), crashJournal(t, "other", "b.txt")
	pb, err := physical.New(host)
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Close()
	d, _ := dir.New(pb)
	var told []string
	err = run.Recover(context.Background(), d, "mine", syncback.RecoverOptions{}, func(j syncback.JournalInfo) func(*syncback.Report, error) {
		told = append(told, "before "+j.Label)
		return func(rep *syncback.Report, err error) {
			if err != nil || rep == nil || len(rep.Applied) != 1 {
				t.Errorf("recovered: %+v, %v; want a.txt applied", rep, err)
			}
			told = append(told, "after "+j.Label)
		}
	})
	if err != nil || len(told) != 2 || told[0] != "before mine" || told[1] != "after mine" {
		t.Fatalf("Recover: %v, told %v", err, told)
	}
	for name, want := range map[string]string{"a.txt": "new\n", "b.txt": "old\n"} {
		if b, _ := os.ReadFile(filepath.Join(host, name)); string(b) != want {
			t.Errorf("%s: %q, want %q", name, b, want)
		}
	}
	if _, err := os.Stat(mine); !os.IsNotExist(err) {
		t.Errorf("the recovered journal is left: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another label's journal is gone: %v", err)
	}
}
