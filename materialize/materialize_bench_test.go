//go:build linux

package materialize_test

import (
	"fmt"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/vfs"
)

// benchTree fills d with files small files of 1 to 4 KiB in 40 directories and
// returns their total size.
func benchTree(b *testing.B, d *dir.Dir, files int) int64 {
	b.Helper()
	var total int64
	data := make([]byte, 4096)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for i := range files {
		p := fmt.Sprintf("pkg%02d/sub%d/file%04d.go", i%40, i%3, i)
		if err := d.MkdirAll(ctx, p[:len("pkg00/sub0")]); err != nil {
			b.Fatal(err)
		}
		n := 1024 + (i*977)%3072
		if err := d.WriteFile(ctx, p, data[:n], 0o644); err != nil {
			b.Fatal(err)
		}
		total += int64(n)
	}
	return total
}

func benchSources(b *testing.B) map[string]*dir.Dir {
	m, _ := dir.New(memory.New())
	pb, err := physical.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pb.Close() })
	p, _ := dir.New(pb)
	return map[string]*dir.Dir{"memory": m, "physical": p}
}

// BenchmarkCheckout checks out 3,000 small files (about 7.5 MB) into the default
// base (/dev/shm where it is a writable tmpfs) and removes the checkout again,
// per iteration.
func BenchmarkCheckout(b *testing.B) {
	const files = 3000
	for _, name := range []string{"memory", "physical"} {
		b.Run(name, func(b *testing.B) {
			d := benchSources(b)[name]
			total := benchTree(b, d, files)
			b.SetBytes(total)
			b.ReportAllocs()
			for b.Loop() {
				tr, err := materialize.Checkout(ctx, d, materialize.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if err := tr.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(files)*float64(b.N)/b.Elapsed().Seconds(), "files/s")
		})
	}
}

// BenchmarkDiffUnchanged scans an unchanged checkout of 3,000 files: the stat
// cache answers for every file, nothing is re-read.
func BenchmarkDiffUnchanged(b *testing.B) {
	d := benchSources(b)["memory"]
	benchTree(b, d, 3000)
	tr, err := materialize.Checkout(ctx, d, materialize.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	b.ReportAllocs()
	for b.Loop() {
		cs, err := tr.Diff(ctx)
		if err != nil || len(cs) != 0 {
			b.Fatal(cs, err)
		}
	}
}

// BenchmarkBind makes a zero-copy read-only checkout of 3,000 files: the cost is
// the walk and the hashing for the manifest.
func BenchmarkBind(b *testing.B) {
	root := b.TempDir()
	pb, err := physical.New(root)
	if err != nil {
		b.Fatal(err)
	}
	defer pb.Close()
	d, _ := dir.New(pb)
	total := benchTree(b, d, 3000)
	b.SetBytes(total)
	for b.Loop() {
		tr, err := materialize.Checkout(ctx, d.ReadOnly(), materialize.Options{ReadOnly: true, Host: vfs.ReadOnly(pb)})
		if err != nil || !tr.Bound() {
			b.Fatal(err)
		}
		tr.Close()
	}
}
