package vfs_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// node is one object of the in-test tree: a directory, file or symlink.
type node struct {
	name   string
	typ    fs.FileMode
	kids   map[string]*node
	target string
}

// tree is a map-based vfs.Tree that counts lookups, to check bounded work.
type tree struct {
	lookups   int
	lookupErr error // returned by every Lookup when set
}

func (t *tree) Lookup(dir *node, name string) (*node, bool, error) {
	t.lookups++
	if t.lookupErr != nil {
		return nil, false, t.lookupErr
	}
	c, ok := dir.kids[name]
	return c, ok, nil
}
func (t *tree) Type(n *node) fs.FileMode { return n.typ }
func (t *tree) Target(n *node) (string, error) {
	if n.typ&fs.ModeSymlink == 0 {
		return "", syscall.EINVAL
	}
	return n.target, nil
}

func newDir(name string) *node { return &node{name: name, typ: fs.ModeDir, kids: map[string]*node{}} }

// build makes a tree from a spec: "d/" is a directory, "l -> t" a symlink, anything
// else a file. Parents must come first.
func build(t *testing.T, specs ...string) *node {
	t.Helper()
	root := newDir(".")
	for _, s := range specs {
		name, target, isLink := strings.Cut(s, " -> ")
		isDir := !isLink && strings.HasSuffix(name, "/")
		name = strings.TrimSuffix(name, "/")
		parent := root
		elems := strings.Split(name, "/")
		for _, e := range elems[:len(elems)-1] {
			parent = parent.kids[e]
			if parent == nil || !parent.typ.IsDir() {
				t.Fatalf("build %q: no parent directory", s)
			}
		}
		base := elems[len(elems)-1]
		switch {
		case isLink:
			parent.kids[base] = &node{name: base, typ: fs.ModeSymlink, target: target}
		case isDir:
			parent.kids[base] = newDir(base)
		default:
			parent.kids[base] = &node{name: base}
		}
	}
	return root
}

func resolve(root *node, p string, follow bool) (vfs.Resolution[*node], error) {
	return vfs.Resolve[*node](context.Background(), &tree{}, root, vfs.MustParse(p), follow, "op")
}

// describe renders a resolution as "parent/name" (found) or "parent/name?" (missing).
func describe(r vfs.Resolution[*node]) string {
	s := r.Parent.name + "/" + r.Name
	if !r.Found {
		s += "?"
	} else if r.Node.name != r.Name && r.Name != "" {
		s += "=" + r.Node.name
	}
	if r.Followed {
		s += " (followed)"
	}
	return s
}

