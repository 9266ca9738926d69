package overlay

import (
	"context"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/capfs/capfs/vfs"
)

// The Overlay resolves paths with the shared resolver (vfs.ResolveLocation)
// over its merged view, one layer lookup per component, and keeps what each
// lookup found (the entry's status and its layer). A Dir with a policy over
// the Overlay (a lazy run's layer) resolves every call before deciding on
// it; ResolveStat and ResolveOpen let it stat or open what the resolution
// reached without looking the final entry up again (a lookup here is an
// upper Lstat and a lower one, the lower through the work Dir).

// ovNode is an entry of the merged view met by a resolution.
type ovNode struct {
	p       vfs.Path
	info    vfs.Info
	inUpper bool
	root    bool // the root: its status is looked up when asked for
}

type ovTree struct {
	o   *Overlay
	ctx context.Context
}

func (t ovTree) Lookup(dir ovNode, name string) (ovNode, bool, error) {
	child, err := dir.p.Child(name)
	if err != nil {
		return ovNode{}, false, err
	}
	// A directory the upper does not hold has no children there: a
	// resolution that met one in the lower only asks the lower below it.
	// The upper is asked on a Resolved path: the resolution met no symlink
	// on the way to dir, nor, beneath a Sub, did its root; one swapped in
	// since (a Sub's root replaced by a link) is a conflict, not followed.
	inUpper, info, err := t.o.layerIn(t.ctx, "lstat", child.Resolved(), dir.root || dir.inUpper)
	if err != nil {
		if vfs.CodeOf(err) == vfs.CodeNotFound {
			return ovNode{}, false, nil
		}
		return ovNode{}, false, err
	}
	return ovNode{p: child, info: info, inUpper: inUpper}, true, nil
}

func (t ovTree) Type(n ovNode) fs.FileMode {
	if n.root {
		return fs.ModeDir
	}
	return n.info.Mode.Type()
}

func (t ovTree) Target(n ovNode) (string, error) { return t.o.readlink(t.ctx, n.p) }

func (o *Overlay) resolve(ctx context.Context, p vfs.Path, follow bool, op string) (vfs.Resolution[ovNode], vfs.Location, error) {
	if n, found, ok := o.resolveLower(ctx, p, follow); ok {
		loc := vfs.Location{Path: n.p.Resolved(), Found: found}
		if found {
			loc.Type = n.info.Mode.Type()
		}
		return vfs.Resolution[ovNode]{Name: n.p.Base(), Node: n, Found: found}, loc, nil
	}
	return o.resolveFrom(ctx, vfs.Root, p, follow, op)
}

// resolveAt is resolve beneath directory top (a Sub's root): the Location
// is relative to top. Only the overlay's own root takes the lower's
// one-call path (resolveLower), since the lower's resolution is not bounded
// by any other top.
func (o *Overlay) resolveAt(ctx context.Context, top, p vfs.Path, follow bool, op string) (vfs.Resolution[ovNode], vfs.Location, error) {
	if top.IsRoot() {
		return o.resolve(ctx, p, follow, op)
	}
	return o.resolveFrom(ctx, top, p, follow, op)
}

// resolveFrom resolves p with the shared resolver, one layer lookup per
// component, from directory top of the merged view: no symlink or ".."
// leads above top (path_outside_sandbox).
func (o *Overlay) resolveFrom(ctx context.Context, top, p vfs.Path, follow bool, op string) (vfs.Resolution[ovNode], vfs.Location, error) {
	return vfs.ResolveLocation[ovNode](ctx, ovTree{o: o, ctx: ctx}, ovNode{p: top.Unresolved().WithoutDirMark(), root: true}, p, follow, op)
}

// resolveLower resolves p with one call to the lower, where only the lower
// can hold p and its ancestors: the upper holds not even p's first
// component, and no whiteout or opaque directory hides p or an ancestor. The
// answer is then the one a resolution one component at a time gives, for a
// fraction of the lookups (the lower, a work Dir's view, resolves the whole
// path canonically in one enforced call). ok is false, and the caller
// resolves one component at a time, where that does not hold: the lower is
// no vfs.StatResolver, p ends in a slash, the lower found nothing or failed,
// or its resolution followed a symlink (whose target the upper may have
// changed or a whiteout hidden). A final name the lower does not hold, in a
// directory it does, is absent (found false): the upper holds nothing there
// either.
func (o *Overlay) resolveLower(ctx context.Context, p vfs.Path, follow bool) (n ovNode, found, ok bool) {
	sr, isSR := o.lower.(vfs.StatResolver)
	if !isSR || p.IsRoot() || p.MustBeDir() {
		return ovNode{}, false, false
	}
	p = p.Unresolved()
	if !o.lowerOnly(ctx, p) {
		return ovNode{}, false, false
	}
	loc, info, err := sr.ResolveStat(ctx, p, follow)
	if err != nil || loc.Path.Raw() != p.Raw() {
		return ovNode{}, false, false
	}
	if !loc.Found {
		o.seeAbsent(p)
		return ovNode{p: p}, false, true
	}
	o.see(ctx, p, info)
	n = ovNode{p: p, info: ownerless(info)}
	o.lastLower.Store(&lowerHit{p: p, info: n.info, at: time.Now()})
	return n, true, true
}

