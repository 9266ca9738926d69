package dir

import (
	"context"
	"errors"
	"io/fs"
	"sync"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

var (
	defaultPolicy = policy.AllowAll
	discardSink   = audit.Discard
)

// scope is what every capability holds: the storage it names and the authority over
// it. Dir is a scope; a File is a scope (its parent directory) plus a leaf; a Handle
// keeps the scope it was opened through. scope values are immutable.
type scope struct {
	env  *env
	gate *gate
	ro   bool        // ReadOnly() attenuation: permanent
	b    vfs.Backend // the storage, rooted at this capability's root (pinned)
	base vfs.Path    // b's root, from the capability tree's root (for policy and audit)
	// locates says b is a vfs.Locator whose answers, re-based at locPrefix, are
	// b's root from the tree's root (see pin).
	locates   bool
	locPrefix vfs.Path
	// stater is b when it answers Stat with a status it keeps (see statAs),
	// asserted once here rather than on every Stat.
	stater fileInfoStater
	// kept is b when it answers a status call's resolution with the status
	// it keeps (see resolveCall).
	kept keptStater
	// regular is b when it reads a regular file whole without a handle (see
	// readRegular).
	regular regularReader
	// free is b when it can say it holds no symlink (see canonStat).
	free linkFreer
	// opens and lists say b resolves, decides and acts in one call for reads
	// (vfs.OpenResolver) and listings (vfs.ListResolver); see fuses.
	opens, lists bool
}

// setBackend makes b the scope's storage.
func (s *scope) setBackend(b vfs.Backend) {
	s.b = b
	s.stater, _ = b.(fileInfoStater)
	s.regular, _ = b.(regularReader)
	s.kept, _ = b.(keptStater)
	s.free, _ = b.(linkFreer)
	_, s.opens = b.(vfs.OpenResolver)
	_, s.lists = b.(vfs.ListResolver)
}

// fuses reports whether the scope's backend runs a fused call of sp (a read or a
// listing) in one call of its own. For a backend that does not, the fused
// form is vfs.ResolveOpen's or vfs.ResolveReadDir's fallback: the very steps
// of an unfused call (resolve, decide, act on the Resolved path), so runFull
// takes those, without the callbacks' allocations.
func (s *scope) fuses(sp *spec) bool {
	switch sp.op {
	case policy.OpRead:
		return s.opens
	case policy.OpList:
		return s.lists
	}
	return true
}

// destKind says how a call's second argument is interpreted.
type destKind uint8

const (
	destNone   destKind = iota
	destPath            // a second guest path (rename, copy, link)
	destTarget          // a symlink target, validated against the link's directory
)

// call is one public call on its way through run: its method's spec and what
// differs from call to call. Callers declare it as a local and hand run a
// closure that reads it: nothing retains a *call after run returns, so it stays
// on the caller's stack.
type call struct {
	sp   *spec
	path string // the guest's path, as written
	dest string // the guest's second path or symlink target
	// size is Request.Size plus one, so that the zero value means unknown (-1).
	size int64
	// innerRule is the rule that refused a path inside a composite call (set by
	// allowInner); the call is then audited as denied by that rule.
	innerRule string
	// prepare, when set, replaces path parsing in step 2 (Glob patterns); it fills
	// the call it was made for.
	prepare func() error
	// ad is set by step 4 for a fused read (sp.fused, on a backend that fuses):
	// step 4 decides on the guest's path, then leaves the canonical decision
	// and the Before hooks to admit, which openRead or readDir calls from
	// inside the resolution (fusedCall).
	ad *fusedAdmission

	p, q vfs.Path // parsed paths, relative to the scope's backend (set by the caller for sp.fixed)
	// rp and rq are the paths the operation acts on: p and q, or with a policy or
	// hooks to serve, their canonical locations, marked Resolved.
	rp, rq vfs.Path
	// base is the scope's root from the tree's root at the time of the call.
	base vfs.Path
	// got says what the resolution of a status call (sp.status) learnt: info,
	// that status, or that nothing is there; or for sp.kept, kept (the
	// backend's own, shared, immutable status, with got infoKept).
	got  infoState
	info vfs.Info
	kept fs.FileInfo
	// req is the request the policy and hooks see, made in step 4 only when the Dir
	// has a custom policy or hooks; nil otherwise.
	req *policy.Request
}

// addressed marks an error that fn has already given its final, guest-facing form
// (an error about a path deeper than the one the guest named, or the guest's own
// callback error). run returns the wrapped error unchanged.
type addressed struct{ err error }

func (a *addressed) Error() string { return a.err.Error() }
func (a *addressed) Unwrap() error { return a.err }

// run is the one enforcement path every public call takes, in this order:
//
//  1. revoked? -> revoked
//  2. parse the guest path(s) -> invalid_path, path_outside_sandbox
//  3. a write op on a read-only or locked capability -> read_only
//  4. the policy decides (Ask goes to the Asker; no Asker denies) -> fs_permission_denied
//  5. hooks' Before, in order; an error refuses the call
//  6. fn, the backend operation
//  7. hooks' After, in reverse order
//  8. exactly one audit event, whatever happened
//
// Errors returned to the guest are *vfs.Error addressed to the paths as the guest
// wrote them (or, from composite operations, to the Dir-relative path that failed).
//
// With the default options (policy.AllowAll, no hooks, audit.Discard) steps 4, 5, 7
// and 8 can neither refuse nor be observed, so run takes a path that skips them:
// no request, no request id, no clock reading, no event. With a policy engine
// alone (a quiet env), a call with nothing inside it to decide takes runQuiet:
// steps 1 to 4 and 6, in a straight line.
func (s *scope) run(ctx context.Context, c *call, fn func(ctx context.Context) error) error {
	e := s.env
	if e.plain {
		st := s.gate.state()
		if st&revokedBit != 0 {
			return errAt(vfs.CodeRevoked, c.sp.method, c.path, c.destForErr(), "capability revoked")
		}
		if _, _, err := s.parse(c); err != nil {
			return err
		}
		if c.sp.writes && (s.ro || st&lockedBit != 0) {
			return errAt(vfs.CodeReadOnly, c.sp.method, c.path, c.destForErr(), "capability is read-only")
		}
		if err := fn(ctx); err != nil {
			return s.address(c, err)
		}
		return nil
	}
	if e.quiet && s.straight(c.sp) {
		return s.runQuiet(ctx, c, fn)
	}
	err := s.runFull(ctx, c, fn)
	if e.quiet {
		// What a quiet call borrowed (see isQuiet), given back here rather
		// than by defers in runFull, whose many returns keep defers off the
		// open-coded path. Nothing holds them once runFull has returned.
		if c.ad != nil {
			c.ad.release()
			c.ad = nil
		}
		if c.req != nil {
			quietRequests.Put(c.req)
			c.req = nil
		}
	}
	return err
}

// straight reports whether a call of sp runs through runQuiet in a quiet env:
// it decides nothing inside it (no request to keep for fn), acts (not a
// Check), and is not a read the backend fuses with its decision.
func (s *scope) straight(sp *spec) bool {
	return !sp.inner && !sp.checkOnly && !(sp.fused && s.fuses(sp))
}

// runQuiet is runFull for a quiet env (only a *policy.Engine sees requests:
// no hooks, no audit, no Asker) and a straight call (see straight): steps 1
// to 4 and 6, the request on the stack, the Engine called directly.
func (s *scope) runQuiet(ctx context.Context, c *call, fn func(ctx context.Context) error) error {
	st := s.gate.state()
	if st&revokedBit != 0 {
		return errAt(vfs.CodeRevoked, c.sp.method, c.path, c.destForErr(), "capability revoked")
	}
	p, q, err := s.parse(c)
	if err != nil {
		return err
	}
	if !c.sp.writes {
		if c.sp.kind == destNone && s.atRoot() {
			return s.decideOne(ctx, c, p, fn)
		}
		return s.decideAct(ctx, c, p, q, fn)
	}
	if s.ro || st&lockedBit != 0 {
		return errAt(vfs.CodeReadOnly, c.sp.method, c.path, c.destForErr(), "capability is read-only")
	}
	// Decide and act under the tree lock, as runFull does.
	if c.sp.structural {
		s.env.tmu.Lock()
		defer s.env.tmu.Unlock()
	} else {
		s.env.tmu.RLock()
		defer s.env.tmu.RUnlock()
	}
	if c.sp.kind == destNone && s.atRoot() {
		return s.decideOne(ctx, c, p, fn)
	}
	return s.decideAct(ctx, c, p, q, fn)
}

// atRoot reports whether the scope's root is the tree's root, pinned (no
// Locator to ask): a path relative to it is its path from the tree's root.
func (s *scope) atRoot() bool { return !s.locates && s.base.IsRoot() }

// decideOne is decideAct for a call with one path on a scope at the tree's
// root (atRoot), in one frame: p, as written, is its own tree path, and so is
// the canonical path it resolves to. It decides both as decideAct does (the
// canonical one only where it differs), then acts.
func (s *scope) decideOne(ctx context.Context, c *call, p vfs.Path, fn func(ctx context.Context) error) error {
	c.base = s.base
	eng := s.env.engine
	path := p.String()
	if !allowsEngine(eng, c.sp, path, "", c.size-1) {
		return s.refuseQuiet(ctx, eng, c, path, "")
	}
	rp, err := s.resolveCall(ctx, c)
	if err != nil {
		return s.address(c, err)
	}
	if rp.Raw() != p.Raw() {
		if canonical := rp.String(); !allowsEngine(eng, c.sp, canonical, "", c.size-1) {
			return s.refuseQuiet(ctx, eng, c, canonical, "")
		}
	}
	if err := fn(ctx); err != nil {
		return s.address(c, err)
	}
	return nil
}

// decideAct is runQuiet's step 4, on the paths as written and on the canonical
// paths they reach, then step 6. p and q are c.p and c.q, as parse returned
// them: the decision reads them from registers, not back from c right after
// parse stored them there (a load spanning several fresh stores stalls).
func (s *scope) decideAct(ctx context.Context, c *call, p, q vfs.Path, fn func(ctx context.Context) error) error {
	base, werr := s.where(ctx)
	if werr != nil {
		return readdress(werr, c.sp.method, c.path, c.destForErr())
	}
	c.base = base
	eng := s.env.engine
	if !allowsLex(eng, c.sp, base, p, q, c.size-1) {
		lexPath, lexDest := treePathsOf(base, p, q, c.sp.kind)
		return s.refuseQuiet(ctx, eng, c, lexPath, lexDest)
	}
	rp, err := s.resolveCall(ctx, c)
	if err != nil {
		return s.address(c, err)
	}
	// A path resolved to itself decides as it did (the tree path depends on
	// the raw path alone).
	if rp.Raw() == p.Raw() && (c.sp.kind == destNone || c.rq.Raw() == q.Raw()) {
		return s.act(ctx, c, fn)
	}
	lexPath, lexDest := treePathsOf(base, p, q, c.sp.kind)
	if path, dest := c.treePaths(); path != lexPath || dest != lexDest {
		if !allowsEngine(eng, c.sp, path, dest, c.size-1) {
			return s.refuseQuiet(ctx, eng, c, path, dest)
		}
	}
	return s.act(ctx, c, fn)
}

// act is step 6: fn, its error given the guest's view.
func (s *scope) act(ctx context.Context, c *call, fn func(ctx context.Context) error) error {
	if err := fn(ctx); err != nil {
		return s.address(c, err)
	}
	return nil
}

// allowsEngine is decideAll's answer for a quiet env, from the Engine called
// directly on the only fields of a request it reads (Engine.AllowsPath): the
// call of sp on path and dest, leaving size bytes, and for an open that also
// reads, the path read.
func allowsEngine(eng *policy.Engine, sp *spec, path, dest string, size int64) bool {
	if !eng.AllowsClass(sp.cls, path, dest, size) {
		return false
	}
	return !sp.alsoRead || sp.op == policy.OpRead || eng.AllowsClass(readClass, path, "", -1)
}

// readClass is the class of policy.OpRead (see allowsEngine).
var readClass = policy.ClassOf(policy.OpRead)

// allowsLex is allowsEngine on a call of sp on p and q (parsed, as the guest
// wrote them), from the tree's root, the scope's root being base there. A
// one-path call beneath the tree's root (a pinned Sub) asks
// Engine.AllowsUnder, which needs the path from the root built only where it
// cannot answer from the walk of the directory it keeps.
func allowsLex(eng *policy.Engine, sp *spec, base, p, q vfs.Path, size int64) bool {
	if sp.kind != destNone || base.IsRoot() {
		path, dest := treePathsOf(base, p, q, sp.kind)
		return allowsEngine(eng, sp, path, dest, size)
	}
	b, rel := base.String(), p.WithoutDirMark().Unresolved().String()
	if !eng.AllowsUnder(sp.op, b, rel, size) {
		return false
	}
	return !sp.alsoRead || sp.op == policy.OpRead || eng.AllowsUnder(policy.OpRead, b, rel, -1)
}

// refuseQuiet is the error of a quiet call of c that allowsEngine refused on
// path and dest: the refusing decision, Ask refused as env.decide refuses it
// without an Asker.
func (s *scope) refuseQuiet(ctx context.Context, eng *policy.Engine, c *call, path, dest string) error {
	r := policy.Request{Subject: s.env.subject, Op: c.sp.op, Path: path, Dest: dest, GuestPath: c.path, Size: c.size - 1}
	d := eng.Decide(ctx, &r)
	if d.Effect == policy.Allow { // the read of an open that also reads refused it
		r.Op, r.Dest, r.Size = policy.OpRead, "", -1
		d = eng.Decide(ctx, &r)
	}
	return errAt(vfs.CodePermission, c.sp.method, c.path, c.destForErr(), denyReason(noAsker(d)))
}

// noAsker is the refusal of d, a decision other than Allow, where no Asker
// settles Ask (see env.decide).
func noAsker(d policy.Decision) policy.Decision {
	if d.Effect == policy.Ask && d.Reason == "" {
		d.Reason = "requires approval, and no approver is configured"
	}
	return d
}

// quietRequests holds the requests of quiet envs' calls (see env.isQuiet),
// reused from call to call.
var quietRequests = sync.Pool{New: func() any { return new(policy.Request) }}

// isQuiet reports whether nothing but e's policy, a *policy.Engine, ever sees
// a call's policy.Request: no hooks, no audit, no Asker. The Engine keeps no
// request and reads no ID, so such a call's request needs no ID and is reused
// once the call returns (runFull).
func (e *env) isQuiet() bool {
	_, engine := e.policy.(*policy.Engine)
	return engine && len(e.hooks) == 0 && !e.audited && e.asker == nil
}

// decideAll decides r, and for an open that also reads, r as a read.
func (e *env) decideAll(ctx context.Context, sp *spec, r *policy.Request) (policy.Decision, bool) {
	d, ok := e.decide(ctx, r)
	if ok && sp.alsoRead && sp.op != policy.OpRead {
		if rd, rok := e.decideAsRead(ctx, r); !rok {
			return rd, false
		}
	}
	return d, ok
}

// decideAsRead decides r as a read (no Dest, size unknown). It is apart from
// decideAll so that decideAll's frame holds no Request to clear.
//
//go:noinline
func (e *env) decideAsRead(ctx context.Context, r *policy.Request) (policy.Decision, bool) {
	if e.quiet {
		// Only the Engine sees r, and keeps nothing: r itself is asked as a
		// read, then restored, rather than copied to the heap.
		saved := *r
		r.Op, r.Dest, r.Size = policy.OpRead, "", -1
		rd, rok := e.decide(ctx, r)
		*r = saved
		return rd, rok
	}
	rr := *r
	rr.Op, rr.Dest, rr.Size = policy.OpRead, "", -1
	return e.decide(ctx, &rr)
}

// resolveCall sets c.rp and c.rq to the canonical locations of c.p and c.q,
// and returns c.rp.
func (s *scope) resolveCall(ctx context.Context, c *call) (vfs.Path, error) {
	if c.sp.kept && s.kept != nil && c.sp.kind == destNone && c.sp.fol != followEntry && !c.p.IsResolved() {
		// The common case of a status call on a backend that keeps its
		// answers: one lookup, no status built (see keptStater).
		fol := c.sp.fol == followFinal || c.p.MustBeDir()
		if loc, fi, ok := s.kept.ResolveKeptStat(ctx, c.p, fol); ok {
			rp := loc.Path.WithDirMark(c.p.MustBeDir())
			c.rp, c.got, c.kept = rp, infoKept, fi
			return rp, nil
		}
	}
	var info vfs.Info
	var want *vfs.Info
	if c.sp.status {
		want = &info
	}
	rp, got, err := s.canonStat(ctx, c.p, c.sp.fol, want)
	if err != nil {
		return vfs.Path{}, err
	}
	c.rp = rp
	if c.sp.status {
		c.got, c.info = got, info
	}
	return rp, s.resolveDest(ctx, c)
}

// resolveDest sets c.rq to the canonical location of c.q, for a call with a
// second path or a symlink target.
func (s *scope) resolveDest(ctx context.Context, c *call) error {
	switch c.sp.kind {
	case destPath:
		fq := c.sp.fol
		if c.sp.op == policy.OpCopy {
			fq = followFinal // Copy writes through a link at its destination, as WriteFile
		}
		rq, err := s.canon(ctx, c.q, fq)
		if err != nil {
			return &addressed{readdress(err, c.sp.method, c.path, c.dest)}
		}
		c.rq = rq
	case destTarget:
		// The link's target: what the new name will reach.
		rq, err := s.canon(ctx, c.q, followFinal)
		if err != nil {
			return err
		}
		c.rq = rq
	}
	return nil
}

// allowAllRule is the rule the default policy names in its decisions.
var allowAllRule = defaultPolicy.Decide(context.Background(), &policy.Request{}).Rule

// parse fills c.p and c.q (step 2), and c.rp and c.rq with the same paths; it
// returns c.p and c.q.
func (s *scope) parse(c *call) (vfs.Path, vfs.Path, error) {
	// The paths are kept in locals and stored once, at the end: read back right
	// after being stored field by field, they stalled the processor (a load
	// spanning several stores cannot be forwarded from them).
	p, q := c.p, c.q
	switch {
	case c.prepare != nil:
		if err := c.prepare(); err != nil {
			return vfs.Path{}, vfs.Path{}, err
		}
		p, q = c.p, c.q
	case !c.sp.fixed:
		raw := c.path
		if raw == "" && c.sp.emptyIsDot {
			raw = "."
		}
		var err error
		if p, err = vfs.ParseGuest(raw); err != nil {
			// A parse error already names the guest's path, printable.
			return vfs.Path{}, vfs.Path{}, vfs.Reop(err, c.sp.method)
		}
		if c.sp.single && !vfs.ValidName(raw) {
			return vfs.Path{}, vfs.Path{}, errAt(vfs.CodeInvalidPath, c.sp.method, raw, "", "a single name is required here (no \"/\")")
		}
		if c.sp.kind == destPath {
			if q, err = vfs.ParseGuest(c.dest); err != nil {
				return vfs.Path{}, vfs.Path{}, reopDest(err, c.sp.method, c.path)
			}
		}
	}
	if c.sp.kind == destTarget {
		var leaves bool
		var err error
		if q, leaves, err = s.linkTarget(p, c.dest); err != nil {
			return vfs.Path{}, vfs.Path{}, readdress(err, c.sp.method, c.path, "")
		}
		if leaves {
			c.sp = dataLinkSpec(c.sp)
		}
	}
	c.p, c.q, c.rp, c.rq = p, q, p, q
	return p, q, nil
}

// treePaths returns the parsed paths of c from the capability tree's root, as the
// policy and the audit trail see them.
func (s *scope) treePaths(c *call) (path, dest string) {
	path = s.treePath(c.p)
	if c.sp.kind != destNone {
		dest = s.treePath(c.q)
	}
	return path, dest
}

// treePaths returns the paths c acts on (rp, rq) from the tree's root at c.base.
func (c *call) treePaths() (path, dest string) {
	return treePathsOf(c.base, c.rp, c.rq, c.sp.kind)
}

// treePathsOf returns rp and rq (rq only for a call with a second path) from
// the tree's root, base being the scope's root there.
func treePathsOf(base, rp, rq vfs.Path, kind destKind) (path, dest string) {
	path = base.Join(rp.WithoutDirMark().Unresolved()).String()
	if kind != destNone {
		dest = base.Join(rq.WithoutDirMark().Unresolved()).String()
	}
	return path, dest
}

// treePath returns p (relative to the scope's backend) from the tree's root.
func (s *scope) treePath(p vfs.Path) string {
	return s.base.Join(p.WithoutDirMark()).String()
}

// destForErr is the second path an error names: the destination of two-path calls;
// a symlink target is not a path of the tree, so it is left out.
func (c *call) destForErr() string { return destForErr(c.sp.kind, c.dest) }

// resolvedStat is the answer of a status call (spec.status) that its resolution
// already holds: known reports that it does, with the status of what c.rp is,
// or the not_found error when the resolution found nothing there (the entry,
// or for a followed link its target). Otherwise the call looks c.rp up.
func (c *call) resolvedStat(follow bool) (vfs.Info, bool, error) {
	switch c.got {
	case infoFilled:
		return c.info, true, nil
	case infoAbsent:
		op := "lstat"
		if follow {
			op = "stat"
		}
		return vfs.Info{}, true, vfs.NewError(vfs.CodeNotFound, op, c.rp, "")
	}
	return vfs.Info{}, false, nil
}

// destForErr returns dest if it is a second path (not a symlink's target), else "".
func destForErr(kind destKind, dest string) string {
	if kind == destPath {
		return dest
	}
	return ""
}

// address turns fn's error into the guest's view of it.
func (s *scope) address(c *call, err error) error {
	if err == nil {
		return nil
	}
	var a *addressed
	if errors.As(err, &a) {
		return a.err
	}
	return readdress(err, c.sp.method, c.path, c.destForErr())
}

// decide asks the policy, and the Asker for Ask decisions. ok reports whether the
// call may proceed.
func (e *env) decide(ctx context.Context, r *policy.Request) (d policy.Decision, ok bool) {
	d = e.policy.Decide(ctx, r)
	switch d.Effect {
	case policy.Allow:
		return d, true
	case policy.Ask:
		if e.asker == nil {
			if d.Reason == "" {
				d.Reason = "requires approval, and no approver is configured"
			}
			return d, false
		}
		yes, err := e.asker.Ask(ctx, r, d)
		if err != nil || !yes {
			if d.Reason == "" {
				d.Reason = "approval refused"
			}
			return d, false
		}
		return d, true
	}
	return d, false
}

// linkTarget validates a symlink target for a link at p and returns the path it
// names, relative to the capability's root (vfs.LinkTarget). A target that leaves
// the tree is data (leaves): decided on the link's name alone, stored if the
// backend takes it (the physical backend refuses: host processes read its tree),
// followed by no resolver. An absolute target leaves it; so does one climbing
// above the root of a capability that is the tree's root. Below that root, a
// climbing target may land in the tree, where a wider capability would follow
// it: path_outside_sandbox.
func (s *scope) linkTarget(p vfs.Path, target string) (q vfs.Path, leaves bool, err error) {
	q, leaves, err = vfs.LinkTarget(p, target)
	if leaves && target[0] != '/' && !s.base.IsRoot() {
		return vfs.Path{}, false, vfs.NewError(vfs.CodeOutside, "symlink", p, "symlink target climbs above the root")
	}
	return q, leaves, err
}

// dataLinkLands refuses a relative target that parse took as data (it climbs
// above the root from the link's path as written) but that lands in the tree
// from the link's canonical path, where the link really is (its directory
// reached through a symlink): the resolver would follow it, undecided. Such
// a target is path_outside_sandbox, as linkTarget makes one below the root.
// Where the call was not resolved (no policy), it resolves the link here. A
// view that stores targets verbatim decides none and does not call it.
func (s *scope) dataLinkLands(ctx context.Context, c *call, target string) error {
	if (c.sp != specSymlinkData && c.sp != specViewSymlinkVerbatim) || target[0] == '/' {
		return nil
	}
	rp := c.rp
	if !rp.IsResolved() {
		var err error
		if rp, err = s.canon(ctx, c.p, followEntry); err != nil {
			return err
		}
	}
	if _, leaves, err := vfs.LinkTarget(rp, target); err == nil && !leaves {
		return errAt(vfs.CodeOutside, c.sp.method, c.path, "", "symlink target climbs above the root")
	}
	return nil
}

// The specs of a symlink whose target leaves the tree (linkTarget): as the
// spec they replace, with no second path to resolve or decide.
var (
	specSymlinkData      = mk(spec{op: policy.OpSymlink, method: "Symlink", fol: followEntry})
	specCheckSymlinkData = mk(spec{op: policy.OpSymlink, method: "Check", checkOnly: true, fol: followEntry})
)

// dataLinkSpec is sp, a symlink's spec, for a target that leaves the tree.
// Every spec of kind destTarget must have one here.
func dataLinkSpec(sp *spec) *spec {
	switch {
	case sp == specSymlink:
		return specSymlinkData
	case sp == specViewSymlink:
		return specViewSymlinkVerbatim
	case sp.checkOnly:
		return specCheckSymlinkData
	}
	panic("dir: no spec for a symlink target leaving the tree in " + sp.method)
}

// sized returns the call field for a write that leaves n bytes in the file.
func sized(n int) int64 { return int64(n) + 1 }

// auditOp is the op an audit event names: the policy op, or for Dir.Check
// "check." and the op checked, so the trail never shows a check as the operation.
func (c *call) auditOp() string {
	if c.sp.checkOnly {
		return "check." + string(c.sp.op)
	}
	return string(c.sp.op)
}
