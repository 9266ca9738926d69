//go:build unix

package overlay

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/capfs/capfs/vfs"
	"golang.org/x/sys/unix"
)

// TestLchtimes: the overlay sets a lower symlink's own times by copying the
// link up, leaves the lower untouched, and a missing name is not_found.
// StatFS reports the upper's storage.
func TestLchtimes(t *testing.T) {
	ov, root := hostOverlay(t, map[string]string{"f": "x"})
	if err := os.Symlink("f", filepath.Join(root, "l")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	when := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := ov.Lchtimes(ctx, vfs.MustParse("l"), when, when); err != nil {
		t.Fatalf("Lchtimes of a lower link: %v", err)
	}
	info, err := ov.Lstat(ctx, vfs.MustParse("l"))
	if err != nil || !info.ModTime.Equal(when) || info.Mode&os.ModeSymlink == 0 {
		t.Errorf("the link after Lchtimes: %v %v, %v; want a link of %v", info.Mode, info.ModTime, err, when)
	}
	if f, err := ov.Stat(ctx, vfs.MustParse("f")); err != nil || f.ModTime.Equal(when) {
		t.Errorf("the link's target changed too: %v, %v", f.ModTime, err)
	}
	var st os.FileInfo
	if st, err = os.Lstat(filepath.Join(root, "l")); err != nil || st.ModTime().Equal(when) {
		t.Errorf("the lower link changed: %v, %v", st.ModTime(), err)
	}
	if err := ov.Lchtimes(ctx, vfs.MustParse("missing"), time.Time{}, time.Time{}); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Errorf("Lchtimes of a missing name: %v; want not_found", err)
	}
	if fs, err := ov.StatFS(ctx, vfs.MustParse("f")); err != nil || fs.Total == 0 {
		t.Errorf("StatFS: %+v, %v; want the upper's figures", fs, err)
	}
}

// TestLinkCopyUpKeepsTime: a lower symlink copied up (here by a rename)
// keeps its own modification time, as a copied-up file keeps its.
func TestLinkCopyUpKeepsTime(t *testing.T) {
	ov, root := hostOverlay(t, map[string]string{"f": "x"})
	l := filepath.Join(root, "l")
	if err := os.Symlink("f", l); err != nil {
		t.Fatal(err)
	}
	when := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	ts := []unix.Timespec{unix.NsecToTimespec(when.UnixNano()), unix.NsecToTimespec(when.UnixNano())}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, l, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := ov.Rename(ctx, vfs.MustParse("l"), vfs.MustParse("m"), 0); err != nil {
		t.Fatal(err)
	}
	if info, err := ov.Lstat(ctx, vfs.MustParse("m")); err != nil || !info.ModTime.Equal(when) {
		t.Errorf("the copied-up link's mtime: %v, %v; want %v", info.ModTime, err, when)
	}
}
