package dir

import (
	"context"
	"strings"
	"sync"

	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// GitGuardOption configures GitGuard.
type GitGuardOption func(*gitGuard)

// GitGuardAllowDotGit leaves writes inside a git dir named ".git" (and the git
// dirs beneath one: .git/modules/*, .git/worktrees/*) to the policy, for a host
// that lets guests write there (policy.Config.AllowGitWrites, which still denies
// hooks and git's configuration). Git dirs under any other name stay guarded.
func GitGuardAllowDotGit() GitGuardOption {
	return func(g *gitGuard) { g.allowDotGit = true }
}

// GitGuard returns a Hook that keeps guests from making or changing a git
// directory under a name the policy's patterns do not know. git takes a directory
// for a git dir when it holds HEAD, objects/ and refs/ (or HEAD and a commondir
// file naming a directory that holds the other two): the host's git discovers
// such a directory as a bare repository when run inside it, and a ".git" file
// ("gitdir: ../x") can point at one. Its config and hooks then run on the host
// (core.fsmonitor on git status, core.pager, hooks on commit).
//
// root is the backend the capability tree is rooted at (the one given to New):
// the guard reads it, not through the Dir, to see what is there. A Request's
// Path and Dest are taken from that root.
//
// The hook refuses, with fs_permission_denied, every writing request (every op
// for which policy.Op.Writes reports true) that
//
//   - touches a path inside a directory laid out as a git dir, or that directory
//     itself (writing, creating, removing, renaming from or to, linking,
//     chmod, chtimes; the ancestors are checked up to the root);
//   - would complete such a layout: creating (or renaming, linking, symlinking or
//     copying to) an entry named HEAD, objects, refs or commondir, at the end of
//     the path or as a directory on the way to it (MkdirAll), in a directory that
//     would then be laid out as a git dir (case folded: "head" counts as HEAD);
//   - copies a git dir, or a directory holding one at any depth (copying a file
//     out of one is left to the policy), or renames a git dir (a directory whose
//     contents already complete the layout);
//   - makes a symlink whose target is a git dir or lies inside one.
//
// Intermediate symlinks are followed (the guard lstats through them), and for the
// operations that follow a final symlink (write, create, chmod, chtimes, copy's
// destination) the path the link leads to is checked too; a Dir that decides on
// canonical paths sends them anyway.
//
// Requests that could complete a layout (renames, copies, and those whose paths
// have an element named HEAD, objects, refs or commondir) hold a lock from Before
// to After, so two of them cannot each see the other's half missing; waiting for
// it ends with the request's context. Other writes take no lock: they cannot
// complete a layout. A request without an ID takes no lock either (a Dir always
// sets one), and a caller other than a Dir must call After once Before allowed.
//
// What it does not cover: git dirs made outside capfs (by the host, or present
// before the guest got the capability) are guarded from then on, but a directory
// holding one deeper down can still be moved or removed as a whole (moving does
// not create a git dir; the policy protects ".git" names wherever they go).
// Content is not inspected: a HEAD that git would reject still counts.
//
// Dir.Check runs no hooks: a sync-back validates its changes without the guard and
// meets its refusal when applying the one that would complete a layout (the
// changes applied before it leave an incomplete layout, which git ignores).
//
// Each writing request costs one Lstat per directory on its path (HEAD), and a few
// more beside a HEAD. The Hook is safe for concurrent use. Its name in audit
// events is "hook:gitguard".
func GitGuard(root vfs.Backend, opts ...GitGuardOption) Hook {
	g := &gitGuard{root: root, sem: make(chan struct{}, 1)}
	for _, o := range opts {
		if o != nil {
			o(g)
		}
	}
	return g
}

type gitGuard struct {
	root        vfs.Backend
	allowDotGit bool
	// sem is held from Before to After by requests that could complete a layout
	// (a channel, so that waiting for it honours the request's context); held
	// records their request IDs.
	sem  chan struct{}
	held sync.Map
}

// Name names the hook in audit events.
func (g *gitGuard) Name() string { return "gitguard" }

// gitNames are the entries whose presence makes a directory a git dir.
var gitNames = [...]string{"HEAD", "objects", "refs", "commondir"}

func isGitName(name string) bool {
	for _, n := range gitNames {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return false
}

// errGitDir is the refusal. It names no path: the Dir addresses it to the guest's.
func errGitDir(what string) error {
	return vfs.NewError(vfs.CodePermission, "gitguard", vfs.Root,
		what+": git would run its configuration and hooks on the host")
}

// Before implements Hook.
func (g *gitGuard) Before(ctx context.Context, r *policy.Request) error {
	if r == nil || !r.Op.Writes() {
		return nil
	}
	if g.mayComplete(r) && r.ID != "" {
		select {
		case g.sem <- struct{}{}:
		case <-ctx.Done():
			return &vfs.Error{Code: vfs.CodeCanceled, Op: "gitguard", Err: ctx.Err()}
		}
		if err := g.check(ctx, r); err != nil {
			<-g.sem
			return err
		}
		g.held.Store(r.ID, struct{}{})
		return nil
	}
	return g.check(ctx, r)
}

// After implements Hook.
func (g *gitGuard) After(_ context.Context, r *policy.Request, _ error) {
	if r == nil || r.ID == "" {
		return
	}
	if _, ok := g.held.LoadAndDelete(r.ID); ok {
		<-g.sem
	}
}

// mayComplete reports whether r could make a directory laid out as a git dir.
func (g *gitGuard) mayComplete(r *policy.Request) bool {
	if r.Op == policy.OpRename || r.Op == policy.OpCopy {
		return true
	}
	return hasGitName(r.Path) || hasGitName(r.Dest)
}

func hasGitName(p string) bool {
	for p != "" {
		var el string
		el, p, _ = strings.Cut(p, "/")
		if isGitName(el) {
			return true
		}
	}
	return false
}

// follows reports whether op acts on what a final symlink leads to.
func follows(op policy.Op) bool {
	switch op {
	case policy.OpWrite, policy.OpCreate, policy.OpChmod, policy.OpChtimes, policy.OpChown, policy.OpCopy:
		return true
	}
	return false
}

// check decides r.
func (g *gitGuard) check(ctx context.Context, r *policy.Request) error {
	if r.Op == policy.OpCopy {
		// The source is read; what it holds is recreated at the destination.
		src, err := vfs.ParseGuest(r.Path)
		if err != nil {
			return errGitDir("unreadable path")
		}
		if err := g.checkCopySource(ctx, src, 0); err != nil {
			return err
		}
	} else if err := g.checkPath(ctx, r.Path, follows(r.Op)); err != nil {
		return err
	}
	if r.Dest != "" {
		// The second end: the new name of a rename, link or copy, or a symlink's target.
		if err := g.checkPath(ctx, r.Dest, r.Op == policy.OpCopy); err != nil {
			return err
		}
	}
	return nil
}

// checkPath checks a tree path, and where follow is set, the path its final
// symlink leads to.
func (g *gitGuard) checkPath(ctx context.Context, s string, follow bool) error {
	p, err := vfs.ParseGuest(s)
	if err != nil {
		return errGitDir("unreadable path")
	}
	p = p.WithoutDirMark()
	if err := g.checkPrefixes(ctx, p); err != nil {
		return err
	}
	if !follow || p.IsRoot() {
		return nil
	}
	loc, err := g.root.Resolve(ctx, p, true)
	if err != nil {
		return nil // the operation fails the same way
	}
	if q := loc.Path.Unresolved().WithoutDirMark(); !q.Equal(p) {
		return g.checkPrefixes(ctx, q)
	}
	return nil
}

// checkPrefixes refuses p if the root, a directory on the way to p, or p itself is
// laid out as a git dir, or if p or a directory on the way is named like a git
// dir's entry and its parent would be one with it.
func (g *gitGuard) checkPrefixes(ctx context.Context, p vfs.Path) error {
	cur := vfs.Root
	inDotGit := false
	if err := g.refuseLaidOut(ctx, cur, "", inDotGit); err != nil {
		return err
	}
	for _, el := range p.Elems() {
		parent := cur
		next, err := cur.Child(el)
		if err != nil {
			return errGitDir("unreadable path")
		}
		cur = next
		if isGitName(el) {
			if err := g.refuseLaidOut(ctx, parent, el, inDotGit); err != nil {
				return err
			}
		}
		if g.allowDotGit && strings.EqualFold(el, ".git") {
			inDotGit = true
		}
		if err := g.refuseLaidOut(ctx, cur, "", inDotGit); err != nil {
			return err
		}
	}
	return nil
}

func (g *gitGuard) refuseLaidOut(ctx context.Context, d vfs.Path, assume string, inDotGit bool) error {
	if inDotGit {
		return nil
	}
	laid, err := g.laidOut(ctx, d, assume)
	switch {
	case err != nil:
		return err
	case laid && assume != "":
		return errGitDir("this would complete a directory laid out as a git dir (HEAD, objects, refs)")
	case laid:
		return errGitDir("this is inside a directory laid out as a git dir (HEAD, objects, refs)")
	}
	return nil
}

// laidOut reports whether directory d holds HEAD and either commondir or both
// objects and refs, counting assume as present. HEAD is looked at first: most
// directories have none.
func (g *gitGuard) laidOut(ctx context.Context, d vfs.Path, assume string) (bool, error) {
	for _, name := range [...]string{"HEAD", "commondir", "objects", "refs"} {
		ok, err := g.has(ctx, d, name, assume)
		if err != nil {
			return false, err
		}
		switch {
		case name == "HEAD" && !ok:
			return false, nil
		case name == "commondir" && ok:
			return true, nil
		case name != "HEAD" && name != "commondir" && !ok:
			return false, nil
		}
	}
	return true, nil
}

// has reports whether d/name exists (as anything, a dangling symlink included).
func (g *gitGuard) has(ctx context.Context, d vfs.Path, name, assume string) (bool, error) {
	if strings.EqualFold(name, assume) {
		return true, nil
	}
	if len(d.String())+1+len(name) > vfs.MaxPathLen {
		// No path that long can be named, so none is there, nor can be made
		// (d is a file about to be created at the longest path there is).
		return false, nil
	}
	p, err := d.Child(name)
	if err != nil {
		return false, errGitDir("unreadable path")
	}
	_, err = g.root.Lstat(ctx, p)
	switch vfs.CodeOf(err) {
	case "":
		return true, nil
	case vfs.CodeNotFound, vfs.CodeNotDir, vfs.CodeOutside, vfs.CodeTooManyLinks:
		return false, nil // d is no directory here; the operation fails on its own
	case vfs.CodeCanceled:
		return false, err
	}
	return false, errGitDir("cannot tell whether a directory on the path is laid out as a git dir")
}

// maxCopyDepth bounds the walk of a copied directory; deeper trees are refused.
const maxCopyDepth = 256

// checkCopySource refuses copying a git dir or a directory holding one at any
// depth. Copying a file out of a git dir makes no git dir and is left to the policy.
func (g *gitGuard) checkCopySource(ctx context.Context, src vfs.Path, depth int) error {
	if depth == 0 {
		src = src.WithoutDirMark()
		info, err := g.root.Lstat(ctx, src)
		if err != nil || !info.Mode.IsDir() {
			return nil // a file, a symlink (copied as a link) or an error the copy reports
		}
	}
	if depth > maxCopyDepth {
		return errGitDir("the copied tree is too deep to check for git dirs")
	}
	ents, err := g.root.ReadDir(ctx, src)
	if err != nil {
		return nil // the copy reports it
	}
	var head, common, objects, refs bool
	for _, e := range ents {
		switch {
		case strings.EqualFold(e.Name, "HEAD"):
			head = true
		case strings.EqualFold(e.Name, "commondir"):
			common = true
		case strings.EqualFold(e.Name, "objects"):
			objects = true
		case strings.EqualFold(e.Name, "refs"):
			refs = true
		}
	}
	if head && (common || objects && refs) && !(g.allowDotGit && strings.EqualFold(src.Base(), ".git")) {
		return errGitDir("the copy would make a directory laid out as a git dir (HEAD, objects, refs)")
	}
	for _, e := range ents {
		if !e.Type.IsDir() {
			continue
		}
		sub, err := src.Child(e.Name)
		if err != nil {
			continue // a name the Dir cannot address is not copied
		}
		if err := g.checkCopySource(ctx, sub, depth+1); err != nil {
			return err
		}
	}
	return nil
}
