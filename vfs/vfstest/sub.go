package vfstest

import (
	"os"
	"slices"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// testSub checks Sub: what it sees, that symlinks in it resolve beneath its root
// (THREATS 48, 50) and that it pins its directory (51).
func testSub(t *testing.T, cfg Config) {
	t.Run("basics", func(t *testing.T) { subBasics(t, cfg) })

	t.Run("through-symlink", func(t *testing.T) { subThroughSymlink(t, cfg) })

	t.Run("48-link-out-of-sub", func(t *testing.T) { sub48LinkOutOfSub(t, cfg) })

	t.Run("50-dotdot-at-root", func(t *testing.T) { sub50DotdotAtRoot(t, cfg) })

	t.Run("51-sub-pins-its-directory", func(t *testing.T) { sub51SubPinsItsDirectory(t, cfg) })
}

// subBasics is testSub's "basics" subtest.
func subBasics(t *testing.T, cfg Config) {
	f := newFx(t, cfg)
	f.seed("d/", "d/x=X", "d/e/", "d/e/y=Y", "f=F")
	sub, err := f.b.Sub(f.ctx, p("d"))
	if err != nil {
		t.Fatalf("Sub(d): %v", err)
	}
	s := f.on(sub)
	s.wantNames(".", "e", "x")
	if got := s.read("e/y"); got != "Y" {
		t.Errorf("Sub(d) e/y = %q", got)
	}
	if info, err := sub.Stat(f.ctx, vfs.Root); f.wantOK(err, "Sub(d).Stat(.)") && (!info.Mode.IsDir() || info.Name != ".") {
		t.Errorf("Sub(d).Stat(.) = name %q mode %v; want a directory named \".\"", info.Name, info.Mode)
	}
	if sub.Features() != f.feat {
		t.Errorf("Sub(d).Features() = %+v; want the parent's %+v", sub.Features(), f.feat)
	}
	s.write("new", "N")
	if got := f.read("d/new"); got != "N" {
		t.Errorf("a file written through Sub(d) reads %q in the parent", got)
	}
	f.write("d/e/z", "Z")
	if got := s.read("e/z"); got != "Z" {
		t.Errorf("a file written in the parent reads %q through Sub(d)", got)
	}
	if err := sub.Remove(f.ctx, vfs.Root); err == nil {
		t.Error("Sub(d).Remove(.) succeeded; a backend's root cannot be removed")
	}
	if !f.exists("d") {
		t.Fatal("Sub(d).Remove(.) removed d")
	}
	nested, err := sub.Sub(f.ctx, p("e"))
	if f.wantOK(err, "Sub(d).Sub(e)") {
		f.on(nested).wantNames(".", "y", "z")
	}
	root, err := f.b.Sub(f.ctx, vfs.Root)
	if f.wantOK(err, "Sub(.)") {
		f.on(root).wantNames(".", "d", "f")
	}
	_, err = f.b.Sub(f.ctx, p("f"))
	f.wantCode(err, vfs.CodeNotDir, "Sub(f)")
	_, err = f.b.Sub(f.ctx, p("missing"))
	f.wantCode(err, vfs.CodeNotFound, "Sub(missing)")
	_, err = f.b.Sub(f.ctx, p("f/"))
	f.wantCode(err, vfs.CodeNotDir, "Sub(f/)")
}

// subThroughSymlink is testSub's "through-symlink" subtest.
func subThroughSymlink(t *testing.T, cfg Config) {
	f := newFx(t, cfg, symlinks)
	f.seed("d/", "d/x=X", "ld -> d", "lf -> d/x")
	sub, err := f.b.Sub(f.ctx, p("ld"))
	if f.wantOK(err, "Sub(ld)") {
		f.on(sub).wantNames(".", "x")
	}
	_, err = f.b.Sub(f.ctx, p("lf"))
	f.wantCode(err, vfs.CodeNotDir, "Sub(lf)")
	f.plant("/d", "absl")
	f.plant("../d", "rell")
	for _, s := range []string{"absl", "rell"} {
		_, err = f.b.Sub(f.ctx, p(s))
		f.wantCode(err, vfs.CodeOutside, "Sub(%s)", s)
	}
}

// sub48LinkOutOfSub is testSub's "48-link-out-of-sub" subtest.
func sub48LinkOutOfSub(t *testing.T, cfg Config) {
	f := newFx(t, cfg, symlinks)
	f.seed("a/", "a/in/", "b/", "b/secret=S", "a/up -> ../b",
		"a/in/deep -> ../../b/secret", "a/loop -> ../a/up", "a/ok -> in/../in")
	if got := f.read("a/up/secret"); got != "S" {
		t.Fatalf("in the parent, a/up/secret = %q; want S", got)
	}
	sub, err := f.b.Sub(f.ctx, p("a"))
	if err != nil {
		t.Fatalf("Sub(a): %v", err)
	}
	s := f.on(sub)
	s.write(victim, "V")
	for _, q := range []string{"up/secret", "loop/secret"} {
		s.attack(q, vfs.CodeOutside, "")
	}
	for _, q := range []string{"up", "in/deep", "loop"} {
		_, err := sub.Stat(f.ctx, p(q))
		s.wantCode(err, vfs.CodeOutside, "Sub(a).Stat(%s)", q)
	}
	_, err = sub.Stat(f.ctx, p("ok"))
	s.wantOK(err, "Sub(a).Stat(ok -> in/../in)")
	// A link created through the sub is confined the same way.
	s.plant("../b/secret", "mine")
	_, err = ReadFile(f.ctx, sub, p("mine"))
	s.wantCode(err, vfs.CodeOutside, "Sub(a).ReadFile(mine -> ../b/secret)")
	if got := f.read("a/mine"); got != "S" {
		t.Errorf("the same link read from the parent = %q; want S", got)
	}
	f.plant("/b", "a/upabs")
	s.attack("upabs/secret", vfs.CodeOutside, "")
}

// sub50DotdotAtRoot is testSub's "50-dotdot-at-root" subtest.
func sub50DotdotAtRoot(t *testing.T, cfg Config) {
	f := newFx(t, cfg, symlinks)
	f.seed(victim+"=V", "d/", "d/e/", "d/f=F", "d/up -> ..", "d/e/up2 -> ../..")
	if _, err := f.b.Stat(f.ctx, p("d/up")); err != nil {
		t.Errorf("Stat(d/up -> ..) = %v; it names the root", err)
	}
	sub, err := f.b.Sub(f.ctx, p("d"))
	if err != nil {
		t.Fatalf("Sub(d): %v", err)
	}
	for _, q := range []string{"up", "up/f", "e/up2"} {
		_, err := sub.Stat(f.ctx, p(q))
		f.wantCode(err, vfs.CodeOutside, "Sub(d).Stat(%s)", q)
	}
	if got := f.on(sub).read("e/../f"); got != "F" {
		t.Errorf("Sub(d) e/../f = %q", got)
	}
	f.plant("..", "up")
	f.plant("../..", "d/upup")
	f.plant("../../..", "d/e/up3")
	f.attack("up/x", vfs.CodeOutside, "")
	f.attack("up/", "", vfs.CodeOutside)
	for _, q := range []string{"up", "d/upup", "d/e/up3"} {
		_, err := f.b.Stat(f.ctx, p(q))
		f.wantCode(err, vfs.CodeOutside, "Stat(%s)", q)
	}
}

// sub51SubPinsItsDirectory is testSub's "51-sub-pins-its-directory" subtest.
func sub51SubPinsItsDirectory(t *testing.T, cfg Config) {
	f := newFx(t, cfg)
	f.seed("a/", "a/f=one", "p/", "p/q/", "p/q/g=G")
	sub, err := f.b.Sub(f.ctx, p("a"))
	if err != nil {
		t.Fatalf("Sub(a): %v", err)
	}
	deep, err := f.b.Sub(f.ctx, p("p/q"))
	if err != nil {
		t.Fatalf("Sub(p/q): %v", err)
	}
	s, ds := f.on(sub), f.on(deep)
	if err := f.b.Rename(f.ctx, p("a"), p("z"), 0); err != nil {
		t.Fatalf("Rename(a, z): %v", err)
	}
	if err := f.b.Rename(f.ctx, p("p"), p("moved"), 0); err != nil {
		t.Fatalf("Rename(p, moved): %v", err)
	}
	if got := s.read("f"); got != "one" {
		t.Errorf("after Rename(a, z), Sub(a) f = %q; want one (the sub is pinned)", got)
	}
	if got := ds.read("g"); got != "G" {
		t.Errorf("after renaming its grandparent, Sub(p/q) g = %q; want G", got)
	}
	f.mkdir("a")
	f.write("a/f", "two")
	f.write("a/only-new", "")
	if got := s.read("f"); got != "one" {
		t.Errorf("a new a/f = two; Sub(a) must still see the old a: read %q", got)
	}
	if names := s.names("."); slices.Contains(names, "only-new") {
		t.Errorf("Sub(a) lists %q: it followed the path, not the directory", names)
	}
	s.write("g", "through sub")
	if got := f.read("z/g"); got != "through sub" {
		t.Errorf("a file written through Sub(a) after the rename reads %q at z/g", got)
	}
	if f.exists("a/g") {
		t.Error("a file written through Sub(a) after the rename appeared in the new a")
	}
	// An open handle is pinned the same way.
	h, err := sub.OpenFile(f.ctx, p("f"), os.O_RDONLY, 0)
	if f.wantOK(err, "Sub(a).OpenFile(f)") {
		f.wantOK(f.b.Rename(f.ctx, p("z"), p("zz"), 0), "Rename(z, zz)")
		buf := make([]byte, 8)
		n, _ := h.ReadAt(buf, 0)
		if string(buf[:n]) != "one" {
			t.Errorf("handle opened through the sub reads %q after another rename", buf[:n])
		}
		h.Close()
	}
}
