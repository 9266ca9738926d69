package overlay

import (
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// overlayOver returns a wrap function making an Overlay of its lower, with
// an upper directory of t's.
func overlayOver(t *testing.T) func(vfs.Backend) vfs.Backend {
	return func(lower vfs.Backend) vfs.Backend {
		ov, err := NewOverlay(lower, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ov.Close() })
		return ov
	}
}

// overlayForwarding is what an Overlay does with each optional interface
// of its lower. It is two layers, not a wrapper of one backend: it claims
// the fused and listing calls it answers over its merged view, and keeps
// the optional File interfaces of the files it opens in either layer.
var overlayForwarding = vfstest.Forwarding{
	Withheld: map[string]string{
		"ListResolver":     "a listing merges two layers: a Dir resolves, decides, then lists (ReadDirInfo for READDIRPLUS)",
		"HostPather":       "two layers are no one host directory",
		"HostLinkResolver": "the overlay follows no host link: the kernel resolves links on its mount",
		"Locator":          "the overlay is served whole: it has no Sub",
		"Chowner":          "the overlay keeps no ownership",
	},
	Own: map[string]string{
		"OpenResolver": "opens in the layer its own resolution found the entry in",
		"TypedFile":    "a file opened in the upper answers from the upper's file",
		"OpenStater":   "a file opened in the upper answers from the upper's file",
	},
	NoSub: "the copy-on-write layer is served whole",
}

// The Overlay hides none of the optional interfaces a lower with all of them
// gives it (a lower-only path reaches the lower's ResolveStat and
// ReadDirInfo), and its files, lower or copied up, keep TypedFile and
// OpenStater.
func TestOverlayForwardsOptionalInterfaces(t *testing.T) {
	vfstest.CheckForwards(t, memory.New(), overlayOver(t), overlayForwarding)
}

// What the Overlay claims works over a lower without any optional interface.
func TestOverlayClaimsOnlyWhatWorks(t *testing.T) {
	vfstest.CheckClaims(t, memory.New(), overlayOver(t))
}
