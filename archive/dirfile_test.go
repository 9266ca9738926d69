package archive_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/capfs/capfs/archive"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// ExtractDirFile reads the archive through the Dir and names it in errors;
// CreateFromDir's output extracts back.
func TestExtractArchiveFromDir(t *testing.T) {
	d, _ := dir.New(memory.New())
	d.MkdirAll(bg, "in")
	d.MkdirAll(bg, "out")
	d.WriteFile(bg, "in/a.txt", []byte("alpha"), 0o644)
	var buf bytes.Buffer
	if _, err := archive.CreateFromDir(bg, d, "in", &buf, archive.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d.WriteFile(bg, "in.tar.zst", buf.Bytes(), 0o644)
	res, err := archive.ExtractDirFile(bg, d, "in.tar.zst", "out", archive.Options{})
	if err != nil || len(res.Extracted) != 1 || res.Format != archive.FormatTarZst {
		t.Fatalf("%v %+v", err, res)
	}
	if b, _ := d.ReadFile(bg, "out/a.txt"); string(b) != "alpha" {
		t.Fatalf("out/a.txt = %q", b)
	}
	d.WriteFile(bg, "bad.zip", []byte("PK\x03\x04 not really"), 0o644)
	_, err = archive.ExtractDirFile(bg, d, "bad.zip", "out", archive.Options{})
	var ve *vfs.Error
	if !errors.As(err, &ve) || ve.Path != "bad.zip" || !errors.Is(err, archive.ErrCorrupt) {
		t.Fatalf("err = %v", err)
	}
	if _, err := archive.ExtractDirFile(bg, d, "missing.zip", "out", archive.Options{}); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Fatalf("missing: %v", err)
	}
	if _, err := archive.ExtractDirFile(bg, d, "in.tar.zst", "nodir", archive.Options{}); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Fatalf("missing dest: %v", err)
	}
	if _, err := archive.ExtractDirFile(bg, d, "in.tar.zst", "../x", archive.Options{}); vfs.CodeOf(err) != vfs.CodeOutside {
		t.Fatalf("dest outside: %v", err)
	}
}
