package vfs_test

import (
	"context"
	"io/fs"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/internal/hostfd"
	"github.com/capfs/capfs/vfs"
)

// withAttr is an optFile's vfs.AttrFile, counting its calls.
type withAttr struct{ *optFile }

func (f withAttr) Chmod(fs.FileMode) error { f.calls["AttrFile"]++; return nil }

func (f withAttr) Chtimes(time.Time, time.Time) error { f.calls["AttrFile"]++; return nil }

// allAndAttr is allOptionals that forwards vfs.AttrFile too.
type allAndAttr struct{ allOptionals }

func (a allAndAttr) Chmod(m fs.FileMode) error { return a.File.(vfs.AttrFile).Chmod(m) }

func (a allAndAttr) Chtimes(at, mt time.Time) error {
	return a.File.(vfs.AttrFile).Chtimes(at, mt)
}

// WrapFile keeps vfs.AttrFile exactly where the wrapper and the wrapped File
// both have it, with every other optional File interface as the wrapped File
// has them, and each reaches the wrapped File's method.
func TestWrapFileKeepsAttrFile(t *testing.T) {
	attrType := reflect.TypeFor[vfs.AttrFile]()
	for has, mk := range optFiles() {
		for _, attr := range []bool{false, true} {
			o := &optFile{failing: failing{vfs.CodeIO}, calls: map[string]int{}}
			inner := mk(o)
			if attr {
				inner = struct {
					vfs.File
					withAttr
				}{inner, withAttr{o}}
			}
			w := vfs.WrapFile(allAndAttr{allOptionals{inner}}, inner)
			if got := reflect.TypeOf(w).Implements(attrType); got != attr {
				t.Errorf("[%s, attr %v] WrapFile implements vfs.AttrFile: %v", has, attr, got)
			}
			for name, typ := range fileOptionals() {
				// The struct above hides the inner's others: check only
				// the wrapper keeps what the inner (as built) has.
				in := reflect.TypeOf(inner).Implements(typ)
				if got := reflect.TypeOf(w).Implements(typ); got != in {
					t.Errorf("[%s, attr %v] WrapFile implements %s: %v, the inner file: %v", has, attr, name, got, in)
				}
			}
			if attr {
				if err := vfs.FileChmod(w, 0o600); err != nil || o.calls["AttrFile"] != 1 {
					t.Errorf("[%s] FileChmod: %v, reached the inner file %d times", has, err, o.calls["AttrFile"])
				}
			} else if err := vfs.FileChmod(w, 0o600); vfs.CodeOf(err) != vfs.CodeNotSupported {
				t.Errorf("[%s] FileChmod without AttrFile: %v, want not_supported", has, err)
			}
		}
	}
	// A wrapper without AttrFile drops it.
	o := &optFile{failing: failing{vfs.CodeIO}, calls: map[string]int{}}
	inner := struct {
		*optFile
		withAttr
		withHostFd
	}{o, withAttr{o}, withHostFd{o}}
	w := vfs.WrapFile(allOptionals{inner}, inner)
	if _, ok := w.(vfs.AttrFile); ok {
		t.Error("WrapFile kept vfs.AttrFile the wrapper lacks")
	}
	if _, ok := hostfd.Of(w); !ok {
		t.Error("WrapFile dropped the host descriptor")
	}
}

// The vfs wrappers: a read-only backend refuses Lchtimes and its files'
// Chmod with read_only and forwards StatFS; a Namespace routes Lchtimes and
// StatFS to the mount the path reaches; an addressed File re-addresses
// AttrFile's errors.
func TestVFSWrappersAttrs(t *testing.T) {
	ctx := context.Background()
	m := memory.New(memory.WithQuota(1 << 20))
	if err := m.Mkdir(ctx, vfs.MustParse("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.Symlink(ctx, "d", vfs.MustParse("l")); err != nil {
		t.Fatal(err)
	}
	when := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	ro := vfs.ReadOnly(m)
	if err := vfs.Lchtimes(ctx, ro, vfs.MustParse("l"), time.Time{}, when); vfs.CodeOf(err) != vfs.CodeReadOnly {
		t.Errorf("read-only Lchtimes: %v", err)
	}
	if st, err := vfs.StatFS(ctx, ro, vfs.Root); err != nil || st.Total != 1<<20 {
		t.Errorf("read-only StatFS: %+v %v", st, err)
	}
	h, err := ro.OpenFile(ctx, vfs.MustParse("d"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := vfs.FileChmod(h, 0o700); vfs.CodeOf(err) != vfs.CodeReadOnly {
		t.Errorf("read-only file Chmod: %v", err)
	}
	h.Close()

	ns := vfs.NewNamespace()
	if err := ns.Mount(vfs.MustParse("a/m"), m, vfs.MountOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := vfs.Lchtimes(ctx, ns, vfs.MustParse("a/m/l"), time.Time{}, when); err != nil {
		t.Fatalf("Namespace Lchtimes: %v", err)
	}
	if li, err := m.Lstat(ctx, vfs.MustParse("l")); err != nil || !li.ModTime.Equal(when) {
		t.Errorf("the link's mtime after Lchtimes through the namespace: %v %v", li.ModTime, err)
	}
	if err := vfs.Lchtimes(ctx, ns, vfs.MustParse("a"), time.Time{}, when); vfs.CodeOf(err) != vfs.CodeReadOnly {
		t.Errorf("Lchtimes of a synthetic directory: %v, want read_only", err)
	}
	if st, err := vfs.StatFS(ctx, ns, vfs.MustParse("a/m/d")); err != nil || st.Total != 1<<20 {
		t.Errorf("Namespace StatFS: %+v %v", st, err)
	}
	if _, err := vfs.StatFS(ctx, ns, vfs.MustParse("a")); vfs.CodeOf(err) != vfs.CodeNotSupported {
		t.Errorf("StatFS of a synthetic directory: %v, want not_supported", err)
	}
	if _, err := vfs.StatFS(ctx, ns, vfs.MustParse("a/m/missing")); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Errorf("StatFS of a missing path: %v", err)
	} else if e := err.(*vfs.Error); e.Path != "a/m/missing" {
		t.Errorf("StatFS's error names %q, want the namespace's path", e.Path)
	}

	f, err := ns.OpenFile(ctx, vfs.MustParse("a/m/d"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := vfs.FileChmod(f, 0o700); vfs.CodeOf(err) != vfs.CodeClosed || err.(*vfs.Error).Path != "a/m/d" {
		t.Errorf("Chmod of a closed namespace file: %v, want closed on a/m/d", err)
	}
}
