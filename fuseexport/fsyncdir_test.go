//go:build linux

package fuseexport

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// fsync of a directory on the mount succeeds, as on the host: `sync DIR`,
// dpkg, PostgreSQL, bbolt and every atomic-write library call it after a
// rename (EOPNOTSUPP before). A directory the Dir hides cannot be reached to
// be synced.
func TestFsyncDirectory(t *testing.T) {
	ro := physicalT(t)
	if err := ro.Mkdir(context.Background(), vfs.MustParse("sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct {
		name string
		b    vfs.Backend
	}{{"memory", memory.New()}, {"physical", physicalT(t)}, {"read-only", vfs.ReadOnly(ro)}} {
		t.Run(b.name, func(t *testing.T) {
			d, _ := dir.New(b.b)
			mp, _ := mountT(t, d, Options{})
			sub := filepath.Join(mp, "sub")
			if b.name == "read-only" {
				syncDirs(t, mp, sub)
				return
			}
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(sub, "f.tmp"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(sub, "f.tmp"), filepath.Join(sub, "f")); err != nil {
				t.Fatal(err)
			}
			syncDirs(t, mp, sub)
		})
	}
}

// syncDirs fsyncs and fdatasyncs each directory in ps, which must succeed.
func syncDirs(t *testing.T, ps ...string) {
	t.Helper()
	for _, p := range ps {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Fsync(fd); err != nil {
			t.Errorf("fsync(%s): %v", p, err)
		}
		if err := unix.Fdatasync(fd); err != nil {
			t.Errorf("fdatasync(%s): %v", p, err)
		}
		unix.Close(fd)
	}
}
