//go:build linux

package fuseexport

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
)

// TestReopenReplacedFollowsDirRename: a file renamed over, then its
// directory renamed, reopened through /proc/self/fd opens the file that
// holds its old name, in the directory's new place, not whatever a new
// directory at the old place holds. Before, openReplaced kept the old path
// and opened "stale".
func TestReopenReplacedFollowsDirRename(t *testing.T) {
	md, _ := dir.New(memory.New())
	mp, _ := mountT(t, md, Options{})
	at := func(p string) string { return filepath.Join(mp, p) }
	if err := os.Mkdir(at("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(at("d/x"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(at("d/x"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.WriteFile(at("y"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(at("y"), at("d/x")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(at("d"), at("e")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(at("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(at("d/x"), []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "new" {
		t.Fatalf("reopen read %q, want %q (the file at e/x)", b, "new")
	}
}
