package memory

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// These benchmark the backend alone, with pre-parsed paths; bench/ compares it
// with its peers through the same workloads.

func benchTree(b *testing.B, n int) (*FS, []vfs.Path) {
	b.Helper()
	m := New()
	if err := m.Mkdir(bg, P("d"), 0o755); err != nil {
		b.Fatal(err)
	}
	ps := make([]vfs.Path, n)
	data := make([]byte, 4096)
	for i := range ps {
		ps[i] = P(fmt.Sprintf("d/f%05d", i))
		f, err := m.OpenFile(bg, ps[i], os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		f.Write(data)
		f.Close()
	}
	return m, ps
}

func BenchmarkCreateWrite4K(b *testing.B) {
	ps := make([]vfs.Path, 1000)
	for i := range ps {
		ps[i] = P(fmt.Sprintf("d/f%05d", i))
	}
	data := make([]byte, 4096)
	b.SetBytes(int64(len(ps) * len(data)))
	for b.Loop() {
		m := New()
		m.Mkdir(bg, P("d"), 0o755)
		for _, p := range ps {
			f, err := m.OpenFile(bg, p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			f.Write(data)
			f.Close()
		}
	}
}

func BenchmarkOpenReadClose4K(b *testing.B) {
	m, ps := benchTree(b, 1000)
	buf := make([]byte, 4097)
	b.SetBytes(int64(len(ps) * 4096))
	for b.Loop() {
		for _, p := range ps {
			f, err := m.OpenFile(bg, p, os.O_RDONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			io.ReadFull(f, buf)
			f.Close()
		}
	}
}

func BenchmarkStat(b *testing.B) {
	m, ps := benchTree(b, 1000)
	for b.Loop() {
		for _, p := range ps {
			if _, err := m.Stat(bg, p); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkStatDeep(b *testing.B) {
	m := New()
	dir := ""
	for i := range 16 {
		if dir != "" {
			dir += "/"
		}
		dir += fmt.Sprintf("d%02d", i)
		m.Mkdir(bg, P(dir), 0o755)
	}
	p := P(dir + "/leaf")
	f, err := m.OpenFile(bg, p, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	f.Close()
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.Stat(bg, p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("uncached", func(b *testing.B) {
		// A mutation between lookups invalidates the cache every time.
		other := P("x")
		for b.Loop() {
			b.StopTimer()
			m.Mkdir(bg, other, 0o755)
			m.Remove(bg, other)
			b.StartTimer()
			if _, err := m.Stat(bg, p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkReadDir10k(b *testing.B) {
	m, _ := benchTree(b, 10000)
	for b.Loop() {
		es, err := m.ReadDir(bg, P("d"))
		if err != nil || len(es) != 10000 {
			b.Fatal(len(es), err)
		}
	}
}

func BenchmarkAppend64K(b *testing.B) {
	chunk := []byte(strings.Repeat("x", 64<<10))
	b.SetBytes(16 << 20)
	for b.Loop() {
		m := New()
		f, err := m.OpenFile(bg, P("big"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		for range 256 {
			if _, err := f.Write(chunk); err != nil {
				b.Fatal(err)
			}
		}
		f.Close()
	}
}

func BenchmarkParallelStat(b *testing.B) {
	m, ps := benchTree(b, 1000)
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := m.Stat(bg, ps[i%len(ps)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
