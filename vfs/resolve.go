package vfs

import (
	"context"
	"io/fs"
	"strings"
)

// Tree is the view of a virtual backend's storage that the shared resolver walks.
// Implementations are called with whatever lock the backend holds for the duration
// of one [Resolve]. They must not call back into Resolve.
type Tree[N any] interface {
	// Lookup returns the entry named name in directory dir, and false if there is none.
	Lookup(dir N, name string) (N, bool, error)
	// Type returns n's type bits: [fs.ModeDir], [fs.ModeSymlink], another
	// [fs.ModeType] bit, or 0 for a regular file.
	Type(n N) fs.FileMode
	// Target returns the target text of symlink n.
	Target(n N) (string, error)
}

// Resolution is the result of [Resolve].
type Resolution[N any] struct {
	// Parent is the directory that holds, or would hold, the final entry. For the
	// root itself, Parent is the root.
	Parent N
	// Name is the final entry's name in Parent; "" when the result is the root.
	Name string
	// Node is the final entry; valid only when Found.
	Node N
	// Found reports whether the final entry exists.
	Found bool
	// Followed reports whether a final symlink was followed to reach Node (or, when
	// not Found, to reach the missing name a creation would make).
	Followed bool
}

// Resolve walks p from root in t. It walks the same way for every virtual
// backend, so memory, sqlite, git and cas agree on every corner:
//
//   - Intermediate symlinks are always followed. The final one is followed only
//     when follow is true or p is marked MustBeDir. A relative target resolves
//     from the link's directory, with ".." taken physically (the parent of the
//     directory actually reached, not a lexical trim).
//   - An absolute target, or a ".." above root, fails with path_outside_sandbox.
//   - More than [MaxSymlinks] links fails with too_many_links. An empty target
//     fails with not_found.
//   - A missing intermediate directory is not_found. A non-directory used as one
//     is not_a_directory. A missing final entry is not an error: Found is false
//     and Parent/Name say where it would be created. Through a followed dangling
//     link, that is the link's target, still beneath root. A missing final name
//     that is not a [ValidName] (possible only through a link target) is
//     invalid_path, so callers may create Name as is.
//   - If p (or a followed link target) ends in a slash, the final object must be a
//     directory: not_a_directory otherwise.
//
// Errors are [*Error] values with Op op and Path p. The context is checked
// periodically, so a very long walk can be cancelled.
//
// A Resolved p follows no symlink: where one stands on it, the result is conflict.
func Resolve[N any](ctx context.Context, t Tree[N], root N, p Path, follow bool, op string) (Resolution[N], error) {
	res, _, err := resolve(ctx, t, root, p, follow, op, false)
	return res, err
}

// ResolveLocation is [Resolve] that also reports the canonical [Location] it
// reached, for a backend's Resolve method.
func ResolveLocation[N any](ctx context.Context, t Tree[N], root N, p Path, follow bool, op string) (Resolution[N], Location, error) {
	return resolve(ctx, t, root, p, follow, op, true)
}

