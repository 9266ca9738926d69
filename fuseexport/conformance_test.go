//go:build linux

package fuseexport

import (
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// TestConformanceThroughMount runs the vfstest suite through a real kernel
// mount: the backend under test is the physical backend opened on the mount
// point, so every call goes host syscalls -> kernel -> this package -> Dir ->
// memory backend, and the suite compares what it sees with package os on a
// real directory (create, read, write, rename with flags, symlinks, hard links,
// truncate, chmod, chtimes, listing, concurrent writers).
func TestConformanceThroughMount(t *testing.T) {
	vfstest.TestBackend(t, vfstest.Config{
		New: func(t *testing.T) vfs.Backend {
			d, _ := dir.New(memory.New())
			mp, _ := mountT(t, d, Options{})
			return probeMount(t, mp)
		},
		RejectsEscapingSymlinks: true,
		Skip: map[string]string{
			"Differential/hardlinks":   "the physical backend over the mount replaces a hard-linked file on write (physical.HardLinksReplace, THREATS 31); TestHardLinks checks links through the mount directly",
			"Threats/29-31-hard-links": "physical.HardLinksReplace, as above",
		},
	})
}