func TestResolve(t *testing.T) {
	root := build(t,
		"f", "d/", "d/g", "d/e/", "d/e/h",
		"lf -> f", "ld -> d", "ldslash -> d/", "lfslash -> f/",
		"absl -> /outside", "rell -> ../outside", "up -> ..", "dot -> .",
		"d/up -> ..", "d/upup -> ../..", "d/d -> ..",
		"dangle -> nowhere", "dangle-out -> ../outside/new", "dangle-deep -> d/missing/x",
		"empty -> ",
		"b/", "b/c/", "b/t", "a -> b/c", "phys -> a/../t",
		"self -> self", "p1 -> p2", "p2 -> p1", "loopdir -> loopdir/x",
		"e1 -> e2/x", "e2 -> e1",
		"nul -> a\x00b",
	)
	tests := []struct {
		path   string
		follow bool
		want   string   // describe() of the result
		code   vfs.Code // or the error code
	}{
		{path: ".", want: "./"},
		{path: "f", want: "./f"},
		{path: "d/e/h", want: "e/h"},
		{path: "d/e", want: "d/e"},
		{path: "missing", want: "./missing?"},
		{path: "d/missing", want: "d/missing?"},
		{path: "missing/x", code: vfs.CodeNotFound},
		{path: "f/x", code: vfs.CodeNotDir},
		// A trailing slash demands a directory (THREATS 10, 18).
		{path: "d/", want: "./d"},
		{path: "f/", code: vfs.CodeNotDir},
		{path: "f/.", code: vfs.CodeNotDir},
		{path: "lf/", code: vfs.CodeNotDir},
		{path: "lf/", follow: true, code: vfs.CodeNotDir},
		{path: "ld/", want: "./d (followed)"},
		{path: "absl/", code: vfs.CodeOutside},
		{path: "rell/", code: vfs.CodeOutside},
		{path: "missing/", want: "./missing?"},
		// A target with a trailing slash also demands a directory.
		{path: "ldslash", follow: true, want: "./d (followed)"},
		{path: "lfslash", follow: true, code: vfs.CodeNotDir},
		{path: "lfslash", want: "./lfslash"},
		// The final link is followed only when asked.
		{path: "lf", want: "./lf"},
		{path: "lf", follow: true, want: "./f (followed)"},
		{path: "ld/g", want: "d/g"},
		{path: "ld", follow: true, want: "./d (followed)"},
		// Escapes (THREATS 15-17, 50).
		{path: "absl", follow: true, code: vfs.CodeOutside},
		{path: "absl/secret", code: vfs.CodeOutside},
		{path: "rell", follow: true, code: vfs.CodeOutside},
		{path: "rell/secret", code: vfs.CodeOutside},
		{path: "absl", want: "./absl"},
		{path: "up/x", code: vfs.CodeOutside},
		{path: "up", follow: true, code: vfs.CodeOutside},
		{path: "d/upup", follow: true, code: vfs.CodeOutside},
		{path: "dangle-out", follow: true, code: vfs.CodeOutside},
		// ".." inside targets is physical and stays beneath the root (24, 25).
		{path: "d/up/f", want: "./f"},
		{path: "d/up", follow: true, want: "./ (followed)"},
		{path: "dot/f", want: "./f"},
		{path: "d/d/d/g", want: "d/g"},
		{path: "d/d/new", want: "./new?"},
		{path: "phys", follow: true, want: "b/t (followed)"},
		{path: "a/../t", want: "./t?"}, // the guest path itself is lexical
		// Dangling links (22, 23).
		{path: "dangle", want: "./dangle"},
		{path: "dangle", follow: true, want: "./nowhere? (followed)"},
		{path: "dangle-deep", follow: true, code: vfs.CodeNotFound},
		{path: "dangle/x", code: vfs.CodeNotFound},
		{path: "empty", follow: true, code: vfs.CodeNotFound},
		// Loops (20).
		{path: "self", want: "./self"},
		{path: "self", follow: true, code: vfs.CodeTooManyLinks},
		{path: "self/", code: vfs.CodeTooManyLinks},
		{path: "p1", follow: true, code: vfs.CodeTooManyLinks},
		{path: "p1/x", code: vfs.CodeTooManyLinks},
		{path: "loopdir", follow: true, code: vfs.CodeTooManyLinks},
		{path: "e1", follow: true, code: vfs.CodeTooManyLinks},
		{path: "nul", follow: true, code: vfs.CodeInvalidPath},
	}
	for _, tt := range tests {
		r, err := resolve(root, tt.path, tt.follow)
		if tt.code != "" {
			var e *vfs.Error
			if !errors.As(err, &e) || e.Code != tt.code || e.Op != "op" || e.Path != vfs.MustParse(tt.path).String() {
				t.Errorf("Resolve(%q, follow=%v) = %s, %v; want error %s", tt.path, tt.follow, describeOK(r, err), err, tt.code)
			}
			continue
		}
		if err != nil || describe(r) != tt.want {
			t.Errorf("Resolve(%q, follow=%v) = %s, %v; want %s", tt.path, tt.follow, describeOK(r, err), err, tt.want)
		}
	}
}

func describeOK(r vfs.Resolution[*node], err error) string {
	if err != nil || r.Parent == nil {
		return "<none>"
	}
	return describe(r)
}

