package overlay

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
)

// leavingFixture is an Overlay over a memory lower holding bin/py ->
// /usr/bin/python3 (absolute), vendor/x -> ../../shared/x (climbing above
// the root) and a directory sd.
func leavingFixture(t *testing.T) *Overlay {
	t.Helper()
	lower := memory.New()
	for _, d := range []string{"bin", "vendor", "sd"} {
		if err := lower.Mkdir(bg, vfs.MustParse(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"bin/py": "/usr/bin/python3", "vendor/x": "../../shared/x"} {
		if err := lower.Symlink(bg, target, vfs.MustParse(name)); err != nil {
			t.Fatal(err)
		}
	}
	return overlayOver(t)(lower).(*Overlay)
}

// wantLink fails t unless p in o is a symlink holding target, listed in its
// directory, and never followed (path_outside_sandbox).
func wantLink(t *testing.T, o vfs.Backend, p, target string) {
	t.Helper()
	vp := vfs.MustParse(p)
	if got, err := o.Readlink(bg, vp); err != nil || got != target {
		t.Errorf("Readlink(%s) = %q, %v; want %q", p, got, err, target)
	}
	if info, err := o.Lstat(bg, vp); err != nil || info.Mode&fs.ModeSymlink == 0 {
		t.Errorf("Lstat(%s) = %v, %v; want a symlink", p, info.Mode, err)
	}
	ents, err := o.ReadDir(bg, vp.Dir())
	if err != nil {
		t.Fatalf("ReadDir(%s): %v", vp.Dir(), err)
	}
	if !slices.ContainsFunc(ents, func(e vfs.DirEntry) bool { return e.Name == vp.Base() }) {
		t.Errorf("ReadDir(%s) lacks %s", vp.Dir(), vp.Base())
	}
	if _, err := o.Stat(bg, vp); vfs.CodeOf(err) != vfs.CodeOutside {
		t.Errorf("Stat(%s) = %v; want path_outside_sandbox", p, err)
	}
}

// TestLeavingLinks: the lazy layer creates, lists and reads back a link
// whose target leaves the tree (absolute, or climbing above the root), and
// copies such a lower link up as it is (a renamed directory holding one, a
// renamed link); none is followed. (Failed before: the upper refused each
// with path_outside_sandbox.)
func TestLeavingLinks(t *testing.T) {
	o := leavingFixture(t)
	for name, target := range map[string]string{"py": "/usr/bin/python3", "up": "../shared"} {
		if err := o.Symlink(bg, target, vfs.MustParse(name)); err != nil {
			t.Fatalf("Symlink(%q, %s): %v", target, name, err)
		}
		wantLink(t, o, name, target)
	}
	if err := o.Rename(bg, vfs.MustParse("bin"), vfs.MustParse("bin2"), 0); err != nil {
		t.Fatalf("Rename(bin, bin2), a copy-up of bin/py: %v", err)
	}
	if err := o.Rename(bg, vfs.MustParse("vendor/x"), vfs.MustParse("vendor/y"), 0); err != nil {
		t.Fatalf("Rename(vendor/x, vendor/y), a copy-up of the link: %v", err)
	}
	wantLink(t, o, "bin2/py", "/usr/bin/python3")
	wantLink(t, o, "vendor/y", "../../shared/x")
	for name, target := range map[string]string{"py": "/usr/bin/python3", "bin2/py": "/usr/bin/python3", "vendor/y": "../../shared/x"} {
		if got, err := os.Readlink(filepath.Join(o.UpperDir(), name)); err != nil || got != target {
			t.Errorf("the upper holds %s -> %q, %v; want %q", name, got, err, target)
		}
	}
}

// TestSubLeavingLinks: a Sub of the layer stores an absolute target as
// data, as the Dir's Sub does, and still refuses one climbing above its
// root: that one may land in the wider tree, where the overlay would follow
// it (an alias, not data). (The absolute one failed before.)
func TestSubLeavingLinks(t *testing.T) {
	o := leavingFixture(t)
	sb, err := o.Sub(bg, vfs.MustParse("sd"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Symlink(bg, "/usr/bin/python3", vfs.MustParse("py")); err != nil {
		t.Fatalf("Sub(sd).Symlink(/usr/bin/python3, py): %v", err)
	}
	wantLink(t, sb, "py", "/usr/bin/python3")
	wantLink(t, o, "sd/py", "/usr/bin/python3")
	wantCode(t, sb.Symlink(bg, "../bin", vfs.MustParse("up")), vfs.CodeOutside, "Sub(sd).Symlink(../bin, up)")
	wantCode(t, sb.Symlink(bg, "a\x00b", vfs.MustParse("bad")), vfs.CodeInvalidPath, "Sub(sd).Symlink(NUL)")
	root, err := o.Sub(bg, vfs.Root)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.Symlink(bg, "../shared", vfs.MustParse("up")); err != nil {
		t.Errorf("Sub(.).Symlink(../shared, up), climbing above the whole tree: %v", err)
	}
}
