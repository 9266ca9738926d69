package vfs

import (
	"context"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Resolve returns the location p reaches in the namespace (see [Backend.Resolve]).
//
// In a mount with no other mount below it, that is the mount backend's own
// resolution, re-based at the mount point. In a mount that another mount shadows
// (a read-only mount over a directory of a read-write one, say), the namespace
// walks p itself, component by component. So a symlink whose target lands under
// the inner mount reaches the inner mount, not the directory it hides. Namespace
// directories resolve to themselves.
//
// A link may leave its mount only to come back into it. No backend follows a
// target above its own root, nor an absolute one; it fails with
// path_outside_sandbox. Then the namespace resolves the path itself. It follows
// such a link when it leads back into the mount that holds it:
//   - a relative target, taken lexically from the link's directory
//     ("../../proj/src/x" in a mount at proj);
//   - an absolute host path naming a place in a physical mount
//     ([HostLinkResolver]).
//
// A target landing anywhere else, another mount included, is
// path_outside_sandbox. Every operation of the namespace does the same, so a Dir
// without a policy reaches what a Dir with one decides on. A Sub of a mount is a
// backend of its own and stays confined to itself.
func (n *Namespace) Resolve(ctx context.Context, p Path, follow bool) (Location, error) {
	t := n.table()
	l := t.locate(p)
	switch l.kind {
	case kindInMount, kindMountPoint:
		if t.shadowing[l.m] && !(l.kind == kindMountPoint && p.IsRoot()) {
			return n.walk(ctx, t, p, follow, "resolve")
		}
		loc, err := l.m.b.Resolve(ctx, l.rel, follow)
		if err != nil {
			if CodeOf(err) == CodeOutside && !p.resolved {
				// A link leaving the mount: the namespace may follow it back in.
				if loc, werr := n.walk(ctx, t, p, follow, "resolve"); werr == nil {
					return loc, nil
				}
			}
			return Location{}, ReaddressTo(err, "resolve", p)
		}
		loc.Path = l.m.path.Join(loc.Path).Resolved()
		return loc, nil
	case kindCovered, kindSynthetic:
		return Location{Path: p.WithoutDirMark().Resolved(), Found: true, Type: fs.ModeDir}, nil
	}
	if pl := t.locate(p.Dir()); pl.isNode() && !p.MustBeDir() {
		return Location{Path: p.Resolved()}, nil
	}
	return Location{}, NewError(CodeNotFound, "resolve", p, "")
}

// ResolveStat resolves p and stats what it reaches.
// It takes one lookup where the mount's backend offers one (see [StatResolver]).
func (n *Namespace) ResolveStat(ctx context.Context, p Path, follow bool) (Location, Info, error) {
	t := n.table()
	l := t.locate(p)
	if (l.kind == kindInMount || l.kind == kindMountPoint) && !t.shadowing[l.m] {
		if _, ok := l.m.b.(StatResolver); ok {
			loc, info, err := ResolveStat(ctx, l.m.b, l.rel, follow)
			if err != nil && CodeOf(err) == CodeOutside && !p.resolved {
				return n.resolveStatSlow(ctx, p, follow)
			}
			if err != nil {
				return Location{}, Info{}, ReaddressTo(err, "resolve", p)
			}
			loc.Path = l.m.path.Join(loc.Path).Resolved()
			if loc.Found && !p.IsRoot() {
				info.Name = p.Base()
			}
			return loc, info, nil
		}
	}
	return n.resolveStatSlow(ctx, p, follow)
}

// resolveStatSlow is ResolveStat as Resolve, then Stat or Lstat of the Resolved
// path (which follows nothing, so a swap in between fails with conflict).
func (n *Namespace) resolveStatSlow(ctx context.Context, p Path, follow bool) (Location, Info, error) {
	loc, err := n.Resolve(ctx, p, follow)
	if err != nil || !loc.Found {
		return loc, Info{}, err
	}
	var info Info
	if follow || p.MustBeDir() {
		info, err = n.Stat(ctx, loc.Path)
	} else {
		info, err = n.Lstat(ctx, loc.Path)
	}
	if err != nil {
		return Location{}, Info{}, ReaddressTo(err, "resolve", p)
	}
	if !p.IsRoot() {
		info.Name = p.Base()
	}
	return loc, info, nil
}

// ResolveOpen resolves p, lets decide rule on the location, and opens it for
// reading. It takes one lookup where the mount's backend offers one (see
// [OpenResolver]). decide sees the namespace location. The file is the one
// OpenFile would return: its errors name p.
func (n *Namespace) ResolveOpen(ctx context.Context, p Path, decide func(Location) error) (File, Location, error) {
	t := n.table()
	l := t.locate(p)
	if (l.kind == kindInMount || l.kind == kindMountPoint) && !t.shadowing[l.m] {
		if _, ok := l.m.b.(OpenResolver); ok {
			f, at, done, err := fusedInMount(p, l, "open", decide, func(rel Path, decide func(Location) error) (File, error) {
				f, _, err := ResolveOpen(ctx, l.m.b, rel, decide)
				return f, err
			})
			if done && err == nil {
				return wrapFile(f, p, &l), at, nil
			}
			if done {
				return f, at, err
			}
		}
	}
	loc, err := n.Resolve(ctx, p, true)
	return decideThen(loc, err, decide, func(q Path) (File, error) {
		f, err := n.OpenFile(ctx, q, os.O_RDONLY, 0)
		return addressFile(f, p, q), err
	}, func(err error) error { return ReaddressTo(err, "open", p) })
}

// ResolveReadDir resolves p, lets decide rule on the location, and lists it.
// It takes one lookup where the mount's backend offers one (see [ListResolver])
// and p lies inside a mount with no other mount beneath it. Then the listing
// needs no mount merged in. decide sees the namespace location.
func (n *Namespace) ResolveReadDir(ctx context.Context, p Path, decide func(Location) error) ([]DirEntry, Location, error) {
	t := n.table()
	l := t.locate(p)
	if l.kind == kindInMount && !t.shadowing[l.m] {
		if _, ok := l.m.b.(ListResolver); ok {
			ents, at, done, err := fusedInMount(p, l, "readdir", decide, func(rel Path, decide func(Location) error) ([]DirEntry, error) {
				ents, _, err := ResolveReadDir(ctx, l.m.b, rel, decide)
				return ents, err
			})
			if done {
				return ents, at, err
			}
		}
	}
	loc, err := n.Resolve(ctx, p, true)
	return decideThen(loc, err, decide, func(q Path) ([]DirEntry, error) {
		return n.ReadDir(ctx, q)
	}, func(err error) error { return ReaddressTo(err, "readdir", p) })
}

// fusedInMount runs a fused call of the backend of mount l.m (act: its
// ResolveOpen or ResolveReadDir of l.rel) for the namespace path p: decide sees
// the namespace location, and its own error comes back unchanged; other errors
// are addressed to p with op. done is false (and err nil) when nothing was
// decided and a link leaves the mount: the namespace's own resolution may follow
// it back in.
func fusedInMount[T any](p Path, l loc, op string, decide func(Location) error, act func(rel Path, decide func(Location) error) (T, error)) (v T, at Location, done bool, err error) {
	var derr error
	decided := false
	v, err = act(l.rel, func(loc Location) error {
		loc.Path = l.m.path.Join(loc.Path).Resolved()
		at, decided = loc, true
		derr = decide(loc)
		return derr
	})
	switch {
	case err == nil:
		return v, at, true, nil
	case derr != nil && err == derr:
		return v, at, true, err // decide's own error, unchanged
	case !decided && CodeOf(err) == CodeOutside && !p.resolved:
		var zero T
		return zero, Location{}, false, nil
	}
	return v, at, true, ReaddressTo(err, op, p)
}

// route returns the path an operation on p must act on: p itself, unless p lies in
// a shadowing mount and is not yet Resolved; then the namespace's own resolution
// of p (Resolved), so the operation reaches the mount that really serves what p
// leads to. follow says whether the operation follows a final symlink; one that
// does not (Remove, Rename, Mkdir, ...) acts on the entry itself even when p ends
// in a slash, and the backend then checks the slash against that entry.
func (n *Namespace) route(ctx context.Context, t *table, p Path, follow bool, op string) (Path, error) {
	if len(t.shadowing) == 0 || p.resolved {
		return p, nil
	}
	l := t.locate(p)
	if (l.kind != kindInMount && l.kind != kindMountPoint) || !t.shadowing[l.m] {
		return p, nil
	}
	w := p
	if !follow {
		w = p.WithoutDirMark()
	}
	loc, err := n.walk(ctx, t, w, follow, op)
	if err != nil {
		return Path{}, err
	}
	q := loc.Path
	q.mustDir = p.mustDir
	return q, nil
}

// walk resolves p component by component through the mount table: every step
// looks its name up in the mount that serves the directory reached so far.
func (n *Namespace) walk(ctx context.Context, t *table, p Path, follow bool, op string) (Location, error) {
	_, loc, err := ResolveLocation[nsNode](ctx, nsTree{n: n, t: t, ctx: ctx}, nsNode{typ: fs.ModeDir}, p, follow, op)
	if err != nil {
		return Location{}, err
	}
	return loc, nil
}

// nsTree is the namespace seen by the shared resolver: nodes are namespace paths,
// each reached without a symlink on the way.
type nsTree struct {
	n   *Namespace
	t   *table
	ctx context.Context
}

type nsNode struct {
	p   Path
	typ fs.FileMode
}

func (x nsTree) Lookup(dir nsNode, name string) (nsNode, bool, error) {
	child, err := dir.p.Child(name)
	if err != nil {
		return nsNode{}, false, err
	}
	child = child.Resolved()
	info, err := x.n.lstatAt(x.ctx, x.t, child)
	if err != nil {
		if CodeOf(err) == CodeNotFound {
			return nsNode{}, false, nil
		}
		return nsNode{}, false, err
	}
	return nsNode{p: child, typ: info.Mode.Type()}, true, nil
}

func (x nsTree) Type(n nsNode) fs.FileMode { return n.typ }

// Target reads link n. A link may leave its mount only to come back into it: a
// relative target must lead, taken lexically from the link's directory, to a
// place inside the mount that holds the link, and an absolute one must name a
// place under that mount's host directory (a HostPather: physical), which it then
// means; anything else is path_outside_sandbox, as in every backend. A link in a
// mount that is itself a namespace is resolved by that namespace, under its own
// rules (its own mounts may be stricter than the lexical test above).
func (x nsTree) Target(n nsNode) (string, error) {
	p := n.p
	l := x.t.locate(p)
	if l.m == nil {
		return "", NewError(CodeInvalidPath, "readlink", p, "not a symbolic link")
	}
	if composite(l.m.b) {
		loc, err := l.m.b.Resolve(x.ctx, l.rel.Unresolved(), true)
		if err != nil {
			return "", err
		}
		return relativeTarget(p, l.m.path.Join(loc.Path)), nil
	}
	target, err := l.m.b.Readlink(x.ctx, l.rel)
	if CodeOf(err) == CodeOutside {
		// An absolute host path, which the backend does not show: followed when
		// it names a place in the mount.
		if h, ok := l.m.b.(HostLinkResolver); ok {
			rel, ok, herr := h.HostLinkTarget(x.ctx, l.rel)
			if herr == nil && ok {
				return relativeTarget(p, l.m.path.Join(rel)), nil
			}
		}
		return "", NewError(CodeOutside, "resolve", p, "absolute symlink target outside its mount")
	}
	if err != nil {
		return "", err
	}
	if target == "" {
		return target, nil
	}
	if target[0] == '/' {
		return "", NewError(CodeOutside, "resolve", p, "absolute symlink target")
	}
	j := path.Join(p.Dir().Raw(), target) // lexical: ".." above the root stays ".."
	if j == ".." || strings.HasPrefix(j, "../") {
		return "", NewError(CodeOutside, "resolve", p, "symlink target climbs above the root")
	}
	q := Root
	if j != "." {
		if q, err = ParseGuest(j); err != nil {
			return "", NewError(CodeOutside, "resolve", p, "symlink target leaves its mount")
		}
	}
	if !q.HasPrefix(l.m.path) {
		return "", NewError(CodeOutside, "resolve", p, "symlink target leaves its mount")
	}
	return target, nil
}

// relativeTarget is a link target, for a link at namespace path link, that leads
// to namespace path dest (every directory on the walk's stack is canonical, so
// ".." from the link's directory is exact).
func relativeTarget(link, dest Path) string {
	up := strings.Repeat("../", depth(link.Dir()))
	switch {
	case dest.IsRoot() && up == "":
		return "."
	case dest.IsRoot():
		return up
	}
	return up + dest.Unresolved().Raw()
}

// depth is the number of components of p.
func depth(p Path) int {
	if p.IsRoot() {
		return 0
	}
	return strings.Count(p.Raw(), "/") + 1
}

// composite reports whether b routes paths through mounts of its own (a
// Namespace, bare or read-only), so that its links are its own to resolve.
func composite(b Backend) bool {
	switch v := b.(type) {
	case *Namespace:
		return true
	case wrapper:
		return composite(v.wrapped())
	}
	return false
}

// reroute is the namespace's answer to path_outside_sandbox from a mount's
// backend: a symlink on p climbs above the mount's root or is absolute, which
// no backend follows. The namespace then resolves p itself (walk), following
// such links wherever they lead inside it (another mount included, an absolute
// target through MapAbsolute), and the operation acts on the Resolved result. ok
// is false when p is already Resolved or the walk fails too: err stands.
func (n *Namespace) reroute(ctx context.Context, t *table, p Path, follow bool, op string, err error) (Path, bool) {
	if p.resolved || CodeOf(err) != CodeOutside {
		return Path{}, false
	}
	w := p
	if !follow {
		w = p.WithoutDirMark()
	}
	loc, werr := n.walk(ctx, t, w, follow, op)
	if werr != nil {
		return Path{}, false
	}
	q := loc.Path
	q.mustDir = p.mustDir
	return q, true
}

// lstatAt is Lstat without routing, for a path the walk already made canonical.
func (n *Namespace) lstatAt(ctx context.Context, t *table, p Path) (Info, error) {
	l := t.locate(p)
	switch l.kind {
	case kindInMount:
		return l.m.b.Lstat(ctx, l.rel)
	case kindMountPoint, kindSynthetic, kindCovered:
		// A namespace directory: the walk only needs its type.
		return Info{Name: p.Base(), Mode: fs.ModeDir | 0o555}, nil
	}
	return Info{}, NewError(CodeNotFound, "lstat", p, "")
}

// wrapper is a Backend of this package that wraps one other (ReadOnly's, a
// mount's Sub), which composite and reaches look through.
type wrapper interface{ wrapped() Backend }

// locatedBackend is a mount's Sub seen from the namespace: Locate re-bases the
// backend's own location at the mount point. The namespace makes one only of a
// Locator. Every other optional interface ([Optionals]) forwards to the Sub,
// through the helpers that fall back where the Sub lacks one.
type locatedBackend struct {
	Backend
	at Path // the mount point
}

// wrapped is the mount's Sub.
func (b *locatedBackend) wrapped() Backend { return b.Backend }

// Locate returns the Sub's current path in the namespace.
func (b *locatedBackend) Locate(ctx context.Context) (Path, error) {
	l, ok := b.Backend.(Locator)
	if !ok {
		return Path{}, NewError(CodeNotSupported, "locate", Root, "")
	}
	p, err := l.Locate(ctx)
	if err != nil {
		return Path{}, err
	}
	return b.at.Join(p), nil
}

// Sub keeps the mount point on the Subs of this Sub, so their Locate answers are
// namespace paths too.
func (b *locatedBackend) Sub(ctx context.Context, p Path) (Backend, error) {
	s, err := b.Backend.Sub(ctx, p)
	if err != nil {
		return nil, err
	}
	if _, ok := s.(Locator); ok {
		return &locatedBackend{Backend: s, at: b.at}, nil
	}
	return s, nil
}

// ResolveStat forwards to the wrapped backend (see [ResolveStat]).
func (b *locatedBackend) ResolveStat(ctx context.Context, p Path, follow bool) (Location, Info, error) {
	return ResolveStat(ctx, b.Backend, p, follow)
}

// ResolveOpen forwards to the wrapped backend (see [ResolveOpen]).
func (b *locatedBackend) ResolveOpen(ctx context.Context, p Path, decide func(Location) error) (File, Location, error) {
	return ResolveOpen(ctx, b.Backend, p, decide)
}

// ResolveReadDir forwards to the wrapped backend (see [ResolveReadDir]).
func (b *locatedBackend) ResolveReadDir(ctx context.Context, p Path, decide func(Location) error) ([]DirEntry, Location, error) {
	return ResolveReadDir(ctx, b.Backend, p, decide)
}

// HostLinkTarget forwards to the wrapped backend when it is a HostLinkResolver
// (ok false otherwise: a backend without host links has no such target). The
// Sub's root is this backend's root, so its answer holds here.
func (b *locatedBackend) HostLinkTarget(ctx context.Context, p Path) (Path, bool, error) {
	if h, ok := b.Backend.(HostLinkResolver); ok {
		return h.HostLinkTarget(ctx, p)
	}
	return Path{}, false, nil
}

// HostPath forwards to the wrapped backend when it is a HostPather.
func (b *locatedBackend) HostPath() (string, bool) {
	if h, ok := b.Backend.(HostPather); ok {
		return h.HostPath()
	}
	return "", false
}
