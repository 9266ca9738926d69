package overlay

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// BenchmarkOverlayRemoveTree measures what a lazy run's server does for
// `rm -rf` of a source tree (no kernel involved), per entry removed: the
// calls the kernel's requests make through the layer's Backend view
// (default policy) over the Overlay over the work Dir (default policy):
// a listing of each directory with each entry's status (READDIRPLUS, from
// one listing: Dir.ReadDirVisibleInfo),
// then each entry's removal (UNLINK, RMDIR) and its parent's status
// (GETATTR, as the kernel asks after each change of a directory). The tree:
// node_modules/pkgN/lib/fM (20 packages of 22 files of 200 bytes).
func BenchmarkOverlayRemoveTree(b *testing.B) {
	root := b.TempDir()
	const pkgs, files = 20, 22
	for i := range pkgs {
		d := filepath.Join(root, "node_modules", fmt.Sprintf("pkg%d", i), "lib")
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range files {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d.js", j)), make([]byte, 200), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	pb, err := physical.New(root)
	if err != nil {
		b.Fatal(err)
	}
	defer pb.Close()
	work, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
	old := sightRacy
	sightRacy = -1 // the files were just written: trust their status as a run's older tree
	defer func() { sightRacy = old }()
	entries := 0
	for b.Loop() {
		b.StopTimer()
		ov, err := NewOverlay(work.Backend(), b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		layer, _ := dir.New(ov, dir.WithPolicy(policy.Defaults()))
		b.StartTimer()
		n, err := rmTree(layer, vfs.MustParse("node_modules"))
		if err != nil {
			b.Fatal(err)
		}
		entries = n
		ov.Bases() // the removed files' contents are read here, as at a run's review
		b.StopTimer()
		ov.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(entries), "ns/entry")
}

// rmTree removes directory p's tree through layer as the kernel asks for
// `rm -rf`, and returns how many entries it removed.
func rmTree(layer *dir.Dir, p vfs.Path) (int, error) {
	view := layer.Backend()
	ents, err := layer.ReadDirVisibleInfo(bg, p.String())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		c, _ := p.Child(e.Name)
		if e.Err != nil {
			return n, e.Err
		}
		if e.Mode.IsDir() {
			m, err := rmTree(layer, c)
			n += m
			if err != nil {
				return n, err
			}
		}
		if err := view.Remove(bg, c); err != nil {
			return n, err
		}
		if _, err := view.Lstat(bg, p); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
