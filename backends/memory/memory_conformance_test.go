package memory

import (
	"testing"

	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

func TestConformance(t *testing.T) {
	vfstest.TestBackend(t, vfstest.Config{
		New: func(t *testing.T) vfs.Backend { return New() },
	})
}

func TestConformanceSub(t *testing.T) {
	// The suite again, through a Sub of a larger tree: a Sub must be a complete
	// backend on its own.
	vfstest.TestBackend(t, vfstest.Config{
		New: func(t *testing.T) vfs.Backend {
			m := New()
			if err := m.Mkdir(bg, P("outer"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, m, "outer-secret", "s")
			s, err := m.Sub(bg, P("outer"))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	})
}
