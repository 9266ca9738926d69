package memory_test

import (
	"context"
	"os"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
)

// TestResolveStatMatchesResolveThenStat: the fused call answers what Resolve
// and then Stat (or Lstat) of the Resolved path answer, for paths through links,
// dangling links, trailing slashes, missing names and the root.
func TestResolveStatMatchesResolveThenStat(t *testing.T) {
	ctx := context.Background()
	m := memory.New()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.Mkdir(ctx, vfs.MustParse("d"), 0o755))
	must(m.Mkdir(ctx, vfs.MustParse("d/e"), 0o700))
	f, err := m.OpenFile(ctx, vfs.MustParse("d/f"), os.O_WRONLY|os.O_CREATE, 0o640)
	must(err)
	f.Write([]byte("hello"))
	f.Close()
	must(m.Symlink(ctx, "d/f", vfs.MustParse("lf")))
	must(m.Symlink(ctx, "d", vfs.MustParse("ld")))
	must(m.Symlink(ctx, "missing", vfs.MustParse("dangling")))
	must(m.Symlink(ctx, "../d/e", vfs.MustParse("d/up")))
	for _, name := range []string{".", "d", "d/", "d/f", "lf", "ld", "ld/", "ld/f", "ld/up", "ld/up/", "dangling", "nope", "d/f/", "nope/x", "d/f/x"} {
		p := vfs.MustParse(name)
		for _, follow := range []bool{true, false} {
			loc, info, err := m.ResolveStat(ctx, p, follow)
			wloc, werr := m.Resolve(ctx, p, follow)
			if vfs.CodeOf(err) != vfs.CodeOf(werr) {
				t.Errorf("%s follow=%v: error %v, Resolve's %v", name, follow, err, werr)
				continue
			}
			if err != nil {
				continue
			}
			if loc != wloc {
				t.Errorf("%s follow=%v: location %+v, Resolve's %+v", name, follow, loc, wloc)
			}
			if !loc.Found {
				continue
			}
			var want vfs.Info
			if follow || p.MustBeDir() {
				want, werr = m.Stat(ctx, loc.Path)
			} else {
				want, werr = m.Lstat(ctx, loc.Path)
			}
			if werr != nil {
				t.Errorf("%s follow=%v: stat of the location: %v", name, follow, werr)
				continue
			}
			if info.Mode != want.Mode || info.Size != want.Size || !info.ModTime.Equal(want.ModTime) {
				t.Errorf("%s follow=%v: %+v, want %+v", name, follow, info, want)
			}
		}
	}
}
