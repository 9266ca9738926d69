package overlay

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// TestOverlayResolveMatchesShared: the Overlay's own resolution (which keeps
// what each lookup found) answers as the shared resolver over its Lstat and
// Readlink, then Stat, Lstat or OpenFile of the result, would: across lower
// and upper entries, a whiteout, symlinks (final, on the way, to a
// directory, dangling, a loop) and trailing slashes.
func TestOverlayResolveMatchesShared(t *testing.T) {
	mem := memory.New()
	seed, _ := dir.New(mem)
	for name, body := range map[string]string{"low.txt": "low", "d/f.txt": "df", "d/e/g.txt": "deg", "gone.txt": "gone", "edit.txt": "old"} {
		_ = seed.MkdirAll(bg, filepath.Dir(name))
		if err := seed.WriteFile(bg, name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"ld": "d", "lf": "d/f.txt", "dangling": "nowhere", "loop1": "loop2", "loop2": "loop1", "d/up": "../low.txt"} {
		if err := seed.Symlink(bg, target, link); err != nil {
			t.Fatal(err)
		}
	}
	ov, err := NewOverlay(seed.Backend(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ov.Close() })
	ctx := bg
	write := func(name, body string) {
		t.Helper()
		f, err := ov.OpenFile(ctx, vfs.MustParse(name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(body))
		f.Close()
	}
	write("edit.txt", "new")
	write("d/new.txt", "added")
	if err := ov.Remove(ctx, vfs.MustParse("gone.txt")); err != nil {
		t.Fatal(err)
	}
	if err := ov.Symlink(ctx, "d/new.txt", vfs.MustParse("lnew")); err != nil {
		t.Fatal(err)
	}
	paths := []string{".", "low.txt", "edit.txt", "gone.txt", "d", "d/", "d/f.txt", "d/e/g.txt", "d/new.txt", "ld", "ld/", "ld/f.txt",
		"ld/e/g.txt", "lf", "lf/", "dangling", "loop1", "d/up", "lnew", "missing", "d/missing", "low.txt/x", "ld/new.txt"}
	for _, s := range paths {
		p := vfs.MustParse(s)
		for _, follow := range []bool{false, true} {
			want, werr := vfs.ResolveBackend(ctx, ov, p, follow, "resolve")
			got, gerr := ov.Resolve(ctx, p, follow)
			if vfs.CodeOf(gerr) != vfs.CodeOf(werr) || got != want {
				t.Errorf("Resolve(%q, %v) = %+v, %v; shared resolver %+v, %v", s, follow, got, gerr, want, werr)
			}
			loc, info, serr := ov.ResolveStat(ctx, p, follow)
			if vfs.CodeOf(serr) != vfs.CodeOf(werr) || loc != want {
				t.Errorf("ResolveStat(%q, %v): %+v, %v; want %+v, %v", s, follow, loc, serr, want, werr)
			}
			if werr == nil && want.Found {
				var ref vfs.Info
				var rerr error
				if follow || p.MustBeDir() {
					ref, rerr = ov.Stat(ctx, want.Path)
				} else {
					ref, rerr = ov.Lstat(ctx, want.Path)
				}
				if rerr != nil || info.Mode != ref.Mode || info.Size != ref.Size || info.ID != ref.ID || info.Name != ref.Name {
					t.Errorf("ResolveStat(%q, %v) info %v %d %d %q; Stat of the location %v %d %d %q (%v)", s, follow,
						info.Mode, info.Size, info.ID, info.Name, ref.Mode, ref.Size, ref.ID, ref.Name, rerr)
				}
			}
		}
		// ResolveOpen against the fallback (Resolve, decide, OpenFile).
		var decided vfs.Location
		f, loc, oerr := ov.ResolveOpen(ctx, p, func(l vfs.Location) error { decided = l; return nil })
		want, werr := vfs.ResolveBackend(ctx, ov, p, true, "resolve")
		if werr != nil {
			if vfs.CodeOf(oerr) != vfs.CodeOf(werr) {
				t.Errorf("ResolveOpen(%q): %v, want %v", s, oerr, werr)
			}
			continue
		}
		if decided != want || loc != want {
			t.Errorf("ResolveOpen(%q) decided on %+v, returned %+v; want %+v", s, decided, loc, want)
		}
		rf, rerr := ov.OpenFile(ctx, want.Path, os.O_RDONLY, 0)
		if vfs.CodeOf(oerr) != vfs.CodeOf(rerr) {
			t.Errorf("ResolveOpen(%q): %v; OpenFile of the location: %v", s, oerr, rerr)
		}
		if oerr == nil && rerr == nil {
			fi, _ := f.Stat()
			ri, _ := rf.Stat()
			if !fi.Mode.IsDir() {
				a, _ := io.ReadAll(f)
				b, _ := io.ReadAll(rf)
				if string(a) != string(b) {
					t.Errorf("ResolveOpen(%q) read %q; OpenFile %q", s, a, b)
				}
			}
			if fi.ID != ri.ID || fi.Mode != ri.Mode {
				t.Errorf("ResolveOpen(%q) opened %v id %d; OpenFile %v id %d", s, fi.Mode, fi.ID, ri.Mode, ri.ID)
			}
		}
		if f != nil {
			f.Close()
		}
		if rf != nil {
			rf.Close()
		}
	}
	// A decision's refusal opens nothing and is returned unchanged.
	refusal := vfs.NewError(vfs.CodePermission, "open", vfs.MustParse("low.txt"), "no")
	if f, _, err := ov.ResolveOpen(ctx, vfs.MustParse("low.txt"), func(vfs.Location) error { return refusal }); f != nil || err != refusal {
		t.Errorf("refused ResolveOpen: %v, %v", f, err)
	}
}
