package dir

import (
	"context"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// Canonical decisions. With a policy or hooks to serve, every call resolves each
// path it touches to the location it really reaches (vfs.Backend.Resolve: symlinks
// followed the way the operation follows them, ".." in link targets taken
// physically, mounts mapped) and the policy decides on that canonical path as well
// as on the path the guest wrote: a refusal of either refuses the call. The backend
// then acts on the canonical path, marked Resolved, so it follows nothing again: a
// symlink swapped in after the decision makes the call fail with conflict, never
// reach something undecided. A pinned capability (Sub, OpenDir, File) decides on
// where its directory is now (vfs.Locator), not where it was when pinned.

// follow says how an operation treats the final component of its path.
type follow uint8

const (
	// followFinal follows a final symlink (Stat, ReadFile, Open, Chmod, Sub, ...).
	followFinal follow = iota
	// followNone does not follow it, but a trailing slash does, as in POSIX path
	// resolution (Lstat, Exists, Readlink).
	followNone
	// followEntry acts on the entry itself even with a trailing slash, which the
	// backend then checks against it (Mkdir, Remove, Rename, Symlink, Link,
	// O_CREATE|O_EXCL).
	followEntry
)

// treeLocks maps a root backend to the lock its Dirs share, so Dirs made by
// separate New calls over one Namespace serialize their structural changes too.
// An entry lives while some env made by New over that backend does.
var (
	treeLocksMu sync.Mutex
	treeLocks   = map[vfs.Backend]*treeLockEntry{}
)

type treeLockEntry struct {
	mu   sync.RWMutex
	refs int
}

// treeLock returns the lock shared by every env over root b, and holds a
// reference for e, released once e is unreachable.
func treeLock(e *env, b vfs.Backend) *sync.RWMutex {
	if !hashable(b) {
		return new(sync.RWMutex)
	}
	treeLocksMu.Lock()
	defer treeLocksMu.Unlock()
	ent := treeLocks[b]
	if ent == nil {
		ent = &treeLockEntry{}
		treeLocks[b] = ent
	}
	ent.refs++
	runtime.AddCleanup(e, releaseTreeLock, b)
	return &ent.mu
}

func releaseTreeLock(b vfs.Backend) {
	treeLocksMu.Lock()
	defer treeLocksMu.Unlock()
	if ent := treeLocks[b]; ent != nil {
		if ent.refs--; ent.refs <= 0 {
			delete(treeLocks, b)
		}
	}
}

// hashable reports whether b can be a map key (its dynamic type is comparable).
func hashable(b vfs.Backend) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_ = b == b //nolint:staticcheck // the comparison panics for an uncomparable type
	return true
}

// pin makes b, pinned at tree path base, the scope's storage. If b can say where
// it is (vfs.Locator), pin asks it now and keeps the part of base its answer does
// not cover (the mount point, or the path of the backend the Locator counts from):
// later answers re-based there are b's tree path after any move. An answer that
// does not end base (a Locator counting from somewhere else) is not used.
func (s *scope) pin(ctx context.Context, b vfs.Backend, base vfs.Path) {
	s.setBackend(b)
	s.base, s.locates, s.locPrefix = base, false, vfs.Path{}
	l, ok := b.(vfs.Locator)
	if !ok {
		return
	}
	at, err := l.Locate(ctx)
	if err != nil {
		return
	}
	full, rel := base.Raw(), at.Unresolved().Raw()
	switch {
	case rel == "":
		s.locPrefix = base
	case full == rel:
		s.locPrefix = vfs.Root
	case strings.HasSuffix(full, "/"+rel):
		s.locPrefix = vfs.MustParse(full[:len(full)-len(rel)-1])
	default:
		return
	}
	s.locates = true
}

// where returns the current path of the scope's root from the tree's root: for a
// pinned capability whose backend can say where it is, where its directory is now;
// else the path it was pinned at.
func (s *scope) where(ctx context.Context) (vfs.Path, error) {
	if !s.locates {
		return s.base, nil
	}
	p, err := s.b.(vfs.Locator).Locate(ctx)
	if err != nil {
		return vfs.Path{}, vfs.NewError(vfs.CodeNotFound, "locate", vfs.Root, "the capability's directory is no longer in the tree")
	}
	return s.locPrefix.Join(p.Unresolved()).Unresolved(), nil
}

// canon returns the canonical path p reaches in the scope's backend, marked
// Resolved, with p's trailing-slash mark. A path whose parent directories do not
// all exist yet resolves as far as they do, the missing names appended as written
// (they hold no symlink, since they do not exist): that is where a creation would
// land, and where MkdirAll's directories will be. A path running through a file
// resolves the same way, to the file's canonical path and the names after it; the
// operation then fails as it would have (not_a_directory), after the decision.
func (s *scope) canon(ctx context.Context, p vfs.Path, f follow) (vfs.Path, error) {
	q, _, err := s.canonStat(ctx, p, f, nil)
	return q, err
}

