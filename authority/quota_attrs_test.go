package authority

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// A quota over a physical directory reports its account as the storage's
// figures, and keeps a link's times and an open file's status settable.
func TestQuotaFSStatFSAndAttrs(t *testing.T) {
	ctx := context.Background()
	pb, err := physical.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	q := newQuotaFS(pb, 1<<20)
	defer q.Close()
	if err := vfstest.WriteFile(ctx, q, vfs.MustParse("f"), make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	st, err := vfs.StatFS(ctx, q, vfs.Root)
	if err != nil || st.Total != 1<<20 || st.Free != 1<<20-1000 {
		t.Errorf("StatFS = %+v, %v; want the limit, less the 1000 bytes written", st, err)
	}
	if _, err := vfs.StatFS(ctx, q, vfs.MustParse("missing")); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Errorf("StatFS(missing): %v", err)
	}
	if err := q.Symlink(ctx, "f", vfs.MustParse("l")); err != nil {
		t.Fatal(err)
	}
	when := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := vfs.Lchtimes(ctx, q, vfs.MustParse("l"), time.Time{}, when); err != nil {
		t.Errorf("Lchtimes: %v", err)
	}
	if info, err := q.Lstat(ctx, vfs.MustParse("l")); err != nil || !info.ModTime.Equal(when) {
		t.Errorf("Lstat(l) after Lchtimes = %v, %v; want %v", info.ModTime, err, when)
	}
	h, err := q.OpenFile(ctx, vfs.MustParse("f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := vfs.FileChmod(h, 0o600); err != nil {
		t.Errorf("Chmod of a writable file: %v", err)
	}
	if info, err := h.Stat(); err != nil || info.Mode.Perm() != 0o600 {
		t.Errorf("Stat after Chmod = %v, %v; want 0600", info.Mode, err)
	}
}
