package dir_test

import (
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// TestBackendViewConformance runs the backend conformance suite over a Dir's
// Backend view: every check of the Dir layer sits between the suite and the memory
// backend, and the suite must not notice, except that the view refuses escaping
// symlink targets at creation, as Dir.Symlink does (THREATS 26).
func TestBackendViewConformance(t *testing.T) {
	vfstest.TestBackend(t, vfstest.Config{
		New: func(t *testing.T) vfs.Backend {
			d, _ := dir.New(memory.New())
			return d.Backend()
		},
		RejectsEscapingSymlinks: true,
	})
}

// TestBackendViewConformanceVerbatimLinks runs the whole suite over the view with
// the symlink creation rule switched off (a test-only seam), so the cases that need
// an escaping link planted still check that the view is otherwise transparent.
func TestBackendViewConformanceVerbatimLinks(t *testing.T) {
	vfstest.TestBackend(t, vfstest.Config{
		New: func(t *testing.T) vfs.Backend {
			d, _ := dir.New(memory.New())
			return dir.BackendWithVerbatimLinks(d)
		},
	})
}

// TestBackendViewOfSubConformance runs the suite over the view of a Sub, through a
// writable Child control, as a host would mount a granted subtree elsewhere.
func TestBackendViewOfSubConformance(t *testing.T) {
	vfstest.TestBackend(t, vfstest.Config{
		New: func(t *testing.T) vfs.Backend {
			root, ctl := dir.New(memory.New())
			if err := root.MkdirAll(bg, "grant/here"); err != nil {
				t.Fatal(err)
			}
			child, err := ctl.Child(bg, "grant/here")
			if err != nil {
				t.Fatal(err)
			}
			return dir.BackendWithVerbatimLinks(child.Dir())
		},
	})
}