// TestResolveChains checks 5-hop chains with and without an escaping hop (THREATS 19)
// and the MaxSymlinks limit (21).
func TestResolveChains(t *testing.T) {
	for bad := 0; bad <= 5; bad++ {
		// c1/h1 -> ../c2/h2 -> ... -> ../c5/h5 -> ../t, hop "bad" replaced by an escape.
		specs := []string{"t"}
		for i := 1; i <= 5; i++ {
			target := fmt.Sprintf("../c%d/h%d", i+1, i+1)
			if i == 5 {
				target = "../t"
			}
			if i == bad {
				target = "../../outside"
			}
			specs = append(specs, fmt.Sprintf("c%d/", i), fmt.Sprintf("c%d/h%d -> %s", i, i, target))
		}
		root := build(t, specs...)
		r, err := resolve(root, "c1/h1", true)
		if bad == 0 {
			if err != nil || describe(r) != "./t (followed)" {
				t.Errorf("all-inside chain: %s, %v", describeOK(r, err), err)
			}
		} else if vfs.CodeOf(err) != vfs.CodeOutside {
			t.Errorf("chain escaping at hop %d: %s, %v; want path_outside_sandbox", bad, describeOK(r, err), err)
		}
	}

	chain := func(n int) *node {
		specs := []string{"t"}
		for i := 1; i <= n; i++ {
			target := fmt.Sprintf("l%d", i+1)
			if i == n {
				target = "t"
			}
			specs = append(specs, fmt.Sprintf("l%d -> %s", i, target))
		}
		return build(t, specs...)
	}
	if r, err := resolve(chain(vfs.MaxSymlinks), "l1", true); err != nil || describe(r) != "./t (followed)" {
		t.Errorf("a chain of MaxSymlinks links must resolve: %s, %v", describeOK(r, err), err)
	}
	if _, err := resolve(chain(vfs.MaxSymlinks+1), "l1", true); vfs.CodeOf(err) != vfs.CodeTooManyLinks {
		t.Errorf("a chain of MaxSymlinks+1 links: %v; want too_many_links", err)
	}
	// Links as intermediate components count too: "s -> ." used MaxSymlinks times.
	root := build(t, "s -> .", "f")
	ok := strings.Repeat("s/", vfs.MaxSymlinks) + "f"
	if r, err := resolve(root, ok, false); err != nil || describe(r) != "./f" {
		t.Errorf("%d intermediate links: %s, %v", vfs.MaxSymlinks, describeOK(r, err), err)
	}
	if _, err := resolve(root, "s/"+ok, false); vfs.CodeOf(err) != vfs.CodeTooManyLinks {
		t.Errorf("%d intermediate links: %v; want too_many_links", vfs.MaxSymlinks+1, err)
	}
}

// TestResolveBoundedWork checks that loops and long paths cost bounded lookups.
func TestResolveBoundedWork(t *testing.T) {
	root := build(t, "a -> b", "b -> a", "x -> x/x/x/x")
	for _, p := range []string{"a", "x"} {
		tr := &tree{}
		_, err := vfs.Resolve[*node](context.Background(), tr, root, vfs.MustParse(p), true, "op")
		if vfs.CodeOf(err) != vfs.CodeTooManyLinks {
			t.Errorf("%s: %v; want too_many_links", p, err)
		}
		if tr.lookups > 4*vfs.MaxSymlinks {
			t.Errorf("%s: %d lookups for a loop; want at most %d", p, tr.lookups, 4*vfs.MaxSymlinks)
		}
	}
}

