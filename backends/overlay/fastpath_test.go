package overlay

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// resolveCounter counts the lower's one-call resolutions.
type resolveCounter struct {
	vfs.Backend
	n atomic.Int64
}

func (r *resolveCounter) ResolveStat(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, vfs.Info, error) {
	r.n.Add(1)
	return vfs.ResolveStat(ctx, r.Backend, p, follow)
}

func (r *resolveCounter) ReadDirInfo(ctx context.Context, p vfs.Path) ([]vfs.DirInfo, error) {
	return vfs.ReadDirInfo(ctx, r.Backend, p)
}

// fastOverlay is an Overlay over a work Dir (default policy) of a physical
// tree with a symlink l -> d, and changes in the upper: d/f rewritten, d/sub/g
// removed, new/n created.
func fastOverlay(t *testing.T, opts ...physical.Option) (*Overlay, *resolveCounter) {
	t.Helper()
	trustStat(t)
	root := t.TempDir()
	for _, name := range []string{"d/f", "d/sub/g", "d/sub/h", "top/x", "top/deep/y"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte("lower "+name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("d", filepath.Join(root, "l")); err != nil {
		t.Fatal(err)
	}
	pb, err := physical.New(root, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pb.Close() })
	work, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
	lower := &resolveCounter{Backend: work.Backend()}
	ov, err := NewOverlay(lower, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ov.Close() })
	f, err := ov.OpenFile(bg, vp("d/f"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("the upper's d/f, longer than the lower's")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := ov.Remove(bg, vp("d/sub/g")); err != nil {
		t.Fatal(err)
	}
	if err := ov.Mkdir(bg, vp("new"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ov.Symlink(bg, "x", vp("new/n")); err != nil {
		t.Fatal(err)
	}
	return ov, lower
}

// TestOverlayResolveOneCall: a path whose every component only the lower
// can hold is resolved with one lower call, and every path resolves exactly
// as one component at a time does, including through a lower symlink into a
// directory the upper changed (l/f is the upper's d/f) or whited out (l/sub/g
// is gone): the one-call answer is refused where the lower's resolution
// followed a link.
func TestOverlayResolveOneCall(t *testing.T) {
	for _, r := range []struct {
		name string
		opts []physical.Option
	}{{"openat2", nil}, {"portable", []physical.Option{physical.WithResolver(physical.ResolverPortable)}}} {
		t.Run(r.name, func(t *testing.T) { testOverlayResolveOneCall(t, r.opts...) })
	}
}

func testOverlayResolveOneCall(t *testing.T, opts ...physical.Option) {
	ov, lower := fastOverlay(t, opts...)
	paths := []string{"top/x", "top/deep/y", "top/deep", "top/missing", "missing/x", "d/f", "l/f", "l/sub/g", "l/sub/h", "l", "d/sub/g", "new/n", "top/x/under"}
	for _, s := range paths {
		for _, follow := range []bool{false, true} {
			_, wantLoc, wantErr := vfs.ResolveLocation[ovNode](bg, ovTree{o: ov, ctx: bg}, ovNode{p: vfs.Root, root: true}, vp(s), follow, "resolve")
			var wantInfo vfs.Info
			if wantErr == nil && wantLoc.Found {
				wantInfo, wantErr = ov.Lstat(bg, wantLoc.Path.Unresolved())
			}
			loc, info, err := ov.ResolveStat(bg, vp(s), follow)
			if vfs.CodeOf(err) != vfs.CodeOf(wantErr) || loc.Path.Raw() != wantLoc.Path.Raw() || loc.Found != wantLoc.Found || loc.Type != wantLoc.Type {
				t.Errorf("%s (follow %v): %+v, %v; one component at a time: %+v, %v", s, follow, loc, err, wantLoc, wantErr)
				continue
			}
			if loc.Found && (info.Size != wantInfo.Size || info.Mode != wantInfo.Mode || info.ID != wantInfo.ID) {
				t.Errorf("%s (follow %v): status %+v, want %+v", s, follow, info, wantInfo)
			}
		}
	}
	if _, info, err := ov.ResolveStat(bg, vp("l/f"), true); err != nil || info.Size != int64(len("the upper's d/f, longer than the lower's")) {
		t.Errorf("l/f: %+v, %v; want the upper's d/f", info, err)
	}
	before := lower.n.Load()
	if _, _, err := ov.ResolveStat(bg, vp("top/deep/y"), false); err != nil {
		t.Fatal(err)
	}
	if got := lower.n.Load() - before; got != 1 {
		t.Errorf("top/deep/y took %d one-call lower resolutions, want 1", got)
	}
	// An absent name in a lower directory is answered by the same one call
	// (a compiler's or git's probes for files that are not there).
	before = lower.n.Load()
	if loc, _, err := ov.ResolveStat(bg, vp("top/deep/nothing"), false); err != nil || loc.Found || loc.Path.Raw() != "top/deep/nothing" {
		t.Fatalf("top/deep/nothing: %+v, %v", loc, err)
	}
	if got := lower.n.Load() - before; got != 1 {
		t.Errorf("top/deep/nothing took %d one-call lower resolutions, want 1", got)
	}
	if s := ov.sightAt(vp("top/deep/nothing")); s != absentSight {
		t.Errorf("top/deep/nothing's sight: %v, want the absent one", s)
	}
}

// TestOverlayReadDirInfo: each directory's listing with status names what
// ReadDir names, each with what Lstat reports (layer, size, identity).
func TestOverlayReadDirInfo(t *testing.T) {
	ov, _ := fastOverlay(t)
	for _, s := range []string{"", "d", "d/sub", "top", "new"} {
		p := vfs.Root
		if s != "" {
			p = vp(s)
		}
		ents, err := ov.ReadDir(bg, p)
		if err != nil {
			t.Fatal(err)
		}
		infos, err := ov.ReadDirInfo(bg, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != len(ents) {
			t.Fatalf("%q: %d entries with status, ReadDir lists %d", s, len(infos), len(ents))
		}
		for i, e := range ents {
			got := infos[i]
			c, _ := p.Child(e.Name)
			want, werr := ov.Lstat(bg, c)
			if got.Name != e.Name || (got.Err == nil) != (werr == nil) {
				t.Errorf("%s: %+v, Lstat %v", c, got, werr)
				continue
			}
			if werr == nil && (got.Mode != want.Mode || got.Size != want.Size || got.ID != want.ID || got.HasOwner) {
				t.Errorf("%s: listed %+v, Lstat %+v", c, got.Info, want)
			}
		}
	}
}

// TestOverlayRemoveAfterRemake: a removal takes its lookup from the
// resolution that decided the previous call only while only the lower can
// hold the path: a directory removed through the layer's Dir, then made
// again in the upper and filled, right after, is not empty (the earlier
// resolution said "a lower file"; using it removed the new directory with
// what it held).
func TestOverlayRemoveAfterRemake(t *testing.T) {
	ov, _ := fastOverlay(t)
	layer, _ := dir.New(ov, dir.WithPolicy(policy.Defaults()))
	view := layer.Backend()
	if err := view.Remove(bg, vp("top/x")); err != nil {
		t.Fatal(err)
	}
	if err := ov.Mkdir(bg, vp("top/x"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := ov.OpenFile(bg, vp("top/x/new"), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := ov.Remove(bg, vp("top/x")); vfs.CodeOf(err) != vfs.CodeNotEmpty {
		t.Fatalf("removing the remade, filled directory: %v, want not_empty", err)
	}
	if _, err := ov.Lstat(bg, vp("top/x/new")); err != nil {
		t.Fatalf("top/x/new after the refused removal: %v", err)
	}
}
