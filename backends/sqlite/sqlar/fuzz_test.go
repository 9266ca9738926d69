package sqlar

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/sqlite/sqlitetest"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// FuzzImport imports arbitrary bytes (seeded with the generated sqlar
// corpus) as a SQLite Archive into a memory Dir with a quota: it succeeds or
// fails within a deadline, and an archive refused before its first entry
// leaves the Dir empty.
func FuzzImport(f *testing.F) {
	for _, c := range sqlitetest.Sqlar() {
		p := filepath.Join(f.TempDir(), "seed.sqlar")
		if err := sqlitetest.Apply(p, sqlitetest.SqlarBase+c.SQL); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "a.sqlar")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		m := memory.New(memory.WithQuota(16 << 20))
		d, _ := dir.New(m)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := Import(ctx, p, d)
		if ctx.Err() != nil {
			t.Fatalf("import ran past its deadline: %v", err)
		}
		if err == nil && st.Bytes > MaxTotalSize {
			t.Fatalf("imported %d bytes", st.Bytes)
		}
		if ents, _ := m.ReadDir(context.Background(), vfs.Root); errors.Is(err, ErrBadArchive) && st.Files+st.Dirs+st.Symlinks == 0 && len(ents) != 0 {
			t.Fatalf("a refused archive (%v) wrote %d entries", err, len(ents))
		}
	})
}
