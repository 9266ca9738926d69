//go:build linux

package fuseexport

import (
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/overlay"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// TestOverlayConformanceThroughMount runs vfstest through a kernel mount of an
// Overlay (whose lower is a memory Dir), as a lazy sandbox serves it: the kernel
// resolves symlinks, the overlay keeps the changes in its upper directory.
//
// It runs twice: as a mount serves every request, and with Passthrough (the
// kernel reads and writes the upper files itself), which is how capfs run
// mounts it.
func TestOverlayConformanceThroughMount(t *testing.T) {
	for _, pt := range []bool{false, true} {
		name := "served"
		if pt {
			name = "passthrough"
		}
		t.Run(name, func(t *testing.T) { overlayConformance(t, Options{Passthrough: pt, ReadDirPlus: pt}) })
	}
}

func overlayConformance(t *testing.T, opts Options) {
	vfstest.TestBackend(t, vfstest.Config{
		New: func(t *testing.T) vfs.Backend {
			low, _ := dir.New(memory.New())
			ov, err := overlay.NewOverlay(low.Backend(), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ov.Close() })
			d, _ := dir.New(ov)
			mp, _ := mountT(t, d, opts)
			return probeMount(t, mp)
		},
		RejectsEscapingSymlinks: true,
		Skip: map[string]string{
			"Differential/hardlinks":   "physical.HardLinksReplace on the mount, as in TestConformanceThroughMount",
			"Threats/29-31-hard-links": "physical.HardLinksReplace, as above",
		},
	})
}
