package memory_test

import (
	"context"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
)

// TestResolveKeptStat: where it answers, it answers what ResolveStat does (the
// location, and the status Stat or Lstat reports), shallow and deep (through
// the resolution cache), and it declines every path with a symlink on the way
// (its canonical path is not the path given), a followed final link, and a
// missing entry.
func TestResolveKeptStat(t *testing.T) {
	ctx := context.Background()
	m, must := deepFS(t)
	must(m.Symlink(ctx, "a/b", vfs.MustParse("lb")))
	must(m.Symlink(ctx, "b", vfs.MustParse("a/lb")))
	must(m.Symlink(ctx, "leaf", vfs.MustParse(deep+"/ll")))
	must(m.Mkdir(ctx, vfs.MustParse("a/x"), 0o755))
	must(m.Mkdir(ctx, vfs.MustParse("a/x/c"), 0o755))
	cases := []struct {
		path   string
		follow bool
		want   bool
	}{
		{deep + "/leaf", true, true}, {deep + "/leaf", false, true}, {deep, true, true}, {deep + "/", true, true},
		{"a", true, true}, {"a/b/c/d", false, true}, {deep + "/ll", false, true},
		{deep + "/ll", true, false}, {"lb/c/d/e/f/leaf", true, false}, {"a/lb/c/d/e/f/leaf", true, false},
		{"a/lb/c/d/e/f", false, false}, {deep + "/nope", true, false}, {"a/x/c/d/e/f", true, false},
	}
	for round := range 2 { // the second round hits the resolution cache
		for _, c := range cases {
			p := vfs.MustParse(c.path)
			loc, fi, ok := m.ResolveKeptStat(ctx, p, c.follow)
			if ok != c.want {
				t.Fatalf("round %d: %s follow=%v: answered %v, want %v", round, c.path, c.follow, ok, c.want)
			}
			if !ok {
				continue
			}
			wloc, info, err := m.ResolveStat(ctx, p, c.follow)
			must(err)
			if loc != wloc {
				t.Errorf("%s: location %+v, ResolveStat's %+v", c.path, loc, wloc)
			}
			if fi.Name() != info.Name || fi.Size() != info.Size || fi.Mode() != info.Mode || !fi.ModTime().Equal(info.ModTime) {
				t.Errorf("%s: status %v, ResolveStat's %+v", c.path, fs.FormatFileInfo(fi), info)
			}
		}
	}
}

// TestReadRegular: the contents of a regular file (through a link too), and
// for anything else the type, for a file over the bound nil data, for a
// missing one not_found.
func TestReadRegular(t *testing.T) {
	ctx := context.Background()
	m := memory.New()
	f, err := m.OpenFile(ctx, vfs.MustParse("f"), os.O_WRONLY|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("hello"))
	f.Close()
	m.Mkdir(ctx, vfs.MustParse("d"), 0o755)
	m.Symlink(ctx, "f", vfs.MustParse("l"))
	for _, name := range []string{"f", "l"} {
		if data, typ, _, err := m.ReadRegular(ctx, vfs.MustParse(name), 5); string(data) != "hello" || typ != 0 || err != nil {
			t.Errorf("%s: %q %v %v", name, data, typ, err)
		}
	}
	if data, _, size, err := m.ReadRegular(ctx, vfs.MustParse("f"), 4); data != nil || size != 5 || err != nil {
		t.Errorf("over the bound: %q %d %v", data, size, err)
	}
	if data, typ, _, err := m.ReadRegular(ctx, vfs.MustParse("d"), 5); data != nil || typ != fs.ModeDir || err != nil {
		t.Errorf("directory: %q %v %v", data, typ, err)
	}
	if _, _, _, err := m.ReadRegular(ctx, vfs.MustParse("nope"), 5); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Errorf("missing: %v", err)
	}
}

