package overlay

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// editingLower edits the host file at host the first time the lower file is
// opened for reading after arm: a host edit that lands between a copy-up's
// Lstat and its read.
type editingLower struct {
	vfs.Backend
	host  string
	armed bool
}

func (e *editingLower) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	if e.armed && flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		e.armed = false
		if err := os.WriteFile(e.host, []byte("host edit, longer\n"), 0o644); err != nil {
			return nil, err
		}
	}
	return e.Backend.OpenFile(ctx, p, flag, perm)
}

// TestCopyUpHostEditDuringCopy: a host edit made while a copy-up reads the
// file (after the copy-up's Lstat, which still shows the status first seen)
// leaves the Base's contents unknown, a conflict at sync-back: the Base is
// not the edited contents, which a sync-back would take for the process's
// base and overwrite.
func TestCopyUpHostEditDuringCopy(t *testing.T) {
	trustStat(t)
	ov, root, lower := sightOverlay(t, map[string]string{"conf": "base\n"})
	el := &editingLower{Backend: lower, host: filepath.Join(root, "conf")}
	ov.lower = el
	if _, err := ov.Lstat(bg, vp("conf")); err != nil {
		t.Fatal(err)
	}
	el.armed = true
	f, err := ov.OpenFile(bg, vp("conf"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if el.armed {
		t.Fatal("the copy-up did not read the lower file")
	}
	if b := ov.Bases()["conf"]; b.Digest == digestOf("host edit, longer\n") {
		t.Errorf("base digest is the host's edit made during the copy-up (%+v): a sync-back would overwrite it without a conflict", b)
	}
}
