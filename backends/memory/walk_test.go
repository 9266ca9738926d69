package memory

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// TestWalkMatchesResolve builds random trees of directories, files and symlinks
// (relative, climbing, dangling, looping) and checks that whenever walk answers,
// its answer is exactly vfs.Resolve's, for both follow modes, with and without a
// trailing-slash mark, from the root and from a Sub.
func TestWalkMatchesResolve(t *testing.T) {
	segs := []string{"a", "b", "c", "l"}
	targets := []string{"a", "../a", "b/c", "..", "../../x", "l", "missing", "a/", ".", "c/../a"}
	var answered, fellBack int
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		m := New()
		randPath := func(maxDepth int) string {
			s := segs[r.IntN(len(segs))]
			for range r.IntN(maxDepth) {
				s += "/" + segs[r.IntN(len(segs))]
			}
			return s
		}
		for range 60 {
			p := P(randPath(4))
			switch r.IntN(4) {
			case 0, 1:
				m.Mkdir(bg, p, 0o755)
			case 2:
				if f, err := m.OpenFile(bg, p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
					f.Close()
				}
			case 3:
				m.Symlink(bg, targets[r.IntN(len(targets))], p)
			}
		}
		roots := []*FS{m}
		if sb, err := m.Sub(bg, P("a")); err == nil {
			roots = append(roots, sb.(*FS))
		}
		for range 400 {
			s := randPath(6)
			if r.IntN(3) == 0 {
				s += "/"
			}
			if r.IntN(8) == 0 {
				s = "."
			}
			p := P(s)
			for _, f := range roots {
				for _, follow := range []bool{false, true} {
					got, ok := walk(f.root, p, follow)
					want, err := vfs.Resolve[*node](bg, tree{}, f.root, p, follow, "stat")
					if !ok {
						fellBack++
						continue
					}
					answered++
					if err != nil || got != want {
						t.Fatalf("seed %d: walk(%q, follow=%v) = %+v; Resolve = %+v, %v", seed, s, follow, got, want, err)
					}
				}
			}
		}
	}
	if answered < 1000 || fellBack < 1000 {
		t.Fatalf("walk answered %d and fell back %d times: the trees exercise too little", answered, fellBack)
	}
}

// TestWalkDepthLimit checks that paths deeper than walkMax fall back to
// vfs.Resolve, and that both agree on the shallower ones.
func TestWalkDepthLimit(t *testing.T) {
	m := New()
	var parts []string
	for range walkMax + 2 {
		parts = append(parts, "d")
		must(t, m.Mkdir(bg, P(strings.Join(parts, "/")), 0o755))
	}
	for depth := walkMax - 1; depth <= walkMax+2; depth++ {
		p := P(strings.Join(parts[:depth], "/"))
		got, ok := walk(m.root, p, true)
		if ok != (depth <= walkMax) {
			t.Fatalf("depth %d: walk answered %v", depth, ok)
		}
		want, err := vfs.Resolve[*node](bg, tree{}, m.root, p, true, "stat")
		must(t, err)
		if ok && got != want {
			t.Fatalf("depth %d: walk = %+v, Resolve = %+v", depth, got, want)
		}
		if info, err := m.Stat(bg, p); err != nil || !info.Mode.IsDir() {
			t.Fatalf("depth %d: stat = %+v, %v", depth, info, err)
		}
	}
}
