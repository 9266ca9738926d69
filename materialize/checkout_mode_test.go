//go:build linux

package materialize_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
)

// Files are created with their mode less the umask; Checkout puts back what the
// umask took away, and the stat cache describes the file as it ends up.
func TestCheckoutModesDespiteUmask(t *testing.T) {
	d, _ := dir.New(memory.New())
	modes := map[string]os.FileMode{"rw": 0o644, "all": 0o777, "exec": 0o755, "private": 0o600, "ro": 0o444}
	for name, m := range modes {
		must(t, d.WriteFile(ctx, name, []byte(name), m))
		must(t, d.Chmod(ctx, name, m))
	}
	old := unix.Umask(0o077)
	tr := checkout(t, d, materialize.Options{})
	unix.Umask(old)
	for name, m := range modes {
		fi, err := os.Lstat(filepath.Join(tr.Path(), name))
		must(t, err)
		if fi.Mode().Perm() != m || tr.Manifest().Entries[name].Mode != m {
			t.Fatalf("%s: mode %v, manifest %v, want %v", name, fi.Mode().Perm(), tr.Manifest().Entries[name].Mode, m)
		}
	}
	cs, err := tr.Diff(ctx)
	if err != nil || len(cs) != 0 {
		t.Fatalf("Diff: %v %+v", err, cs)
	}
}
