package main

import (
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// hidingLower keeps the optional interfaces of the view beneath it; its
// listings are its own (they leave hidden names out).
func TestHidingLowerForwardsOptionalInterfaces(t *testing.T) {
	wrap := func(b vfs.Backend) vfs.Backend { return hidingLower{Backend: b, view: lazyViewPolicy{root: "/"}} }
	vfstest.CheckForwards(t, memory.New(), wrap, vfstest.Forwarding{
		Withheld: map[string]string{
			"HostPather": "binding the host directory would show what it hides",
			"Chowner":    "a lower layer is only read",
			"Locator":    "the Dir's view beneath withholds it",
		},
		Sub: &vfstest.Forwarding{}, // hidingLower's Sub is the view's own
	})
	vfstest.CheckClaims(t, memory.New(), wrap)
}
