package dir_test

import (
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// BenchmarkStat compares a Stat through a Dir (all checks, one audit event) with a
// Stat on the backend it wraps.
func BenchmarkStat(b *testing.B) {
	m := memory.New()
	seedBackend(b, m)
	p := vfs.MustParse("dir/sub/deep/d.go")
	b.Run("backend", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.Stat(bg, p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dir", func(b *testing.B) {
		d, _ := dir.New(m)
		for b.Loop() {
			if _, err := d.Stat(bg, "dir/sub/deep/d.go"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dir-audited-sub", func(b *testing.B) {
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

func BenchmarkReadWriteFile(b *testing.B) {
	d, _ := dir.New(memory.New())
	data := make([]byte, 4096)
	b.Run("WriteFile", func(b *testing.B) {
		for b.Loop() {
			if err := d.WriteFile(bg, "f", data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ReadFile", func(b *testing.B) {
		for b.Loop() {
			if _, err := d.ReadFile(bg, "f"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
