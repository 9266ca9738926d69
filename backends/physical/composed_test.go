//go:build linux

package physical

import (
	"testing"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// The physical backend composed the way hosts use it: mounted at the root of a
// Namespace, a Dir over the physical backend, and a Dir over such a Namespace, each
// through the conformance suite with both resolvers. (The suite wants an empty root,
// so the namespace holds only the physical mount: a Sub at a nested mount point
// would hand back the physical backend's own Sub, bypassing the Namespace. The
// Namespace's nesting is covered over memory mounts in package vfs.)
func TestConformanceComposed(t *testing.T) {
	for _, r := range resolvers {
		t.Run(r.name, func(t *testing.T) {
			t.Run("NamespaceMount", func(t *testing.T) {
				vfstest.TestBackend(t, vfstest.Config{
					New: func(t *testing.T) vfs.Backend {
						ns := vfs.NewNamespace()
						if err := ns.Mount(vfs.Root, newTestFS(t, WithResolver(r.mode)), vfs.MountOptions{}); err != nil {
							t.Fatal(err)
						}
						return ns
					},
					RejectsEscapingSymlinks: true,
					Skip:                    replaceSkips,
				})
			})
			t.Run("DirOverPhysical", func(t *testing.T) {
				vfstest.TestBackend(t, vfstest.Config{
					New: func(t *testing.T) vfs.Backend {
						d, _ := dir.New(newTestFS(t, WithResolver(r.mode)))
						return d.Backend()
					},
					RejectsEscapingSymlinks: true,
					Skip:                    replaceSkips,
				})
			})
			t.Run("DirOverNamespace", func(t *testing.T) {
				vfstest.TestBackend(t, vfstest.Config{
					New: func(t *testing.T) vfs.Backend {
						ns := vfs.NewNamespace()
						if err := ns.Mount(vfs.Root, newTestFS(t, WithResolver(r.mode)), vfs.MountOptions{}); err != nil {
							t.Fatal(err)
						}
						d, _ := dir.New(ns)
						return d.Backend()
					},
					RejectsEscapingSymlinks: true,
					Skip:                    replaceSkips,
				})
			})
		})
	}
}
