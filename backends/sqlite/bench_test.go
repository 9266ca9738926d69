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