// lowerOnly reports whether only the lower can hold p: the upper holds not
// even its first component, and no whiteout or opaque directory hides p or
// an ancestor.
func (o *Overlay) lowerOnly(ctx context.Context, p vfs.Path) bool {
	top, _, _ := strings.Cut(p.Raw(), "/")
	first, err := vfs.Root.Child(top)
	if err != nil {
		return false
	}
	_, err = o.upper.Lstat(ctx, first)
	return vfs.CodeOf(err) == vfs.CodeNotFound && !o.isHidden(p)
}

// lowerHit is a path resolveLower found in the lower only, with its status
// (ownerless) and when. A Dir call resolves its path, decides, then acts on
// the Overlay: a removal right after its resolution takes the answer from
// here (layerResolved) rather than ask both layers again. The answer is as
// old as the resolution, never older than lowerHitAge: what a lookup made
// then and acted on now would know anyway.
type lowerHit struct {
	p    vfs.Path
	info vfs.Info
	at   time.Time
}

// lowerHitAge bounds a lowerHit's use.
const lowerHitAge = 10 * time.Millisecond

// layerResolved is layer, from the last one-call resolution where it was of
// p, is recent, and only the lower can still hold p (nothing made p in the
// upper or hid it since).
func (o *Overlay) layerResolved(ctx context.Context, op string, p vfs.Path) (bool, vfs.Info, error) {
	p = p.WithoutDirMark()
	if h := o.lastLower.Load(); h != nil && h.p.Raw() == p.Raw() && time.Since(h.at) < lowerHitAge && o.lowerOnly(ctx, p) {
		return false, h.info, nil
	}
	return o.layer(ctx, op, p)
}

// Resolve resolves p in the merged view (see [vfs.Backend].Resolve).
func (o *Overlay) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	_, loc, err := o.resolve(ctx, p, follow, "resolve")
	return loc, err
}

// ResolveStat is Resolve plus the status of what it reached, as the
// resolution found it (see [vfs.StatResolver]).
func (o *Overlay) ResolveStat(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, vfs.Info, error) {
	return o.resolveStat(ctx, vfs.Root, p, follow)
}

// resolveStat is ResolveStat beneath directory top (see resolveAt).
func (o *Overlay) resolveStat(ctx context.Context, top, p vfs.Path, follow bool) (vfs.Location, vfs.Info, error) {
	res, loc, err := o.resolveAt(ctx, top, p, follow, "resolve")
	if err != nil || !loc.Found {
		return loc, vfs.Info{}, err
	}
	if res.Node.root {
		_, info, err := o.layer(ctx, "stat", res.Node.p)
		if err != nil {
			return vfs.Location{}, vfs.Info{}, err
		}
		return loc, info, nil
	}
	return loc, res.Node.info, nil
}

// ResolveOpen resolves p, lets decide rule on the location, and opens for
// reading the entry the resolution reached, in the layer it was found in
// (see [vfs.OpenResolver]).
func (o *Overlay) ResolveOpen(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) (vfs.File, vfs.Location, error) {
	return o.resolveOpen(ctx, vfs.Root, p, decide)
}

// resolveOpen is ResolveOpen beneath directory top (see resolveAt): decide
// sees the Location relative to top.
func (o *Overlay) resolveOpen(ctx context.Context, top, p vfs.Path, decide func(vfs.Location) error) (vfs.File, vfs.Location, error) {
	gen := o.readers.copies.Load()
	res, loc, err := o.resolveAt(ctx, top, p, true, "resolve")
	if err != nil {
		return nil, vfs.Location{}, err
	}
	if err := decide(loc); err != nil {
		return nil, loc, err
	}
	at := top.Join(loc.Path)
	var f vfs.File
	switch {
	case !loc.Found || res.Node.root:
		f, err = o.OpenFile(ctx, at, os.O_RDONLY, 0)
	case res.Node.inUpper:
		f, err = o.upperFile(o.upper.OpenFile(ctx, at, os.O_RDONLY, 0))
	default:
		f, err = o.openLower(ctx, at, res.Node.info, gen, os.O_RDONLY, 0)
	}
	if err != nil {
		if e, ok := err.(*vfs.Error); ok && e.Path == at.String() {
			e.Path = p.String()
		}
		return nil, loc, err
	}
	return f, loc, nil
}
