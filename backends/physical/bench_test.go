//go:build linux

package physical

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// benchTree makes a file 8 directories deep (and one at depth 1) holding 4 KiB.
func benchTree(b *testing.B) (root, deep string) {
	root = b.TempDir()
	deep = strings.Repeat("d/", 8) + "f"
	if err := os.MkdirAll(filepath.Join(root, filepath.Dir(deep)), 0o755); err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 4096)
	for _, p := range []string{deep, "f"} {
		if err := os.WriteFile(filepath.Join(root, p), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return root, deep
}

func BenchmarkOpenRead(b *testing.B) {
	root, deep := benchTree(b)
	buf := make([]byte, 8192)
	for _, depth := range []struct {
		name, path string
	}{{"depth1", "f"}, {"depth8", deep}} {
		b.Run("os/"+depth.name, func(b *testing.B) {
			p := filepath.Join(root, depth.path)
			for b.Loop() {
				f, err := os.Open(p)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(f, buf[:4096]); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
		for _, r := range resolvers {
			b.Run(r.name+"/"+depth.name, func(b *testing.B) {
				f, err := New(root, WithResolver(r.mode))
				if err != nil {
					b.Skip(err)
				}
				defer f.Close()
				q := vfs.MustParse(depth.path)
				ctx := b.Context()
				for b.Loop() {
					h, err := f.OpenFile(ctx, q, os.O_RDONLY, 0)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(h, buf[:4096]); err != nil {
						b.Fatal(err)
					}
					h.Close()
				}
			})
		}
	}
}

func BenchmarkStat(b *testing.B) {
	root, deep := benchTree(b)
	for _, depth := range []struct {
		name, path string
	}{{"depth1", "f"}, {"depth8", deep}} {
		b.Run("os/"+depth.name, func(b *testing.B) {
			p := filepath.Join(root, depth.path)
			for b.Loop() {
				if _, err := os.Stat(p); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, r := range resolvers {
			b.Run(r.name+"/"+depth.name, func(b *testing.B) {
				f, err := New(root, WithResolver(r.mode))
				if err != nil {
					b.Skip(err)
				}
				defer f.Close()
				q := vfs.MustParse(depth.path)
				ctx := b.Context()
				for b.Loop() {
					if _, err := f.Stat(ctx, q); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkCreateWrite(b *testing.B) {
	root := b.TempDir()
	data := make([]byte, 4096)
	for _, r := range resolvers {
		b.Run(r.name, func(b *testing.B) {
			f, err := New(root, WithResolver(r.mode))
			if err != nil {
				b.Skip(err)
			}
			defer f.Close()
			q := vfs.MustParse("new-" + r.name)
			ctx := b.Context()
			for b.Loop() {
				h, err := f.OpenFile(ctx, q, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := h.Write(data); err != nil {
					b.Fatal(err)
				}
				h.Close()
			}
		})
	}
}
