package fuseexport

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/capfs/capfs/dir"
)

// statT is lstat(2) of name, failing t on error.
func statT(t *testing.T, name string) *syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(name, &st); err != nil {
		t.Fatalf("lstat %s: %v", filepath.Base(name), err)
	}
	return &st
}

// TestSparseFileBlocks: a 64 MiB sparse file on a physical mount reports the
// blocks the host holds for it (about none), as du reads them, not 64 MiB.
func TestSparseFileBlocks(t *testing.T) {
	pb := physicalT(t)
	d, _ := dir.New(pb)
	mp, _ := mountT(t, d, Options{})
	name := filepath.Join(mp, "sparse")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("end"), 64<<20-3); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	st := statT(t, name)
	if st.Size != 64<<20 {
		t.Fatalf("size %d, want 64 MiB", st.Size)
	}
	if st.Blocks > 1024 { // at most 512 KiB held for one written page
		t.Errorf("st_blocks %d (%d bytes) for a sparse 64 MiB file with one page written, want about none", st.Blocks, st.Blocks*512)
	}
	// A file with data holds its blocks.
	full := filepath.Join(mp, "full")
	if err := os.WriteFile(full, make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if st := statT(t, full); st.Blocks < 128 {
		t.Errorf("st_blocks %d for 64 KiB written, want at least 128", st.Blocks)
	}
}