func TestResolveRootAndErrors(t *testing.T) {
	root := build(t, "d/")
	r, err := resolve(root, ".", true)
	if err != nil || !r.Found || r.Node != root || r.Parent != root || r.Name != "" || r.Followed {
		t.Errorf("Resolve(root) = %+v, %v", r, err)
	}
	// A Lookup failure becomes an *Error through Errno, host details dropped.
	tr := &tree{lookupErr: &fs.PathError{Op: "lookup", Path: "/tmp/host/secret", Err: syscall.EIO}}
	_, err = vfs.Resolve[*node](context.Background(), tr, root, vfs.MustParse("d/x"), false, "stat")
	var e *vfs.Error
	if !errors.As(err, &e) || e.Code != vfs.CodeIO || e.Op != "stat" || e.Path != "d/x" || strings.Contains(err.Error(), "/tmp/") {
		t.Errorf("Lookup failure: %#v", err)
	}
	tr = &tree{lookupErr: vfs.NewError(vfs.CodePermission, "inner", vfs.MustParse("zz"), "")}
	_, err = vfs.Resolve[*node](context.Background(), tr, root, vfs.MustParse("d"), false, "stat")
	if !errors.As(err, &e) || e.Code != vfs.CodePermission || e.Op != "stat" || e.Path != "d" {
		t.Errorf("Lookup *Error must be re-addressed: %#v", err)
	}
	// A cancelled context stops a long walk.
	deep := newDir(".")
	n := deep
	for range 100 {
		c := newDir("a")
		n.kids["a"] = c
		n = c
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = vfs.Resolve[*node](ctx, &tree{}, deep, vfs.MustParse(strings.Repeat("a/", 100)), false, "walk")
	if vfs.CodeOf(err) != vfs.CodeCanceled || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled walk: %v; want canceled matching context.Canceled", err)
	}
	if r, err := vfs.Resolve[*node](context.Background(), &tree{}, deep, vfs.MustParse(strings.Repeat("a/", 100)), false, "walk"); err != nil || !r.Found {
		t.Errorf("100-deep walk: %v", err)
	}
}

// FuzzResolve resolves fuzzed paths through fuzzed symlink targets in a tree whose
// root sits inside a larger tree. Properties: no panic; errors are *vfs.Error with
// the caller's op and path; the result never lies outside the root; the number of
// lookups is bounded by the bytes to walk.
func FuzzResolve(f *testing.F) {
	f.Add("l1/x", "a/b", "../f", false)
	f.Add("a/l2/f", "..", "../../secret", true)
	f.Add("l1", "/secret", "x", true)
	f.Add("a/l2/", "a/l2", "../l1", true)
	f.Add("a/b/../f", ".//a/./b/", "../../../..", false)
	f.Fuzz(func(t *testing.T, path, t1, t2 string, follow bool) {
		q, err := vfs.ParseGuest(path)
		if err != nil {
			return
		}
		top := newDir("top")
		top.kids["secret"] = &node{name: "secret"}
		root := newDir("root")
		top.kids["root"] = root
		a, b := newDir("a"), newDir("b")
		root.kids["a"], a.kids["b"] = a, b
		root.kids["f"] = &node{name: "f"}
		root.kids["l1"] = &node{name: "l1", typ: fs.ModeSymlink, target: t1}
		a.kids["l2"] = &node{name: "l2", typ: fs.ModeSymlink, target: t2}
		inside := map[*node]bool{}
		var mark func(n *node)
		mark = func(n *node) {
			inside[n] = true
			for _, c := range n.kids {
				mark(c)
			}
		}
		mark(root)

		tr := &tree{}
		r, err := vfs.Resolve[*node](context.Background(), tr, root, q, follow, "fuzz")
		bound := len(q.Raw()) + 2 + (vfs.MaxSymlinks+1)*(len(t1)+len(t2)+2)
		if tr.lookups > bound {
			t.Fatalf("%d lookups for %q (bound %d)", tr.lookups, path, bound)
		}
		if err != nil {
			var e *vfs.Error
			if !errors.As(err, &e) || e.Op != "fuzz" || e.Path != q.String() || e.Code == "" {
				t.Fatalf("error %#v is not an *Error with the caller's op and path", err)
			}
			return
		}
		if !inside[r.Parent] || (r.Found && !inside[r.Node]) {
			t.Fatalf("Resolve(%q) with l1 -> %q, a/l2 -> %q left the root: parent %s, node %+v", path, t1, t2, r.Parent.name, r.Node)
		}
		if r.Found && r.Name != "" && r.Parent.kids[r.Name] != r.Node {
			t.Fatalf("Resolve(%q): Node is not Parent's entry %q", path, r.Name)
		}
		if !r.Found && (r.Name == "" || r.Parent.kids[r.Name] != nil || !r.Parent.typ.IsDir()) {
			t.Fatalf("Resolve(%q): missing entry %q in %s is not a valid place to create", path, r.Name, r.Parent.name)
		}
	})
}
