package overlay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// lazyLayer makes a lazy run's layers over a new host directory holding
// a/b/c.go (4 KiB): the work Dir (default policy) over the physical backend,
// and the layer's Dir (default policy) over an Overlay of the work Dir.
func lazyLayer(b *testing.B) (work, layer *dir.Dir) {
	root := b.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "a/b"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a/b/c.go"), make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	pb, err := physical.New(root)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pb.Close() })
	work, _ = dir.New(pb, dir.WithPolicy(policy.Defaults()))
	ov, err := NewOverlay(work.Backend(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ov.Close() })
	layer, _ = dir.New(ov, dir.WithPolicy(policy.Defaults()))
	return work, layer
}

// BenchmarkOverlayOpenRead measures what a lazy run's server does for one
// open+read+close of a source file (no kernel involved): the layer's Dir
// (default policy) over the Overlay over the work Dir (default policy) over
// the physical backend, against the work Dir alone.
func BenchmarkOverlayOpenRead(b *testing.B) {
	work, view := lazyLayer(b)
	buf := make([]byte, 8192)
	for _, c := range []struct {
		name string
		d    *dir.Dir
	}{{"work-dir", work}, {"lazy-layer", view}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				h, err := c.d.Open(bg, "a/b/c.go", os.O_RDONLY, 0)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := h.ReadAt(buf, 0); err != nil && err.Error() != "EOF" {
					b.Fatal(err)
				}
				h.Close()
			}
		})
	}
}

// BenchmarkOverlayServer measures the calls a lazy run's server makes for
// the kernel's requests (no kernel involved): through the layer's Backend
// view (default policy) over the Overlay over the work Dir, an OPEN and
// RELEASE of a source file and of a file the sandbox wrote (in the upper),
// and a LOOKUP of a source file and of a missing name.
func BenchmarkOverlayServer(b *testing.B) {
	_, layer := lazyLayer(b)
	view := layer.Backend()
	if err := layer.WriteFile(bg, "a/b/c.o", make([]byte, 1300), 0o644); err != nil {
		b.Fatal(err)
	}
	open := func(p string) func(b *testing.B) {
		return func(b *testing.B) {
			vp := vfs.MustParse(p)
			for b.Loop() {
				f, err := view.OpenFile(bg, vp, os.O_RDONLY, 0)
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		}
	}
	lookup := func(p string, found bool) func(b *testing.B) {
		return func(b *testing.B) {
			vp := vfs.MustParse(p)
			for b.Loop() {
				if _, err := view.Lstat(bg, vp); (err == nil) != found {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("open-source", open("a/b/c.go"))
	b.Run("open-upper", open("a/b/c.o"))
	b.Run("lookup-source", lookup("a/b/c.go", true))
	b.Run("lookup-missing", lookup("a/b/none.o", false))
}
