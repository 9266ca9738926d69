package memory

import (
	"io/fs"

	"github.com/capfs/capfs/vfs"
)

// walkMax is the most components walk handles; deeper paths go to vfs.Resolve,
// which also checks the context as it goes.
const walkMax = 63

// walk resolves p from root directly over the node graph for the common case, a
// path with no symlink to follow: every intermediate component an existing
// directory, the final one a directory, a file, a symlink not to be followed, or
// missing. It reports false whenever anything else is met (a symlink to follow, a
// missing or non-directory intermediate component, a file where p requires a
// directory, or a path deeper than walkMax), and the caller then runs vfs.Resolve,
// which decides every such case and reports its errors. When walk does answer, its
// Resolution is the one vfs.Resolve would return. The caller holds store.mu.
func walk(root *node, p vfs.Path, follow bool) (vfs.Resolution[*node], bool) {
	parent, n, name, ok := walkTo(root, p, follow)
	return vfs.Resolution[*node]{Parent: parent, Name: name, Node: n, Found: n != nil}, ok
}

// walkTo is walk's answer in parts, held in registers: the parent directory, the
// node (nil when the final entry is missing) and its name ("" for the root), or
// ok false where walk falls back. The hot paths (stat) call it directly.
func walkTo(root *node, p vfs.Path, follow bool) (parent, n *node, name string, ok bool) {
	rest := p.Raw()
	if rest == "" {
		return root, root, "", true
	}
	mustDir := p.MustBeDir()
	dir := root
	for depth := 1; depth <= walkMax; depth++ {
		i := 0
		for i < len(rest) && rest[i] != '/' {
			i++
		}
		seg, more := rest[:i], i < len(rest)
		child, found := dir.dir.children[seg]
		if !more {
			switch {
			case !found:
				return dir, nil, seg, true
			case child.typ == fs.ModeSymlink:
				if follow || mustDir {
					return nil, nil, "", false
				}
			case child.typ != fs.ModeDir && mustDir:
				return nil, nil, "", false
			}
			return dir, child, seg, true
		}
		if !found || child.typ != fs.ModeDir {
			return nil, nil, "", false
		}
		dir, rest = child, rest[i+1:]
	}
	return nil, nil, "", false
}
