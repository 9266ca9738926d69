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
// backend, and the suite must not notice. At the tree's root a target leaving the
// tree is data (issue 29), stored as the memory backend stores it; in a Sub of
// the view a target climbing above the Sub's root is refused, since the parent
// would follow it (TestSymlinkRules), which is the one case skipped.
func TestBackendViewConformance(t *testing.T) {
	vfstest.TestBackend(t, vfstest.Config{
		New: func(t *testing.T) vfs.Backend {
			d, _ := dir.New(memory.New())
			return d.Backend()
		},
		Skip: map[string]string{
			"Sub/48-link-out-of-sub": "a Sub of a Dir refuses a target climbing into its parent's tree",
		},
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
