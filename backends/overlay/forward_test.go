package overlay

import (
	"maps"
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
//
// A file opened for reading before any write is the lower's, which keeps
// its host descriptor to itself; one opened for writing, and so every file
// the Sub opens after, is the upper's copy, which gives its own.
var overlayForwarding = vfstest.Forwarding{
	Withheld: withOwn(overlayWithheld, map[string]string{
		"hostfd.Filer": "a lower file is read through the lower's checks, which a descriptor handed to the kernel would pass by",
		"AttrFile":     "a lower file opened for reading is the lower's, which the overlay never changes: a change of its status is a chmod or chtimes of its path, which copies it up",
	}),
	Own:      overlayOwn,
	Writable: &vfstest.Forwarding{Own: upperOwn},
	Sub: &vfstest.Forwarding{
		Withheld: overlayWithheld,
		Own: withOwn(upperOwn, map[string]string{
			"StatResolver": "a Sub resolves beneath its root in the merged view, never with the lower's resolution, which its root does not bound",
		}),
		Writable: &vfstest.Forwarding{Own: upperOwn},
	},
}

// upperOwn is overlayOwn where the file is the upper's copy.
var upperOwn = withOwn(overlayOwn, map[string]string{
	"hostfd.Filer": "an upper file gives the upper's descriptor",
	"AttrFile":     "an upper file changes the upper's copy",
})

var overlayWithheld = map[string]string{
	"ListResolver":     "a listing merges two layers: a Dir resolves, decides, then lists (ReadDirInfo for READDIRPLUS)",
	"HostPather":       "two layers are no one host directory",
	"HostLinkResolver": "the overlay follows no host link: the kernel resolves links on its mount",
	"Locator":          "a Sub follows its directory by path (it resolves its root by name at each call): it pins no directory to locate",
	"Chowner":          "the overlay keeps no ownership",
}

var overlayOwn = map[string]string{
	"OpenResolver": "opens in the layer its own resolution found the entry in",
	"LinkTimer":    "copies the entry up and sets its copy's times",
	"StatFSer":     "reports the upper directory's storage, where every change lands",
	"TypedFile":    "a file opened in the upper answers from the upper's file",
	"OpenStater":   "a file opened in the upper answers from the upper's file",
}

// withOwn is a copy of own with more's entries added (Withheld maps too).
func withOwn(own, more map[string]string) map[string]string {
	out := maps.Clone(own)
	maps.Copy(out, more)
	return out
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
