package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

var bg = context.Background()

// P parses a test path.
func P(s string) vfs.Path { return vfs.MustParse(s) }

// newFS opens a fresh scratch file in t's temporary directory, closed at cleanup.
func newFS(t testing.TB, opts ...Option) (*FS, string) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "scratch.db")
	f, err := Open(name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, name
}

func TestConformance(t *testing.T) {
	vfstest.TestBackend(t, vfstest.Config{
		New: func(t *testing.T) vfs.Backend { f, _ := newFS(t); return f },
	})
}

func TestConformanceSub(t *testing.T) {
	vfstest.TestBackend(t, vfstest.Config{
		New: func(t *testing.T) vfs.Backend {
			f, _ := newFS(t)
			if err := f.Mkdir(bg, P("outer"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := vfstest.WriteFile(bg, f, P("outer-secret"), []byte("s")); err != nil {
				t.Fatal(err)
			}
			s, err := f.Sub(bg, P("outer"))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	})
}