// TestResolveKeptStatWithoutLinks: in a store that has never held a symlink,
// ResolveKeptStat answers deep paths without checking their spelling, and
// still answers exactly as ResolveStat, in the store and in a Sub of it; once
// a symlink exists, a path through it is declined again.
func TestResolveKeptStatWithoutLinks(t *testing.T) {
	ctx := context.Background()
	m, must := deepFS(t)
	sub, err := m.Sub(ctx, vfs.MustParse("a"))
	must(err)
	check := func(b vfs.Backend, path string, want bool) {
		t.Helper()
		ks := b.(interface {
			ResolveKeptStat(context.Context, vfs.Path, bool) (vfs.Location, fs.FileInfo, bool)
		})
		p := vfs.MustParse(path)
		for round := range 2 { // the second round hits the resolution cache
			loc, fi, ok := ks.ResolveKeptStat(ctx, p, true)
			if ok != want {
				t.Fatalf("round %d: %s: answered %v, want %v", round, path, ok, want)
			}
			if !ok {
				continue
			}
			wloc, info, err := b.(vfs.StatResolver).ResolveStat(ctx, p, true)
			must(err)
			if loc != wloc || fi.Name() != info.Name || fi.Mode() != info.Mode {
				t.Errorf("%s: %+v %v, ResolveStat's %+v %+v", path, loc, fs.FormatFileInfo(fi), wloc, info)
			}
		}
	}
	check(m, deep+"/leaf", true)
	check(m, deep, true)
	check(m, deep+"/nope", false)
	check(m, "a/x", false)
	check(m, "a/x/c/d/e/f", false)
	check(sub, "b/c/d/e/f/leaf", true)
	check(sub, "b/c/d/e/f/nope/x", false)
	if !m.LinkFree() || !sub.(*memory.FS).LinkFree() {
		t.Fatal("a store with no symlink says it holds one")
	}
	must(m.Symlink(ctx, "b", vfs.MustParse("a/lb")))
	check(m, deep+"/leaf", true)
	check(m, "a/lb/c/d/e/f/leaf", false)
	check(sub, "lb/c/d/e/f/leaf", false)
	must(m.Remove(ctx, vfs.MustParse("a/lb")))
	check(m, deep+"/leaf", true)
	if m.LinkFree() || sub.(*memory.FS).LinkFree() {
		t.Fatal("a store that has held a symlink says it never did")
	}
}

// deep is the directory path deepFS makes, beneath which the resolution cache
// answers.
const deep = "a/b/c/d/e/f"

// deepFS returns a memory FS holding deep's directories and the file
// deep/leaf, and a must for t.
func deepFS(t *testing.T) (*memory.FS, func(error)) {
	ctx := context.Background()
	m := memory.New()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	els := strings.Split(deep, "/")
	for i := range els {
		must(m.Mkdir(ctx, vfs.MustParse(strings.Join(els[:i+1], "/")), 0o755))
	}
	f, err := m.OpenFile(ctx, vfs.MustParse(deep+"/leaf"), os.O_WRONLY|os.O_CREATE, 0o640)
	must(err)
	_, err = f.Write([]byte("hello"))
	must(err)
	must(f.Close())
	return m, must
}

// TestHandleType: an open file or directory knows its type (vfs.TypedFile),
// the type its Stat reports, so a Dir opening it needs no status.
func TestHandleType(t *testing.T) {
	ctx := context.Background()
	m, must := deepFS(t)
	for _, p := range []string{deep + "/leaf", deep, "."} {
		f, err := m.OpenFile(ctx, vfs.MustParse(p), os.O_RDONLY, 0)
		must(err)
		info, err := f.Stat()
		must(err)
		if typ := f.(vfs.TypedFile).Type(); typ != info.Mode.Type() {
			t.Errorf("%s: Type %v, Stat's %v", p, typ, info.Mode.Type())
		}
		must(f.Close())
	}
}

// TestLocateKept: Locate's answer, kept between calls, follows a rename of
// an ancestor and a removal made since.
func TestLocateKept(t *testing.T) {
	ctx := context.Background()
	m, must := deepFS(t)
	sub, err := m.Sub(ctx, vfs.MustParse("a/b/c"))
	must(err)
	l := sub.(vfs.Locator)
	locate := func(want string) {
		t.Helper()
		for range 2 {
			p, err := l.Locate(ctx)
			must(err)
			if p.String() != want {
				t.Fatalf("Locate: %s, want %s", p, want)
			}
		}
	}
	locate("a/b/c")
	must(m.Rename(ctx, vfs.MustParse("a/b"), vfs.MustParse("a/x"), 0))
	locate("a/x/c")
	must(m.Mkdir(ctx, vfs.MustParse("a/x/c/new"), 0o755))
	locate("a/x/c")
	must(m.Remove(ctx, vfs.MustParse("a/x/c/new")))
	must(m.Remove(ctx, vfs.MustParse("a/x/c/d/e/f/leaf")))
	for _, d := range []string{"a/x/c/d/e/f", "a/x/c/d/e", "a/x/c/d", "a/x/c"} {
		must(m.Remove(ctx, vfs.MustParse(d)))
	}
	if _, err := l.Locate(ctx); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Fatalf("Locate of a removed directory: %v, want not_found", err)
	}
}
