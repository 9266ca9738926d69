package overlay

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/internal/hostfd"
	"github.com/capfs/capfs/vfs"
)

// subFixture is an Overlay over a memory lower holding x at the root and
// directory sd (sd/e/, sd/f, sd/ll -> ../x) beneath it, with sd/up and
// sd/lu -> ../x made in the upper: the links name x, which exists in the
// overlay above sd.
func subFixture(t *testing.T) *Overlay {
	t.Helper()
	lower := memory.New()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(lower.Mkdir(bg, vfs.MustParse("sd"), 0o755))
	must(lower.Mkdir(bg, vfs.MustParse("sd/e"), 0o755))
	must(lower.Symlink(bg, "../x", vfs.MustParse("sd/ll")))
	for _, name := range []string{"x", "sd/f"} {
		f, err := lower.OpenFile(bg, vfs.MustParse(name), os.O_WRONLY|os.O_CREATE, 0o644)
		must(err)
		must(f.Close())
	}
	o := overlayOver(t)(lower).(*Overlay)
	f, err := o.OpenFile(bg, vfs.MustParse("sd/up"), os.O_WRONLY|os.O_CREATE, 0o644)
	must(err)
	must(f.Close())
	must(o.Symlink(bg, "../x", vfs.MustParse("sd/lu")))
	return o
}

// A link in a Sub to "../x" leads above the Sub's root: refused with
// path_outside_sandbox, whether the lower or the upper holds it, although
// x exists in the overlay (where the same link reads x); a Sub refuses to
// make one.
func TestSubLinkAboveRootRefused(t *testing.T) {
	o := subFixture(t)
	for _, l := range []string{"sd/ll", "sd/lu"} {
		if _, err := o.Stat(bg, vfs.MustParse(l)); err != nil {
			t.Fatalf("in the overlay, Stat(%s -> ../x) = %v; want x", l, err)
		}
	}
	sb, err := o.Sub(bg, vfs.MustParse("sd"))
	if err != nil {
		t.Fatalf("Sub(sd): %v", err)
	}
	for _, l := range []string{"ll", "lu"} {
		p := vfs.MustParse(l)
		_, err := sb.Stat(bg, p)
		wantCode(t, err, vfs.CodeOutside, "Sub(sd).Stat("+l+")")
		_, err = sb.OpenFile(bg, p, os.O_RDONLY, 0)
		wantCode(t, err, vfs.CodeOutside, "Sub(sd).OpenFile("+l+")")
		_, err = sb.OpenFile(bg, p, os.O_WRONLY|os.O_TRUNC, 0)
		wantCode(t, err, vfs.CodeOutside, "Sub(sd).OpenFile("+l+", O_WRONLY)")
		_, err = sb.Resolve(bg, p, true)
		wantCode(t, err, vfs.CodeOutside, "Sub(sd).Resolve("+l+")")
		if info, err := sb.Lstat(bg, p); err != nil || info.Mode&os.ModeSymlink == 0 {
			t.Errorf("Sub(sd).Lstat(%s) = %v, %v; want the link itself", l, info.Mode, err)
		}
	}
	err = sb.Symlink(bg, "../x", vfs.MustParse("mine"))
	wantCode(t, err, vfs.CodeOutside, "Sub(sd).Symlink(../x, mine)")
	if _, err := o.Lstat(bg, vfs.MustParse("sd/mine")); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Errorf("a refused Symlink made sd/mine: Lstat = %v", err)
	}
	nested, err := sb.Sub(bg, vfs.MustParse("e"))
	if err != nil {
		t.Fatalf("Sub(sd).Sub(e): %v", err)
	}
	err = nested.Symlink(bg, "../f", vfs.MustParse("g"))
	wantCode(t, err, vfs.CodeOutside, "Sub(sd).Sub(e).Symlink(../f, g)")
}

