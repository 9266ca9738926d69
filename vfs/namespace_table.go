package vfs

import (
	"io/fs"
	"slices"
	"strings"
)

// mount is one entry of the mount table.
type mount struct {
	path Path
	b    Backend // already wrapped with ReadOnly for a read-only mount
	opts MountOptions
}

// node is a directory of the namespace: a mount point, or a directory above one.
type node struct {
	mount *mount     // the mount at exactly this path, or nil
	kids  []DirEntry // sorted children that are mount points or lead to one (all ModeDir)
}

// table is an immutable snapshot of a mount table.
type table struct {
	nodes    map[string]*node // by Path.Raw; always holds the root ""
	sorted   []*mount         // by path, component-wise
	maxDepth int              // depth of the deepest mount point
	root     *mount           // the mount at the root, or nil
	// shadowing holds the mounts with another mount strictly below their mount
	// point: paths in them are resolved through the namespace (see route).
	shadowing map[*mount]bool
}

var emptyTable = newTable(nil)

// comparePaths orders paths component by component, so a directory's subtree sorts
// right after it ("a", "a/b", "a-c").
func comparePaths(a, b Path) int {
	x, y := a.p, b.p
	for {
		i := strings.IndexByte(x, '/')
		j := strings.IndexByte(y, '/')
		xs, ys := x, y
		if i >= 0 {
			xs = x[:i]
		}
		if j >= 0 {
			ys = y[:j]
		}
		if c := strings.Compare(xs, ys); c != 0 {
			return c
		}
		switch {
		case i < 0 && j < 0:
			return 0
		case i < 0:
			return -1
		case j < 0:
			return 1
		}
		x, y = x[i+1:], y[j+1:]
	}
}

func newTable(ms []*mount) *table {
	t := &table{nodes: map[string]*node{"": {}}}
	t.sorted = slices.Clone(ms)
	slices.SortFunc(t.sorted, func(a, b *mount) int { return comparePaths(a.path, b.path) })
	get := func(p Path) *node {
		nd := t.nodes[p.p]
		if nd == nil {
			nd = &node{}
			t.nodes[p.p] = nd
		}
		return nd
	}
	for i, m := range t.sorted {
		get(m.path).mount = m
		if m.path.IsRoot() {
			t.root = m
		}
		for _, o := range t.sorted[i+1:] {
			if !o.path.Equal(m.path) && o.path.HasPrefix(m.path) {
				if t.shadowing == nil {
					t.shadowing = map[*mount]bool{}
				}
				t.shadowing[m] = true
				break
			}
		}
		t.maxDepth = max(t.maxDepth, m.path.Depth())
		for q := m.path; !q.IsRoot(); q = q.Dir() {
			parent := get(q.Dir())
			name := q.Base()
			i, found := slices.BinarySearchFunc(parent.kids, name, func(e DirEntry, n string) int {
				return strings.Compare(e.Name, n)
			})
			if !found {
				parent.kids = slices.Insert(parent.kids, i, DirEntry{Name: name, Type: fs.ModeDir})
			}
		}
	}
	return t
}

// kind classifies a namespace path.
type kind uint8

const (
	kindNone       kind = iota // no mount covers it and it is no namespace directory: it does not exist
	kindInMount                // an ordinary path inside a mount
	kindMountPoint             // exactly a mount point
	kindCovered                // a directory above a mount point, inside another mount
	kindSynthetic              // a directory above a mount point that no mount covers
)

// loc is where a namespace path leads.
type loc struct {
	kind kind
	m    *mount // the covering mount (nil for kindNone and kindSynthetic)
	rel  Path   // the path within m
	nd   *node  // the namespace directory at exactly this path, if any
}

// isNode reports whether the path is a namespace directory.
func (l *loc) isNode() bool { return l.nd != nil }

// walkStart is where locate's walk up s starts: only a path no deeper than
// the deepest mount point can be a namespace directory, so deeper paths
// start at the end of their first maxDepth components.
func (t *table) walkStart(s string) int {
	switch {
	case s == "":
		return 0
	case t.maxDepth == 0:
		return 0
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			n++
			if n == t.maxDepth {
				return i
			}
		}
	}
	return len(s)
}

// locate finds the mount covering p: the longest mount point that is p or an ancestor
// of p, component-wise. It does not allocate.
func (t *table) locate(p Path) loc {
	s := p.p
	if t.maxDepth == 0 && t.root != nil && s != "" {
		return loc{kind: kindInMount, m: t.root, rel: p} // the common single-backend case
	}
	end := t.walkStart(s)
	var nd *node
	i := end
	if end == len(s) {
		nd = t.nodes[s]
		if nd != nil && nd.mount != nil {
			return loc{kind: kindMountPoint, m: nd.mount, nd: nd}
		}
		if s == "" {
			return loc{kind: kindSynthetic, nd: nd}
		}
		i = parentEnd(s, i)
	}
	for {
		if x := t.nodes[s[:i]]; x != nil && x.mount != nil {
			rel := Path{p: s, mustDir: p.mustDir, resolved: p.resolved}
			if i > 0 {
				rel.p = s[i+1:]
			}
			if nd != nil {
				return loc{kind: kindCovered, m: x.mount, rel: rel, nd: nd}
			}
			return loc{kind: kindInMount, m: x.mount, rel: rel}
		}
		if i == 0 {
			break
		}
		i = parentEnd(s, i)
	}
	if nd != nil {
		return loc{kind: kindSynthetic, nd: nd}
	}
	return loc{kind: kindNone}
}

// parentEnd returns the end of the parent of the prefix s[:i]: the index of its last
// slash, or 0 for a single component.
func parentEnd(s string, i int) int {
	if j := strings.LastIndexByte(s[:i], '/'); j >= 0 {
		return j
	}
	return 0
}
