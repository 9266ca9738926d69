package overlay

import (
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// What the suite checks that the Overlay deliberately does not do, and why.
var (
	hardLinkSkips = map[string]string{
		"Differential/hardlinks":   "the upper is written through physical.HardLinksReplace: a write gives the name written a private copy",
		"Threats/29-31-hard-links": "physical.HardLinksReplace in the upper, as above",
	}
	subSkips = map[string]string{
		"Sub/51-sub-pins-its-directory": "a Sub follows its directory by path, as the Overlay names every entry: after a rename it names the old path",
		"Sub/48-link-out-of-sub":        "a Sub refuses a target climbing into its parent's tree, where the Overlay would follow it, as a Dir's Sub does (TestSubLeavingLinks)",
	}
)

func skips(sets ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, s := range sets {
		for k, v := range s {
			out[k] = v
		}
	}
	return out
}

// TestConformance runs the backend suite on an Overlay as a bare backend:
// it resolves each path in its merged view (the shared resolver) before it
// acts, as every virtual backend does.
func TestConformance(t *testing.T) {
	vfstest.TestBackend(t, vfstest.Config{
		New:  func(t *testing.T) vfs.Backend { return overlayOver(t)(memory.New()) },
		Skip: skips(hardLinkSkips, subSkips),
	})
}

// TestConformanceThroughDir runs it through a Dir's Backend view, as a lazy
// run serves the overlay: the Dir resolves each path in the overlay, then
// acts on the Resolved path.
func TestConformanceThroughDir(t *testing.T) {
	vfstest.TestBackend(t, vfstest.Config{
		New: func(t *testing.T) vfs.Backend {
			d, _ := dir.New(overlayOver(t)(memory.New()))
			return d.Backend()
		},
		Skip: skips(hardLinkSkips, subSkips),
	})
}
