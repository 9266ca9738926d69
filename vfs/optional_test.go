package vfs_test

import (
	"context"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// The wrappers of package vfs, each over a backend: none may hide an optional
// interface (vfs.Optionals) of what it wraps.
func vfsWrappers(t *testing.T) map[string]struct {
	wrap func(vfs.Backend) vfs.Backend
	f    vfstest.Forwarding
} {
	mount := func(at string) func(vfs.Backend) vfs.Backend {
		return func(b vfs.Backend) vfs.Backend {
			n := vfs.NewNamespace()
			if err := n.Mount(vfs.MustParse(at), b, vfs.MountOptions{}); err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return map[string]struct {
		wrap func(vfs.Backend) vfs.Backend
		f    vfstest.Forwarding
	}{
		"ReadOnly": {wrap: vfs.ReadOnly, f: vfstest.Forwarding{
			Refused: map[string]vfs.Code{"Chowner": vfs.CodeReadOnly, "LinkTimer": vfs.CodeReadOnly, "AttrFile": vfs.CodeReadOnly},
		}},
		"Namespace": {wrap: mount("."), f: vfstest.Forwarding{
			Withheld: map[string]string{
				"HostPather":       "a namespace is a tree of mounts, not one host directory",
				"HostLinkResolver": "the namespace follows its mounts' host links itself",
				"Locator":          "a namespace is an origin, not a Sub",
			},
			Sub: &vfstest.Forwarding{}, // the mount's own Sub
		}},
		"Namespace, mount below its root": {wrap: func(b vfs.Backend) vfs.Backend {
			s, err := b.Sub(context.Background(), vfs.MustParse("d"))
			if err != nil {
				t.Fatal(err)
			}
			return mount("d")(s)
		}, f: vfstest.Forwarding{
			Withheld: map[string]string{
				"HostPather":       "a namespace is a tree of mounts, not one host directory",
				"HostLinkResolver": "the namespace follows its mounts' host links itself",
				"Locator":          "a namespace is an origin, not a Sub",
			},
			Own: map[string]string{
				"ListResolver":  "the namespace lists a mount point itself",
				"DirInfoReader": "the namespace lists a mount point itself",
			},
			Sub: &vfstest.Forwarding{}, // the mount's own Sub
		}},
		"Namespace.Sub into a mount": {wrap: func(b vfs.Backend) vfs.Backend {
			s, err := mount("m")(b).Sub(context.Background(), vfs.MustParse("m"))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	}
}

func TestWrappersForwardOptionalInterfaces(t *testing.T) {
	for name, w := range vfsWrappers(t) {
		t.Run(name, func(t *testing.T) {
			vfstest.CheckForwards(t, memory.New(), w.wrap, w.f)
		})
	}
}

func TestWrappersClaimOnlyWhatWorks(t *testing.T) {
	for name, w := range vfsWrappers(t) {
		t.Run(name, func(t *testing.T) {
			vfstest.CheckClaims(t, memory.New(), w.wrap)
		})
	}
}