// Every error of a Sub, and of the files it opens, names the path as the
// Sub's caller named it, never the overlay-absolute one.
func TestSubErrorsNameCallersPath(t *testing.T) {
	o := subFixture(t)
	sb, err := o.Sub(bg, vfs.MustParse("sd"))
	if err != nil {
		t.Fatalf("Sub(sd): %v", err)
	}
	p := vfs.MustParse
	calls := []struct {
		what, path, dest string
		err              error
	}{
		{"Stat(nope)", "nope", "", second(sb.Stat(bg, p("nope")))},
		{"Lstat(nope/y)", "nope/y", "", second(sb.Lstat(bg, p("nope/y")))},
		{"ReadDir(f)", "f", "", second(sb.ReadDir(bg, p("f")))},
		{"OpenFile(f/x)", "f/x", "", second(sb.OpenFile(bg, p("f/x"), os.O_RDONLY, 0))},
		{"OpenFile(e, O_WRONLY)", "e", "", second(sb.OpenFile(bg, p("e"), os.O_WRONLY, 0))},
		{"OpenFile(f, O_EXCL)", "f", "", second(sb.OpenFile(bg, p("f"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644))},
		{"Mkdir(e)", "e", "", sb.Mkdir(bg, p("e"), 0o755)},
		{"Remove(.)", ".", "", sb.Remove(bg, vfs.Root)},
		{"Remove(nope)", "nope", "", sb.Remove(bg, p("nope"))},
		{"Rename(nope, z)", "nope", "z", sb.Rename(bg, p("nope"), p("z"), 0)},
		{"Rename(e, e/in)", "e", "e/in", sb.Rename(bg, p("e"), p("e/in"), 0)},
		{"Rename(f, up, noreplace)", "f", "up", sb.Rename(bg, p("f"), p("up"), vfs.RenameNoReplace)},
		{"Link(nope, z)", "nope", "z", sb.Link(bg, p("nope"), p("z"))},
		{"Link(f, up)", "f", "up", sb.Link(bg, p("f"), p("up"))},
		{"Readlink(f)", "f", "", second(sb.Readlink(bg, p("f")))},
		{"Chmod(nope)", "nope", "", sb.Chmod(bg, p("nope"), 0o600)},
		{"Chtimes(nope)", "nope", "", sb.Chtimes(bg, p("nope"), time.Time{}, time.Now())},
		{"Sub(f)", "f", "", second(sb.Sub(bg, p("f")))},
		{"Resolve(f/x)", "f/x", "", second(sb.Resolve(bg, p("f/x"), true))},
		{"ResolveStat(up/x)", "up/x", "", third(sb.(vfs.StatResolver).ResolveStat(bg, p("up/x"), true))},
		{"ResolveOpen(nope/x)", "nope/x", "", third(sb.(vfs.OpenResolver).ResolveOpen(bg, p("nope/x"), func(vfs.Location) error { return nil }))},
		{"Stat(nope, Resolved)", "nope", "", second(sb.Stat(bg, p("nope").Resolved()))},
	}
	for _, f := range []string{"f", "up"} { // a lower file, an upper one
		h, err := sb.OpenFile(bg, p(f), os.O_RDONLY, 0)
		if err != nil {
			t.Fatalf("Sub(sd).OpenFile(%s): %v", f, err)
		}
		_, werr := h.Write([]byte("w"))
		calls = append(calls, struct {
			what, path, dest string
			err              error
		}{"Write to read-only " + f, f, "", werr})
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		_, rerr := h.Read(make([]byte, 1))
		calls = append(calls, struct {
			what, path, dest string
			err              error
		}{"Read after Close of " + f, f, "", rerr})
	}
	for _, c := range calls {
		e, ok := c.err.(*vfs.Error)
		switch {
		case !ok:
			t.Errorf("Sub(sd).%s = %T %v; want a *vfs.Error", c.what, c.err, c.err)
		case e.Path != c.path || e.Dest != c.dest:
			t.Errorf("Sub(sd).%s = %v: Path %q Dest %q; want the caller's %q %q", c.what, e, e.Path, e.Dest, c.path, c.dest)
		case strings.Contains(e.Error(), "sd/") || strings.HasPrefix(e.Path, "sd"):
			t.Errorf("Sub(sd).%s = %v: names the overlay-absolute path", c.what, e)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func third[T, U any](_ T, _ U, err error) error { return err }

func wantCode(t *testing.T, err error, code vfs.Code, what string) {
	t.Helper()
	if vfs.CodeOf(err) != code {
		t.Errorf("%s = %v; want %s", what, err, code)
	}
	var e *vfs.Error
	if errors.As(err, &e) && strings.HasPrefix(e.Path, "sd") {
		t.Errorf("%s = %v: names the overlay-absolute path", what, err)
	}
}

// A file opened through a Sub keeps the layer file's host descriptor: an
// upper file answers (for a mount's passthrough), a lower one does not.
func TestSubFileForwardsHostFd(t *testing.T) {
	o := subFixture(t)
	sb, err := o.Sub(bg, vfs.MustParse("sd"))
	if err != nil {
		t.Fatalf("Sub(sd): %v", err)
	}
	for _, c := range []struct {
		name string
		want bool
	}{{"up", true}, {"f", false}} {
		h, err := sb.OpenFile(bg, vfs.MustParse(c.name), os.O_RDONLY, 0)
		if err != nil {
			t.Fatalf("Sub(sd).OpenFile(%s): %v", c.name, err)
		}
		if _, ok := hostfd.Of(h); ok != c.want {
			t.Errorf("hostfd.Of(Sub(sd) file %s) = %v; want %v", c.name, ok, c.want)
		}
		if _, ok := h.(vfs.TypedFile); !ok {
			t.Errorf("Sub(sd) file %s (%T) drops vfs.TypedFile", c.name, h)
		}
		h.Close()
	}
}

// A Sub's root replaced by a symlink after the Sub (renamed away, a link to
// another directory put in its place): the Sub's lookups fail with conflict
// rather than follow the link, so a status beneath the Sub never describes
// an entry of the link's target (fails before the upper was asked on
// Resolved paths: Stat answered secret/key's status).
func TestSubRootSwappedForLink(t *testing.T) {
	o := subFixture(t)
	sb, err := o.Sub(bg, vfs.MustParse("sd"))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Mkdir(bg, vfs.MustParse("secret"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := o.OpenFile(bg, vfs.MustParse("secret/key"), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := o.Rename(bg, vfs.MustParse("sd"), vfs.MustParse("sd2"), 0); err != nil {
		t.Fatal(err)
	}
	if err := o.Symlink(bg, "secret", vfs.MustParse("sd")); err != nil {
		t.Fatal(err)
	}
	for _, follow := range []bool{false, true} {
		loc, err := sb.Resolve(bg, vfs.MustParse("key"), follow)
		if err == nil && loc.Found {
			t.Errorf("Resolve(key, %v) beneath the swapped root found %+v", follow, loc)
		}
		wantCode(t, err, vfs.CodeConflict, "Resolve(key) beneath the swapped root")
	}
	_, err = sb.Stat(bg, vfs.MustParse("key"))
	wantCode(t, err, vfs.CodeConflict, "Stat(key) beneath the swapped root")
	_, err = sb.Lstat(bg, vfs.MustParse("key"))
	wantCode(t, err, vfs.CodeConflict, "Lstat(key) beneath the swapped root")
}
