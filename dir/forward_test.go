package dir_test

import (
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// A Dir's Backend view keeps the optional interfaces of the backend beneath
// it, as enforced calls, except those that would reach past the Dir.
func TestBackendViewForwardsOptionalInterfaces(t *testing.T) {
	wrap := func(b vfs.Backend) vfs.Backend {
		d, _ := dir.New(b)
		return d.Backend()
	}
	vfstest.CheckForwards(t, memory.New(), wrap, vfstest.Forwarding{
		Withheld: map[string]string{
			"HostPather": "binding the host directory would bypass the Dir",
			"Locator":    "a path from the origin's root reveals what lies above the Dir",
		},
		Own: map[string]string{
			"StatResolver": "decided and answered by the Dir's stat",
			"OpenResolver": "the fallback over the view's enforced Resolve and OpenFile, whose file is a Handle",
		},
	})
	vfstest.CheckClaims(t, memory.New(), wrap)
}
