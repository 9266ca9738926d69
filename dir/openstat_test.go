package dir_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
)

// TestHandleOpenStat checks Handle.OpenStat over the physical backend, whose
// Files record their status at the open: the name, type and size Stat gives
// right after the open, and still the open's size after the file grows (Stat
// then gives the new one); nothing on a closed Handle or a revoked capability;
// and nothing over a backend whose Files record none (memory).
func TestHandleOpenStat(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "d", "f.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := physical.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d, ctl := dir.New(b)

	h, err := d.Open(ctx, "d/f.txt", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := h.OpenStat()
	if !ok {
		t.Fatal("OpenStat over the physical backend: nothing recorded")
	}
	want, err := h.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if got.Name() != want.Name() || got.Name() != "f.txt" || got.Mode() != want.Mode() || got.Size() != 5 || want.Size() != 5 {
		t.Errorf("OpenStat %q %v %d bytes; Stat %q %v %d bytes", got.Name(), got.Mode(), got.Size(), want.Name(), want.Mode(), want.Size())
	}
	if err := os.WriteFile(filepath.Join(root, "d", "f.txt"), []byte("hello, world"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.OpenStat(); got.Size() != 5 {
		t.Errorf("OpenStat after the file grew: %d bytes, want the open's 5", got.Size())
	}
	if now, _ := h.Stat(); now.Size() != 12 {
		t.Errorf("Stat after the file grew: %d bytes, want 12", now.Size())
	}
	h.Close()
	if _, ok := h.OpenStat(); ok {
		t.Error("OpenStat on a closed Handle answered")
	}

	dh, err := d.Open(ctx, "d", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := dh.OpenStat(); !ok || !got.IsDir() || got.Name() != "d" {
		t.Errorf("OpenStat of a directory: %v %v", got, ok)
	}
	h2, err := d.Open(ctx, "d/f.txt", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	ctl.Revoke()
	if _, ok := h2.OpenStat(); ok {
		t.Error("OpenStat after Revoke answered")
	}
	if _, err := h2.Stat(); err == nil {
		t.Error("Stat after Revoke worked")
	}
	dh.Close()

	md, _ := dir.New(memory.New())
	if err := md.WriteFile(ctx, "m", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	mh, err := md.Open(ctx, "m", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer mh.Close()
	if _, ok := mh.OpenStat(); ok {
		t.Skip("the memory backend records a status at the open now; nothing left to check")
	}
}
