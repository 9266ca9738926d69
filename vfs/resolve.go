package vfs

import (
	"context"
	"io/fs"
	"strings"
)

// Tree is the view of a virtual backend's storage that the shared resolver walks.
// Implementations are called with whatever lock the backend holds for the duration of
// one Resolve; they must not call back into Resolve.
type Tree[N any] interface {
	// Lookup returns the entry named name in directory dir, and false if there is none.
	Lookup(dir N, name string) (N, bool, error)
	// Type returns n's type bits: fs.ModeDir, fs.ModeSymlink, another fs.ModeType bit,
	// or 0 for a regular file.
	Type(n N) fs.FileMode
	// Target returns the target text of symlink n.
	Target(n N) (string, error)
}

// Resolution is the result of Resolve.
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

// Resolve walks p from root the same way for every virtual backend, so memory,
// sqlite, git and cas agree on every corner:
//
//   - Intermediate symlinks are always followed; the final one only when follow is
//     true or p is marked MustBeDir. A relative target resolves from the link's
//     directory, with ".." taken physically (the parent of the directory actually
//     reached, not a lexical trim).
//   - An absolute target, or a ".." above root, fails with path_outside_sandbox.
//   - More than MaxSymlinks links fails with too_many_links; an empty target with
//     not_found.
//   - A missing intermediate directory is not_found; a non-directory used as one is
//     not_a_directory. A missing final entry is not an error: Found is false and
//     Parent/Name say where it would be created (through a followed dangling link,
//     that is the link's target, still beneath root). A missing final name that is
//     not a ValidName (possible only through a link target) is invalid_path, so
//     callers may create Name as is.
//   - If p (or a followed link target) ends in a slash, the final object must be a
//     directory: not_a_directory otherwise.
//
// Errors are *Error values with Op op and Path p. The context is checked
// periodically, so a very long walk can be cancelled.
func Resolve[N any](ctx context.Context, t Tree[N], root N, p Path, follow bool, op string) (Resolution[N], error) {
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
	fail := func(code Code, msg string) (Resolution[N], error) {
		return Resolution[N]{}, &Error{Code: code, Op: op, Path: p.String(), msg: msg}
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
			return Resolution[N]{Parent: parent.node, Name: top.name, Node: top.node, Found: true, Followed: followed}, nil
		}
		steps++
		if steps&63 == 0 {
			if err := ctx.Err(); err != nil {
				return Resolution[N]{}, &Error{Code: CodeCanceled, Op: op, Path: p.String(), Err: err}
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
			return Resolution[N]{}, Errno(op, p, err)
		}
		if !ok {
			if !last {
				return fail(CodeNotFound, "")
			}
			if !ValidName(seg) {
				// Only a symlink target can carry such a name: a Path cannot.
				return fail(CodeInvalidPath, "invalid name in symlink target")
			}
			return Resolution[N]{Parent: top.node, Name: seg, Found: false, Followed: followed}, nil
		}
		typ := t.Type(child)
		switch {
		case typ&fs.ModeSymlink != 0:
			if last && !follow && !trailing {
				return Resolution[N]{Parent: top.node, Name: seg, Node: child, Found: true, Followed: followed}, nil
			}
			links++
			if links > MaxSymlinks {
				return fail(CodeTooManyLinks, "too many levels of symbolic links")
			}
			target, err := t.Target(child)
			if err != nil {
				return Resolution[N]{}, Errno(op, p, err)
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
				return Resolution[N]{Parent: top.node, Name: seg, Node: child, Found: true, Followed: followed}, nil
			}
			stack = append(stack, frame{node: child, name: seg})
		default:
			if trailing || !last {
				return fail(CodeNotDir, "")
			}
			return Resolution[N]{Parent: top.node, Name: seg, Node: child, Found: true, Followed: followed}, nil
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
