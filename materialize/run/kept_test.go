//go:build linux

package run_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/capfs/capfs/materialize/run"
	"github.com/capfs/capfs/materialize/syncback"
)

// TestKeptRecords: records written into KeptDir read back oldest first; one
// whose file names another id is left out; RemoveKept removes one; the
// directory is private, and a shared one is refused.
func TestKeptRecords(t *testing.T) {
	state := t.TempDir()
	t.Setenv(syncback.EnvStateDir, state)
	d, err := run.KeptDir()
	if err != nil || d != filepath.Join(state, "kept") {
		t.Fatalf("KeptDir: %q, %v", d, err)
	}
	now := time.Now()
	for _, rec := range []run.Kept{{ID: "2", Created: now}, {ID: "1", Created: now.Add(-time.Hour), Command: []string{"make"}}} {
		if err := run.WriteKept(d, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d, "3.json"), []byte(`{"id":"4"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	recs, _, err := run.ReadKept()
	if err != nil || len(recs) != 2 || recs[0].ID != "1" || recs[0].Command[0] != "make" || recs[1].ID != "2" {
		t.Fatalf("ReadKept: %+v, %v; want 1 then 2", recs, err)
	}
	if err := run.RemoveKept("1"); err != nil {
		t.Fatal(err)
	}
	if recs, _, _ := run.ReadKept(); len(recs) != 1 || recs[0].ID != "2" {
		t.Errorf("after RemoveKept(1): %+v", recs)
	}
	if got := run.KeptID("/dev/shm/capfs-checkout-123"); got != "123" {
		t.Errorf("KeptID = %q, want 123", got)
	}
	if got := run.LazyMountDir(); got != filepath.Join(state, "mnt") {
		t.Errorf("LazyMountDir = %q, want the state directory's mnt", got)
	}
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if run.CheckPrivateDir(shared) == nil {
		t.Error("CheckPrivateDir accepts a directory anyone may write")
	}
}
