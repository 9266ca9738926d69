//go:build linux

package fuseexport

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// fallocate on the mount: mode 0 grows the file with zeros, KEEP_SIZE keeps
// its size, the modes that punch or zero ranges are EOPNOTSUPP, and a quota
// refuses the growth at once (EOPNOTSUPP for every mode before).
func TestFallocate(t *testing.T) {
	pb := physicalT(t)
	for _, b := range []struct {
		name string
		b    vfs.Backend
	}{{"memory", memory.New()}, {"physical", pb}} {
		t.Run(b.name, func(t *testing.T) {
			d, _ := dir.New(b.b)
			mp, _ := mountT(t, d, Options{})
			p := filepath.Join(mp, "f")
			if err := os.WriteFile(p, []byte("head"), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fd := int(f.Fd())
			if err := unix.Fallocate(fd, 0, 0, 1<<16); err != nil {
				t.Fatalf("fallocate mode 0: %v", err)
			}
			if err := unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, 1<<20); err != nil {
				t.Fatalf("fallocate KEEP_SIZE: %v", err)
			}
			if err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 4); !errors.Is(err, unix.EOPNOTSUPP) {
				t.Errorf("punching a hole: %v, want EOPNOTSUPP", err)
			}
			got, err := os.ReadFile(p)
			if err != nil || len(got) != 1<<16 || string(got[:4]) != "head" || got[1<<16-1] != 0 {
				t.Fatalf("after fallocate: %d bytes starting %q, %v; want 65536, head, zeros", len(got), got[:min(4, len(got))], err)
			}
		})
	}
	t.Run("quota", func(t *testing.T) {
		d, _ := dir.New(memory.New(memory.WithQuota(1 << 12)))
		mp, _ := mountT(t, d, Options{})
		f, err := os.Create(filepath.Join(mp, "f"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := unix.Fallocate(int(f.Fd()), 0, 0, 1<<20); err == nil {
			t.Fatal("fallocate past the quota succeeded")
		}
		if fi, err := f.Stat(); err != nil || fi.Size() != 0 {
			t.Errorf("after a refused fallocate: %v, %v; want size 0", fi, err)
		}
	})
}
