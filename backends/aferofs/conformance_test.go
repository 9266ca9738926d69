package aferofs

import (
	"testing"

	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
	"github.com/spf13/afero"
)

// TestConformance runs the shared suite over a MemMapFs. MemMapFs has no symlinks
// and afero no hard links, so those groups skip themselves; the one deliberate
// deviation is declared below.
func TestConformance(t *testing.T) {
	vfstest.TestBackend(t, vfstest.Config{
		New: func(t *testing.T) vfs.Backend {
			b, err := New(afero.NewMemMapFs())
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Skip: map[string]string{
			"Sub/51-sub-pins-its-directory": "afero has no handles: a Sub follows its directory's name, not the directory (documented in the package doc and pinned by TestSubIsNotPinned)",
		},
	})
}

// TestConformanceSymlinks runs the suite over a MemMapFs extended with symlinks
// (linkFs), so the symlink and confinement groups run through the adapter too.
func TestConformanceSymlinks(t *testing.T) {
	vfstest.TestBackend(t, vfstest.Config{
		New: func(t *testing.T) vfs.Backend {
			b, err := New(newLinkFs())
			if err != nil {
				t.Fatal(err)
			}
			if !b.Features().Symlinks {
				t.Fatal("linkFs backend does not declare symlinks")
			}
			return b
		},
		Skip: map[string]string{
			"Sub/51-sub-pins-its-directory": "afero has no handles: a Sub follows its directory's name, not the directory (documented in the package doc and pinned by TestSubIsNotPinned)",
		},
	})
}