// infoState says what a resolution asked for a status (spec.status) learnt
// of what the path reaches.
type infoState uint8

const (
	infoNone   infoState = iota // nothing: the operation looks it up
	infoFilled                  // its status, from the lookup that resolved it
	infoAbsent                  // nothing is there (the parent resolved, the name did not)
	infoKept                    // its status, the backend's own (call.kept; see keptStater)
)

// canonStat is canon that, when info is not nil, also fills it with the status of
// what p reaches, from the same lookup where the backend offers one
// (vfs.StatResolver); st says whether it did (p reaches an existing entry) or
// found that p reaches nothing.
func (s *scope) canonStat(ctx context.Context, p vfs.Path, f follow, info *vfs.Info) (q vfs.Path, st infoState, err error) {
	if p.IsResolved() {
		return p, infoNone, nil
	}
	q = p
	if f == followEntry {
		q = p.WithoutDirMark()
	}
	if info == nil && s.free != nil && s.free.LinkFree() {
		// No symlink anywhere: p is where it leads, as Resolve would say.
		return q.Resolved().WithDirMark(p.MustBeDir()), infoNone, nil
	}
	fol := f == followFinal || (f == followNone && p.MustBeDir())
	var loc vfs.Location
	if info != nil {
		var got vfs.Info
		loc, got, err = vfs.ResolveStat(ctx, s.b, q, fol)
		switch {
		case err != nil:
		case loc.Found:
			*info, st = got, infoFilled
		default:
			st = infoAbsent
		}
	} else {
		loc, err = s.b.Resolve(ctx, q, fol)
	}
	if err != nil {
		if loc.Path, err = s.canonMissing(ctx, q, err); err != nil {
			return vfs.Path{}, infoNone, err
		}
	}
	return loc.Path.WithDirMark(p.MustBeDir()), st, nil
}

// canonMissing is where q would be when resolving it failed with err: for a
// missing parent, or one that is not a directory, the parent's canonical path
// and q's name, so a refused place answers the same whatever does or does not
// exist beneath it. Any other failure is err.
func (s *scope) canonMissing(ctx context.Context, q vfs.Path, err error) (vfs.Path, error) {
	if c := codeOf(err); (c != vfs.CodeNotFound && c != vfs.CodeNotDir) || q.IsRoot() {
		return vfs.Path{}, err
	}
	parent, perr := s.canon(ctx, q.Dir().WithoutDirMark(), followFinal)
	if perr != nil {
		return vfs.Path{}, err
	}
	r, cerr := parent.Child(q.Base())
	if cerr != nil {
		return vfs.Path{}, err
	}
	// A dangling link whose target's directory is missing: the entry itself
	// exists, so the operation reports what it reports (not_found).
	if l, lerr := s.b.Resolve(ctx, r, false); lerr == nil && l.Found {
		return vfs.Path{}, err
	}
	return r, nil
}

// linkFreer is a backend that can say it holds no symlink at all
// (memory.FS.LinkFree): then every path is its own canonical path, and
// canonStat needs no lookup to say so.
type linkFreer interface {
	LinkFree() bool
}

// decideBoth asks the policy about r as given (its Path and Dest being the
// canonical paths) and, where the guest's own paths differ, about those too. ok is
// false if either is refused; d is the refusing decision (or the canonical one).
func (e *env) decideBoth(ctx context.Context, r *policy.Request, lexPath, lexDest string) (policy.Decision, bool) {
	d, ok := e.decide(ctx, r)
	if !ok || (lexPath == r.Path && lexDest == r.Dest) {
		return d, ok
	}
	lr := *r
	lr.Path, lr.Dest = lexPath, lexDest
	if ld, lok := e.decide(ctx, &lr); !lok {
		return ld, false
	}
	return d, ok
}

// openFollow is how an open treats a final symlink: O_CREATE|O_EXCL does not
// follow it (already_exists, even for a dangling link); every other open does.
func openFollow(flag int) follow {
	if flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL {
		return followEntry
	}
	return followFinal
}

// allowLink decides a symlink that a composite call (Copy, a copying Move) is
// about to recreate at link with the given target text: as a Symlink call would
// be, its target decided both as written and where it leads from link's place
// (a target that leaves the tree is data: the link's name alone is decided).
func (s *scope) allowLink(ctx context.Context, c *call, method string, link vfs.Path, target string) error {
	q, leaves, err := s.linkTarget(link, target)
	if err != nil {
		return at(vfs.Readdress(err, method, link.String(), ""), method, link)
	}
	if !s.env.customPolicy {
		return nil
	}
	r := *c.req
	r.Op = policy.OpSymlink
	lexPath := c.base.Join(link.WithoutDirMark().Unresolved()).String()
	lexDest := ""
	r.Path, r.Dest, r.GuestPath, r.Size = lexPath, "", link.String(), -1
	if !leaves {
		lexDest = c.base.Join(q.Unresolved()).String()
		r.Dest = lexDest
		if rq, err := s.canon(ctx, q, followFinal); err == nil {
			r.Dest = c.base.Join(rq.WithoutDirMark().Unresolved()).String()
		}
	}
	d, ok := s.env.decideBoth(ctx, &r, lexPath, lexDest)
	if !ok {
		c.noteInner(d)
		return innerDenied(method, link, d)
	}
	return nil
}

