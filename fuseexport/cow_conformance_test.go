package fuseexport

import (
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// TestOverlayConformanceThroughMount runs vfstest through a kernel mount of an
// Overlay (whose lower is a memory Dir), as a lazy sandbox serves it: the kernel
// resolves symlinks, the overlay keeps the changes in its upper directory.
func TestOverlayConformanceThroughMount(t *testing.T) {
	vfstest.TestBackend(t, vfstest.Config{
		New: func(t *testing.T) vfs.Backend {
			low, _ := dir.New(memory.New())
			ov, err := NewOverlay(low.Backend(), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ov.Close() })
			d, _ := dir.New(ov)
			mp, _ := mountT(t, d, Options{})
			return probeMount(t, mp)
		},
		RejectsEscapingSymlinks: true,
		Skip: map[string]string{
			"Differential/hardlinks":   "physical.HardLinksReplace on the mount, as in TestConformanceThroughMount",
			"Threats/29-31-hard-links": "physical.HardLinksReplace, as above",
		},
	})
}