func resolve[N any](ctx context.Context, t Tree[N], root N, p Path, follow bool, op string, canon bool) (Resolution[N], Location, error) {
	type frame struct {
		node N
		name string
	}
	var buf [32]frame // paths up to 31 directories deep resolve without allocating
	stack := append(buf[:0], frame{node: root})
	rest := p.p
	if p.mustDir {
		rest += "/"
	}
	links := 0
	steps := 0
	followed := false
	fail := func(code Code, msg string) (Resolution[N], Location, error) {
		return Resolution[N]{}, Location{}, &Error{Code: code, Op: op, Path: p.String(), msg: msg}
	}
	// done builds the Location when canon asks for it: the names on the stack, then
	// the final name.
	done := func(r Resolution[N], final string, typ fs.FileMode) (Resolution[N], Location, error) {
		if !canon {
			return r, Location{}, nil
		}
		var b strings.Builder
		for _, f := range stack[1:] {
			if b.Len() > 0 {
				b.WriteByte('/')
			}
			b.WriteString(f.name)
		}
		if final != "" {
			if b.Len() > 0 {
				b.WriteByte('/')
			}
			b.WriteString(final)
		}
		loc := Location{Path: Path{p: b.String(), resolved: true}, Found: r.Found}
		if r.Found {
			loc.Type = typ
		}
		return r, loc, nil
	}
	for {
		// Skip separators and "." segments.
		for rest != "" && (rest[0] == '/' || (rest[0] == '.' && (len(rest) == 1 || rest[1] == '/'))) {
			rest = rest[1:]
		}
		if rest == "" {
			top := stack[len(stack)-1]
			parent := top
			if len(stack) > 1 {
				parent = stack[len(stack)-2]
			}
			r := Resolution[N]{Parent: parent.node, Name: top.name, Node: top.node, Found: true, Followed: followed}
			if canon && len(stack) > 1 {
				stack = stack[:len(stack)-1] // the final directory is named by done
			}
			return done(r, top.name, fs.ModeDir)
		}
		steps++
		if steps&63 == 0 {
			if err := ctx.Err(); err != nil {
				return Resolution[N]{}, Location{}, &Error{Code: CodeCanceled, Op: op, Path: p.String(), Err: err}
			}
		}
		var seg string
		var slash bool
		seg, rest, slash = strings.Cut(rest, "/")
		// last: no further real component; trailing: a slash followed this one
		// (Cut consumed it, so rest alone cannot tell for "name/").
		last, trailing := endOf(rest)
		trailing = trailing || (last && slash)
		if seg == ".." {
			if len(stack) == 1 {
				return fail(CodeOutside, "resolution climbs above the root")
			}
			stack = stack[:len(stack)-1]
			continue
		}
		top := stack[len(stack)-1]
		child, ok, err := t.Lookup(top.node, seg)
		if err != nil {
			return Resolution[N]{}, Location{}, Errno(op, p, err)
		}
		if !ok {
			if !last {
				return fail(CodeNotFound, "")
			}
			if !ValidName(seg) {
				// Only a symlink target can carry such a name: a Path cannot.
				return fail(CodeInvalidPath, "invalid name in symlink target")
			}
			return done(Resolution[N]{Parent: top.node, Name: seg, Found: false, Followed: followed}, seg, 0)
		}
		typ := t.Type(child)
		switch {
		case typ&fs.ModeSymlink != 0:
			if last && !follow && !trailing {
				return done(Resolution[N]{Parent: top.node, Name: seg, Node: child, Found: true, Followed: followed}, seg, fs.ModeSymlink)
			}
			if p.resolved {
				return fail(CodeConflict, "a symlink stands on a resolved path (it changed after the decision)")
			}
			links++
			if links > MaxSymlinks {
				return fail(CodeTooManyLinks, "too many levels of symbolic links")
			}
			target, err := t.Target(child)
			if err != nil {
				return Resolution[N]{}, Location{}, Errno(op, p, err)
			}
			if target == "" {
				return fail(CodeNotFound, "empty symlink target")
			}
			if target[0] == '/' {
				return fail(CodeOutside, "absolute symlink target")
			}
			if strings.IndexByte(target, 0) >= 0 {
				return fail(CodeInvalidPath, "NUL byte in symlink target")
			}
			if last {
				followed = true
			}
			if rest == "" && !slash {
				rest = target
			} else { // keep a trailing slash: the target must then be a directory
				rest = target + "/" + rest
			}
		case typ.IsDir():
			if last {
				return done(Resolution[N]{Parent: top.node, Name: seg, Node: child, Found: true, Followed: followed}, seg, fs.ModeDir)
			}
			stack = append(stack, frame{node: child, name: seg})
		default:
			if trailing || !last {
				return fail(CodeNotDir, "")
			}
			return done(Resolution[N]{Parent: top.node, Name: seg, Node: child, Found: true, Followed: followed}, seg, typ&fs.ModeType)
		}
	}
}

// endOf reports whether rest holds no further real component (only "/" and "."
// segments), and whether it is non-empty, meaning a slash followed the component.
func endOf(rest string) (last, trailing bool) {
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if c == '/' {
			continue
		}
		if c == '.' && (i+1 == len(rest) || rest[i+1] == '/') {
			continue
		}
		return false, false
	}
	return true, rest != ""
}

// ResolveBackend resolves p in b with the shared resolver.
// It looks each component up with b.Lstat and reads links with b.Readlink, each
// on a Resolved path. It is [Backend.Resolve] for a backend with no cheaper way:
// correct, at one Lstat per component.
func ResolveBackend(ctx context.Context, b Backend, p Path, follow bool, op string) (Location, error) {
	_, loc, err := ResolveLocation[lstatNode](ctx, lstatTree{b: b, ctx: ctx}, lstatNode{typ: fs.ModeDir, p: Path{resolved: true}}, p, follow, op)
	return loc, err
}

type lstatNode struct {
	p   Path
	typ fs.FileMode
}

type lstatTree struct {
	b   Backend
	ctx context.Context
}

func (x lstatTree) Lookup(dir lstatNode, name string) (lstatNode, bool, error) {
	child, err := dir.p.Child(name)
	if err != nil {
		return lstatNode{}, false, err
	}
	info, err := x.b.Lstat(x.ctx, child)
	if err != nil {
		if CodeOf(err) == CodeNotFound {
			return lstatNode{}, false, nil
		}
		return lstatNode{}, false, err
	}
	return lstatNode{p: child, typ: info.Mode.Type()}, true, nil
}

func (x lstatTree) Type(n lstatNode) fs.FileMode { return n.typ }

func (x lstatTree) Target(n lstatNode) (string, error) { return x.b.Readlink(x.ctx, n.p) }