// allowSize decides a write that leaves size bytes in file p (an Append, a file a
// Copy creates), so the policy's size limit holds for them as for WriteFile. The
// size is taken before the write: appends racing each other are each decided on
// what they saw.
func (s *scope) allowSize(ctx context.Context, c *call, method string, op policy.Op, p vfs.Path, size int64) error {
	if !s.env.customPolicy || c.req == nil {
		return nil
	}
	r := *c.req
	r.Op, r.Dest, r.Size = op, "", size
	r.Path = c.base.Join(p.WithoutDirMark().Unresolved()).String()
	if d, ok := s.env.decide(ctx, &r); !ok {
		c.noteInner(d)
		return innerDenied(method, p, d)
	}
	return nil
}

// appendSize is the size file p will have after appending n bytes (n for a file
// not there yet).
func appendSize(ctx context.Context, b vfs.Backend, p vfs.Path, n int) int64 {
	info, err := b.Stat(ctx, p)
	if err != nil {
		return int64(n)
	}
	return info.Size + int64(n)
}

// relRoot is the root of the relative paths a composite call builds beneath p (the
// entries it lists, the directories it creates): Resolved when p is, since each
// name it appends is an entry of a real directory or one the call creates, so the
// backend follows no link there either.
func relRoot(p vfs.Path) vfs.Path {
	if p.IsResolved() {
		return vfs.Root.Resolved()
	}
	return vfs.Root
}

// opFollow is how the call behind a policy op treats a final symlink (Dir.Check
// resolves as that call would).
func opFollow(op policy.Op) follow {
	switch op {
	case policy.OpRemove, policy.OpRename, policy.OpSymlink, policy.OpLink, policy.OpMkdir, policy.OpCreate, policy.OpCopy:
		return followEntry
	case policy.OpReadlink:
		return followNone
	}
	return followFinal
}

// openRead opens c's path for reading. A fused call (c.ad set by step 4)
// resolves, decides and opens in one backend call (vfs.ResolveOpen): admit
// decides on the canonical location and runs the Before hooks between the
// resolution and the open, and the backend opens the very object decided on.
// Any other call opens c.rp.
func (s *scope) openRead(ctx context.Context, c *call) (vfs.File, error) {
	if c.ad == nil {
		return s.b.OpenFile(ctx, c.rp, os.O_RDONLY, 0)
	}
	return fusedCall(ctx, s, c, func(decide func(vfs.Location) error) (vfs.File, error) {
		f, _, err := vfs.ResolveOpen(ctx, s.b, c.p, decide)
		return f, err
	})
}

// readDir lists c's directory. A fused call (c.ad set by step 4) resolves,
// decides and lists in one backend call (vfs.ResolveReadDir), as openRead does
// for reads; any other call lists c.rp.
func (s *scope) readDir(ctx context.Context, c *call) ([]vfs.DirEntry, error) {
	if c.ad == nil {
		return s.b.ReadDir(ctx, c.rp)
	}
	return fusedCall(ctx, s, c, func(decide func(vfs.Location) error) ([]vfs.DirEntry, error) {
		ents, _, err := vfs.ResolveReadDir(ctx, s.b, c.p, decide)
		return ents, err
	})
}

// fusedCall runs the backend call of a fused read (act: vfs.ResolveOpen or
// vfs.ResolveReadDir), whose decision callback admit makes: it decides on the
// canonical location and runs the Before hooks between the resolution and the
// action, on the very object the backend then acts on. Where the resolution
// fails before reaching a decision (a missing or non-directory parent), the call
// decides on where the path would lead, as an unfused call does, so a refused
// place answers the same refusal whether or not something exists beneath it.
func fusedCall[T any](ctx context.Context, s *scope, c *call, act func(decide func(vfs.Location) error) (T, error)) (T, error) {
	// The resolution's callback (h.decide) works on the admission's copy of
	// what admit needs of c (h.args), so that c itself never escapes to the
	// heap, and records what it did in h.
	h := c.ad
	h.ctx = ctx
	v, err := act(h.decide)
	c.rp = h.args.rp
	var zero T
	switch {
	case err == nil:
		return v, nil
	case h.decided && err == h.aerr:
		return zero, &addressed{err}
	case !h.decided:
		if rp, cerr := s.canon(ctx, c.p, followFinal); cerr == nil {
			c.rp, h.args.rp = rp, rp
			if aerr := h.admit(ctx, &h.args); aerr != nil {
				return zero, &addressed{aerr}
			}
		}
	}
	return zero, err
}
