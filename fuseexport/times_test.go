//go:build linux

package fuseexport

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// timeless is a backend that keeps no times (as a CAS tree): every status has
// a zero ModTime.
type timeless struct{ vfs.Backend }

func (b timeless) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	i, err := b.Backend.Stat(ctx, p)
	i.ModTime, i.ChangeTime = time.Time{}, time.Time{}
	return i, err
}

func (b timeless) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	i, err := b.Backend.Lstat(ctx, p)
	i.ModTime, i.ChangeTime = time.Time{}, time.Time{}
	return i, err
}

// TestZeroTimesAreEpoch: an entry whose backend keeps no times shows the Unix
// epoch through the mount (mtime and ctime), not year 1.
func TestZeroTimesAreEpoch(t *testing.T) {
	m := memory.New()
	md, _ := dir.New(m)
	if err := md.WriteFile(context.Background(), "f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, _ := dir.New(timeless{m})
	mp, _ := mountT(t, d, Options{})
	fi, err := os.Stat(filepath.Join(mp, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if !fi.ModTime().Equal(time.Unix(0, 0)) {
		t.Errorf("mtime through the mount: %v; want the Unix epoch", fi.ModTime())
	}
}
