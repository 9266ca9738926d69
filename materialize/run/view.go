//go:build linux

package run

import (
	"context"
	"strings"

	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// ViewPolicy is the policy and hook of a lazy mount's view of the work tree,
// mirroring the source's policy as a checkout does.
//
// As a hook it refuses with read_only (EROFS inside, as a checkout's
// read-only binds do) every write Inner denies, asked with the source's path
// (Root is the work tree's path there; an Ask lets the call through, the
// sync-back asks again), and every write to a .git. As a policy it leaves
// reads to the source Dir beneath (which applies its own policy to them) but
// denies everything beneath a .git that Git does not show. Given to
// [StartLazy], it also leaves the names Inner denies out of listings.
type ViewPolicy struct {
	Inner policy.Policy
	Root  string
	Git   *GitView // the work root's .git, when shown
}

// Decide is the view's policy.
func (p ViewPolicy) Decide(ctx context.Context, r *policy.Request) policy.Decision {
	if BeneathGit(r.Path) && !p.Git.Shows(r.Path) {
		return policy.Decision{Effect: policy.Deny, Rule: "lazy:git-hidden", Reason: "this git history is not shown in the sandbox (see the run's summary)"}
	}
	return policy.Decision{Effect: policy.Allow, Rule: "lazy:view"}
}

// Before refuses the writes the source would refuse.
func (p ViewPolicy) Before(ctx context.Context, r *policy.Request) error {
	if !r.Op.Writes() {
		return nil
	}
	if InGit(r.Path) || (r.Dest != "" && InGit(r.Dest)) {
		return vfs.NewError(vfs.CodeReadOnly, string(r.Op), vfs.Root, "git directories are read-only in the sandbox")
	}
	if p.Inner == nil {
		return nil
	}
	q := *r
	q.Path, q.Dest = p.Join(r.Path), ""
	if r.Dest != "" {
		q.Dest = p.Join(r.Dest)
	}
	if d := p.Inner.Decide(ctx, &q); d.Effect == policy.Deny {
		return vfs.NewError(vfs.CodeReadOnly, string(r.Op), vfs.Root, "the policy refuses this write ("+d.Rule+")")
	}
	return nil
}

// After does nothing.
func (p ViewPolicy) After(context.Context, *policy.Request, error) {}

// Join returns the source's path of rel, a path from the work tree's root.
func (p ViewPolicy) Join(rel string) string {
	switch {
	case p.Root == "" || p.Root == ".":
		return rel
	case rel == "" || rel == ".":
		return p.Root
	}
	return p.Root + "/" + rel
}

// GitView is a lazy view's decision on the work root's .git: shown
// (read-only) or not.
//
// When shown with a fingerprint, Objects lists the entries beneath its
// objects/ and modules/ the history scan covered.
type GitView struct {
	Shown   bool
	Objects map[string]bool // nil: no limit
}

// Shows reports whether the view shows p, a path from the work root that lies
// in or beneath a .git: only what lies in the root's .git, when shown.
func (g *GitView) Shows(p string) bool {
	if g == nil || !g.Shown {
		return false
	}
	rel, ok := strings.CutPrefix(p, ".git/")
	if !ok {
		return p == ".git"
	}
	if InGit(rel) || !materialize.GitShows(rel) {
		return false
	}
	if g.Objects != nil && (rel == "objects" || rel == "modules" || strings.HasPrefix(rel, "objects/") || strings.HasPrefix(rel, "modules/")) {
		return g.Objects[rel]
	}
	return true
}

// InGit reports whether a component of p is ".git".
//
// It allocates nothing: the lazy view's policy asks it at every call.
func InGit(p string) bool {
	for c := range strings.SplitSeq(p, "/") {
		if c == ".git" {
			return true
		}
	}
	return false
}

// BeneathGit reports whether p lies beneath a ".git" component: whether a
// component of p's parent is.
func BeneathGit(p string) bool {
	i := strings.LastIndexByte(p, '/')
	return i >= 0 && InGit(p[:i])
}

// hidingLower is the work Dir's backend view with the names the view's
// policy denies left out of listings, as a checkout leaves them out (the Dir
// refuses every call on them; its listings name them unless the policy hides
// secrets), and every .git listed empty unless the view shows it.
//
// It keeps the optional interfaces of vfs.Optionals that a lower layer may
// offer: the read-side ones forward to the view (listings less what it hides),
// vfs.StatFSer among them. It withholds four: HostPather, since binding the
// host directory would show what it hides; Chowner and LinkTimer, since a
// lower layer is only read and changes go back through the sync-back's
// review; and Locator, which the Dir's view beneath withholds.
type hidingLower struct {
	vfs.Backend
	view ViewPolicy
}

// ResolveStat resolves p in the work Dir's view in one call where it can
// (vfs.StatResolver): the names hidingLower leaves out of listings are
// resolved as Lstat finds them, so the answer is Lstat's.
func (h hidingLower) ResolveStat(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, vfs.Info, error) {
	return vfs.ResolveStat(ctx, h.Backend, p, follow)
}

func (h hidingLower) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	return hideEntries(ctx, h, p, vfs.ReadDir, func(e vfs.DirEntry) string { return e.Name })
}

