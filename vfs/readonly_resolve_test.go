package vfs_test

import (
	"os"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// resolveOpenFile opens p through b's ResolveOpen (b must be an OpenResolver),
// deciding nothing.
func resolveOpenFile(t *testing.T, b vfs.Backend, p string) vfs.File {
	t.Helper()
	r, ok := b.(vfs.OpenResolver)
	if !ok {
		t.Fatalf("%T is no vfs.OpenResolver", b)
	}
	f, _, err := r.ResolveOpen(nsCtx, nsP(p), func(vfs.Location) error { return nil })
	nsMust(t, err)
	return f
}

// The file a read-only backend's ResolveOpen returns is the file its OpenFile
// returns: writes refuse with read_only and name the caller's path. Before
// the fix, ReadOnly's ResolveOpen and a Namespace's one-lookup ResolveOpen
// returned the inner backend's file, whose Write answered the inner
// backend's error (and path).
func TestReadOnlyResolveOpenFileRefusesWrites(t *testing.T) {
	ns := vfs.NewNamespace()
	nsMust(t, ns.Mount(nsP("m"), roFixture(t), vfs.MountOptions{ReadOnly: true}))
	nsMust(t, ns.Mount(nsP("w"), roFixture(t), vfs.MountOptions{}))
	root := vfs.NewNamespace()
	nsMust(t, root.Mount(vfs.Root, roFixture(t), vfs.MountOptions{}))
	cases := []struct {
		name string
		b    vfs.Backend
		p    string
		code vfs.Code // what Write answers on a file opened for reading
	}{
		{"ReadOnly", vfs.ReadOnly(roFixture(t)), "d/f", vfs.CodeReadOnly},
		{"ReadOnly, through a link", vfs.ReadOnly(roFixture(t)), "l", vfs.CodeReadOnly},
		{"Namespace, read-only mount", ns, "m/d/f", vfs.CodeReadOnly},
		{"Namespace, read-only mount, through a link", ns, "m/l", vfs.CodeReadOnly},
		{"Namespace, writable mount without OpenResolver, through a link", ns, "w/l", vfs.CodePermission},
		{"Namespace, root mount without OpenResolver, through a link", root, "l", vfs.CodePermission},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opened, err := c.b.OpenFile(nsCtx, nsP(c.p), os.O_RDONLY, 0)
			nsMust(t, err)
			defer opened.Close()
			_, err = opened.Write([]byte("x"))
			nsWantErr(t, err, c.code, c.p, "")

			f := resolveOpenFile(t, c.b, c.p)
			defer f.Close()
			_, err = f.Write([]byte("x"))
			nsWantErr(t, err, c.code, c.p, "")
			_, err = f.WriteAt([]byte("x"), 0)
			nsWantErr(t, err, c.code, c.p, "")
			nsWantErr(t, f.Truncate(0), c.code, c.p, "")
			_, typed := f.(vfs.TypedFile)
			if _, want := opened.(vfs.TypedFile); typed != want {
				t.Errorf("ResolveOpen's file %T is a vfs.TypedFile: %v, OpenFile's %T: %v", f, typed, opened, want)
			}
			if info, ok := vfs.OpenStat(f); ok && info.Size != 4 {
				t.Errorf("OpenStat size %d, want 4", info.Size)
			}
		})
	}
}
