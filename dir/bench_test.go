package dir_test

import (
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// BenchmarkStat compares a Stat through a Dir (all checks, one audit event) with a
// Stat on the backend it wraps.
func BenchmarkStat(b *testing.B) {
	m := memory.New()
	seedBackend(b, m)
	p := vfs.MustParse("dir/sub/deep/d.go")
	b.Run("backend", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Stat(bg, p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dir", func(b *testing.B) {
		b.ReportAllocs()
		d, _ := dir.New(m)
		for b.Loop() {
			if _, err := d.Stat(bg, "dir/sub/deep/d.go"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dir-policy", func(b *testing.B) {
		b.ReportAllocs()
		d, _ := dir.New(m, dir.WithPolicy(policy.Defaults()))
		for b.Loop() {
			if _, err := d.Stat(bg, "dir/sub/deep/d.go"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dir-policy-sub", func(b *testing.B) {
		b.ReportAllocs()
		d, _ := dir.New(m, dir.WithPolicy(policy.Defaults()))
		sub, err := d.Sub(bg, "dir/sub")
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := sub.Stat(bg, "deep/d.go"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dir-audited-sub", func(b *testing.B) {
		b.ReportAllocs()
		d, _ := dir.New(m, dir.WithAudit(audit.NewRing(1024)))
		sub, err := d.ReadOnly().Sub(bg, "dir/sub")
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := sub.Stat(bg, "deep/d.go"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReadWriteFile measures the whole-file calls on a 4 KiB file.
func BenchmarkReadWriteFile(b *testing.B) {
	d, _ := dir.New(memory.New())
	data := make([]byte, 4096)
	b.Run("WriteFile", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := d.WriteFile(bg, "f", data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ReadFile", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.ReadFile(bg, "f"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkOpenReadClose opens a small file, reads it through the Handle and closes
// it, through a Dir and on the backend alone.
func BenchmarkOpenReadClose(b *testing.B) {
	m := memory.New()
	d, _ := dir.New(m)
	must(b, d.WriteFile(bg, "f", make([]byte, 100), 0o644))
	buf := make([]byte, 512)
	b.Run("backend", func(b *testing.B) {
		b.ReportAllocs()
		p := vfs.MustParse("f")
		for b.Loop() {
			f, err := m.OpenFile(bg, p, os.O_RDONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(f, buf); err != io.ErrUnexpectedEOF {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("dir", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h, err := d.Open(bg, "f", os.O_RDONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(h, buf); err != io.ErrUnexpectedEOF {
				b.Fatal(err)
			}
			h.Close()
		}
	})
}

// BenchmarkHandleRead is one small Read on an open Handle (the per-call checks).
func BenchmarkHandleRead(b *testing.B) {
	d, c := dir.New(memory.New())
	must(b, d.WriteFile(bg, "f", make([]byte, 1<<20), 0o644))
	cc, err := c.Child(bg, ".")
	if err != nil {
		b.Fatal(err)
	}
	h, err := cc.Dir().Open(bg, "f", os.O_RDONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	buf := make([]byte, 64)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := h.ReadAt(buf, int64(i%16000)*64); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadDir lists a directory of 10,000 files.
func BenchmarkReadDir(b *testing.B) {
	m := memory.New()
	d, _ := dir.New(m)
	must(b, d.MkdirAll(bg, "files"))
	for i := range 10000 {
		must(b, d.WriteFile(bg, "files/f"+strconv.Itoa(i), nil, 0o644))
	}
	b.Run("backend", func(b *testing.B) {
		b.ReportAllocs()
		p := vfs.MustParse("files")
		for b.Loop() {
			if ents, err := m.ReadDir(bg, p); err != nil || len(ents) != 10000 {
				b.Fatal(len(ents), err)
			}
		}
	})
	b.Run("dir", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ents, err := d.ReadDir(bg, "files"); err != nil || len(ents) != 10000 {
				b.Fatal(len(ents), err)
			}
		}
	})
}

// BenchmarkExists is the enforcement path with nothing to allocate: a Dir call whose
// result is a bool, beside the backend's Lstat.
func BenchmarkExists(b *testing.B) {
	m := memory.New()
	seedBackend(b, m)
	p := vfs.MustParse("dir/sub/deep/d.go")
	b.Run("backend", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Lstat(bg, p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dir", func(b *testing.B) {
		b.ReportAllocs()
		d, _ := dir.New(m)
		for b.Loop() {
			if ok, err := d.Exists(bg, "dir/sub/deep/d.go"); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
}
