package memory

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// TestCacheMatchesResolve mutates a deep tree at random and checks, after every
// mutation, that memoized lookups agree with a fresh vfs.Resolve for a set of deep
// paths, from the root and from a Sub.
func TestCacheMatchesResolve(t *testing.T) {
	m := New()
	r := rand.New(rand.NewPCG(1, 2))
	seg := []string{"a", "b", "c"}
	randPath := func(depth int) vfs.Path {
		s := seg[r.IntN(len(seg))]
		for range depth - 1 {
			s += "/" + seg[r.IntN(len(seg))]
		}
		return P(s)
	}
	// A full ternary tree four levels deep, with a file at every leaf.
	var build func(prefix string, depth int)
	build = func(prefix string, depth int) {
		for _, s := range seg {
			p := s
			if prefix != "" {
				p = prefix + "/" + s
			}
			if depth == 4 {
				writeFile(t, m, p, p)
				continue
			}
			mkdirs(t, m, p)
			build(p, depth+1)
		}
	}
	build("", 1)
	sb, err := m.Sub(bg, P("a"))
	must(t, err)
	sub := sb.(*FS)

	check := func(f *FS, p vfs.Path, follow bool) {
		t.Helper()
		f.st.mu.RLock()
		defer f.st.mu.RUnlock()
		for range 2 { // the second lookup is a cache hit if the first stored
			got, gerr := f.lookup(bg, p, follow, "stat")
			want, werr := vfs.Resolve[*node](bg, tree{}, f.root, p, follow, "stat")
			if vfs.CodeOf(gerr) != vfs.CodeOf(werr) || got != want {
				t.Fatalf("lookup(%s, %v) = %+v, %v; resolve = %+v, %v", p, follow, got, gerr, want, werr)
			}
		}
	}
	hits := 0
	for i := range 400 {
		p, q := randPath(1+r.IntN(5)), randPath(1+r.IntN(5))
		// Look the paths up before the mutation, so stale entries would exist.
		probe := []vfs.Path{p, q}
		for range 6 {
			probe = append(probe, randPath(4+r.IntN(2)))
		}
		for _, dp := range probe {
			check(m, dp, i%2 == 0)
			check(sub, dp, i%2 == 1)
		}
		switch r.IntN(6) {
		case 0:
			m.Rename(bg, p, q, 0)
		case 1:
			m.Rename(bg, p, q, vfs.RenameExchange)
		case 2:
			m.Remove(bg, p)
		case 3:
			m.Mkdir(bg, p, 0o755)
		case 4:
			m.Symlink(bg, "../b", p)
		case 5:
			if f, err := m.OpenFile(bg, p, os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
				f.Close()
			}
		}
		for _, dp := range probe {
			check(m, dp, i%2 == 0)
			check(sub, dp, i%2 == 1)
			if _, err := m.Stat(bg, dp); err == nil && dp.Depth() >= cacheMinDepth {
				hits++
			}
		}
	}
	if hits == 0 {
		t.Fatal("no deep path ever resolved: the test exercised nothing")
	}
}

// TestCacheInvalidatedByRename checks the observable effect: a deep path cached
// before a rename resolves to the new object after it.
func TestCacheInvalidatedByRename(t *testing.T) {
	m := New()
	mkdirs(t, m, "a", "a/b", "a/b/c", "a/b/c/d", "x", "x/b", "x/b/c", "x/b/c/d")
	writeFile(t, m, "a/b/c/d/f", "old")
	writeFile(t, m, "x/b/c/d/f", "new!")
	for range 3 {
		if i, err := m.Stat(bg, P("a/b/c/d/f")); err != nil || i.Size != 3 {
			t.Fatalf("before: %+v %v", i, err)
		}
	}
	must(t, m.Rename(bg, P("x"), P("a"), vfs.RenameExchange))
	if i, err := m.Stat(bg, P("a/b/c/d/f")); err != nil || i.Size != 4 {
		t.Fatalf("after exchange: %+v %v", i, err)
	}
	must(t, m.Remove(bg, P("a/b/c/d/f")))
	_, err := m.Stat(bg, P("a/b/c/d/f"))
	wantCode(t, err, vfs.CodeNotFound)
}

// TestDeep checks deep against Path.Depth.
func TestDeep(t *testing.T) {
	for _, s := range []string{".", "a", "a/b", "a/b/c", "a/b/c/d", "a/b/c/d/e", "aa/bb/cc/dd/ee/ff"} {
		p := P(s)
		if got, want := deep(p.Raw()), p.Depth() >= cacheMinDepth; got != want {
			t.Errorf("deep(%q) = %v, want %v", p.Raw(), got, want)
		}
	}
}