// ReadDirInfo is ReadDir with each entry's status, read in one pass where the
// work Dir's view can (vfs.DirInfoReader).
func (h hidingLower) ReadDirInfo(ctx context.Context, p vfs.Path) ([]vfs.DirInfo, error) {
	return hideEntries(ctx, h, p, vfs.ReadDirInfo, func(e vfs.DirInfo) string { return e.Name })
}

// ResolveReadDir is ReadDir through the view's fused call (vfs.ListResolver):
// decide rules on the location listed.
func (h hidingLower) ResolveReadDir(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) ([]vfs.DirEntry, vfs.Location, error) {
	var loc vfs.Location
	ents, err := hideEntries(ctx, h, p, func(ctx context.Context, b vfs.Backend, p vfs.Path) ([]vfs.DirEntry, error) {
		ents, l, err := vfs.ResolveReadDir(ctx, b, p, decide)
		loc = l
		return ents, err
	}, func(e vfs.DirEntry) string { return e.Name })
	return ents, loc, err
}

// ResolveOpen forwards to the view (vfs.OpenResolver): the Dir beneath refuses
// what the policy denies, hidden names included.
func (h hidingLower) ResolveOpen(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) (vfs.File, vfs.Location, error) {
	return vfs.ResolveOpen(ctx, h.Backend, p, decide)
}

// HostLinkTarget forwards to the view when it is a vfs.HostLinkResolver (ok
// false otherwise).
func (h hidingLower) HostLinkTarget(ctx context.Context, p vfs.Path) (vfs.Path, bool, error) {
	if r, ok := h.Backend.(vfs.HostLinkResolver); ok {
		return r.HostLinkTarget(ctx, p)
	}
	return vfs.Path{}, false, nil
}

// StatFS reports the storage beneath the work Dir's view (vfs.StatFSer): the
// Dir decides p as it decides a stat.
func (h hidingLower) StatFS(ctx context.Context, p vfs.Path) (vfs.FSStat, error) {
	return vfs.StatFS(ctx, h.Backend, p)
}

// hideEntries lists p in h's Backend with list, less the entries h hides.
func hideEntries[E any](ctx context.Context, h hidingLower, p vfs.Path, list func(context.Context, vfs.Backend, vfs.Path) ([]E, error), name func(E) string) ([]E, error) {
	ents, err := list(ctx, h.Backend, p)
	if err != nil {
		return nil, err
	}
	git := InGit(p.String())
	if git && !h.view.Git.Shows(p.String()) {
		return nil, nil
	}
	if h.view.Inner == nil && !git {
		return ents, nil
	}
	out := make([]E, 0, len(ents))
	for _, e := range ents {
		if h.shows(ctx, p, git, name(e)) {
			out = append(out, e)
		}
	}
	return out, nil
}

// shows reports whether entry name of directory p (in a .git, if git) is
// listed: the git view shows it and the source's policy does not deny its
// status.
func (h hidingLower) shows(ctx context.Context, p vfs.Path, git bool, name string) bool {
	c, cerr := p.Child(name)
	if cerr != nil || (git && !h.view.Git.Shows(c.String())) {
		return false
	}
	if h.view.Inner == nil {
		return true
	}
	r := policy.Request{Op: policy.OpStat, Path: h.view.Join(c.String()), GuestPath: c.String(), Size: -1}
	return h.view.Inner.Decide(ctx, &r).Effect != policy.Deny
}
