package sqlite

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/capfs/capfs/vfs/vfstest"
)

// BenchmarkCreateWrite4K creates and writes 4 KiB files, one commit group each.
func BenchmarkCreateWrite4K(b *testing.B) {
	f, err := Open(filepath.Join(b.TempDir(), "b.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	data := make([]byte, 4096)
	b.ResetTimer()
	for i := range b.N {
		if err := vfstest.WriteFile(bg, f, P(fmt.Sprintf("f%d", i)), data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMixed4K is the bench's first phases in miniature: create+write, read,
// stat, rename, remove of 4 KiB files in nested directories.
func BenchmarkMixed4K(b *testing.B) {
	data := make([]byte, 4096)
	for range b.N {
		b.StopTimer()
		f, err := Open(filepath.Join(b.TempDir(), "b.db"))
		if err != nil {
			b.Fatal(err)
		}
		for d := range 10 {
			f.Mkdir(bg, P(fmt.Sprintf("d%d", d)), 0o755)
		}
		b.StartTimer()
		for i := range 500 {
			if err := vfstest.WriteFile(bg, f, P(fmt.Sprintf("d%d/f%d", i%10, i)), data); err != nil {
				b.Fatal(err)
			}
		}
		for i := range 500 {
			if _, err := vfstest.ReadFile(bg, f, P(fmt.Sprintf("d%d/f%d", i%10, i))); err != nil {
				b.Fatal(err)
			}
		}
		for i := range 500 {
			if err := f.Rename(bg, P(fmt.Sprintf("d%d/f%d", i%10, i)), P(fmt.Sprintf("d%d/g%d", i%10, i)), 0); err != nil {
				b.Fatal(err)
			}
		}
		for i := range 500 {
			if err := f.Remove(bg, P(fmt.Sprintf("d%d/g%d", i%10, i))); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		f.Close()
		b.StartTimer()
	}
}

// BenchmarkRemoveTree removes a tree of 2,000 files in 110 directories entry by
// entry (one commit each) and with RemoveAll (one commit).
func BenchmarkRemoveTree(b *testing.B) {
	build := func(b *testing.B) *FS {
		b.StopTimer()
		defer b.StartTimer()
		f, err := Open(filepath.Join(b.TempDir(), "b.db"))
		if err != nil {
			b.Fatal(err)
		}
		for i := range 2000 {
			p := P(fmt.Sprintf("t/a%d/b%d/f%d", i%10, (i/10)%10, i))
			if i < 100 {
				if err := vfstest.MkdirAll(bg, f, p.Dir(), 0o755); err != nil {
					b.Fatal(err)
				}
			}
			if err := f.WriteFile(bg, p, make([]byte, 4096), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		return f
	}
	b.Run("entry-by-entry", func(b *testing.B) {
		for range b.N {
			f := build(b)
			var rm func(p string) error
			rm = func(p string) error {
				ents, _ := f.ReadDir(bg, P(p))
				for _, e := range ents {
					if err := rm(p + "/" + e.Name); err != nil {
						return err
					}
				}
				return f.Remove(bg, P(p))
			}
			if err := rm("t"); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("RemoveAll", func(b *testing.B) {
		for range b.N {
			f := build(b)
			if err := f.RemoveAll(bg, P("t")); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
}
