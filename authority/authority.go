package authority

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// Authority is the host's registry of named roots and of the grants made over them.
// It is host-only: never hand it (or a Control) to a guest. Use New; it is safe for
// concurrent use.
type Authority struct {
	clock     func() time.Time
	realClock bool // clock is time.Now: expiry timers are armed
	sink      audit.Sink
	host      policy.Policy // nil: no host-wide policy
	asker     policy.Asker
	dirOpts   []dir.Option
	prefix    string // random, per Authority: grant ids from different authorities differ
	guarded   bool   // WithGitGuard: each root gets a dir.GitGuard
	guardOpts []dir.GitGuardOption

	store    string // Open's file; "" : grants are not persisted
	dirty    bool   // a record changed since the store was written; guarded by mu
	storeErr error  // the last store write's error; guarded by mu
	tempBase string // WithTempBase

	mu     sync.Mutex
	seq    uint64
	roots  map[string]*root
	grants map[string]*grant
}

// root is one registered root.
type root struct {
	name string
	b    vfs.Backend
	desc *RootDescriptor // nil for a root registered without a kind
	// guard is the root's dir.GitGuard (WithGitGuard), shared by the grants over
	// it so that they serialize on one lock; nil without.
	guard dir.Hook
}

// grant is the authority's state for one grant.
type grant struct {
	a       *Authority
	seq     uint64
	rec     Grant // Status and Ended change under a.mu; the rest is immutable
	set     accessSet
	expires time.Time // as computed (with a monotonic reading for TTLs)
	root    *root
	ctl     *dir.Control // the root Control of the grant's Dir tree
	ended   atomic.Bool  // set (under a.mu) when rec.Status leaves Active
	timer   *time.Timer  // expiry timer, real clock only; guarded by a.mu
	dir     *dir.Dir     // the grant's Dir (nil until built); set under a.mu
	// restoring is set (under a.mu) while Restore builds the Dir.
	restoring bool

	// The rules decisions name, built once.
	ruleAllow, ruleAccess, ruleExpired string
}

// Option configures New.
type Option func(*Authority)

// WithAudit sets the Sink that receives the audit events of every grant's Dir
// (with Event.Grant set to the grant's id). The default is [audit.Discard].
func WithAudit(s audit.Sink) Option {
	return func(a *Authority) {
		if s != nil {
			a.sink = s
		}
	}
}

// WithPolicy sets the host-wide policy. Each grant's Dir first enforces the
// grant (expiry, then its access list) and then asks p. So p can only refuse
// more: it cannot give a grant an access it lacks. Without it, whatever the
// grant's access list allows is allowed.
func WithPolicy(p policy.Policy) Option { return func(a *Authority) { a.host = p } }

// WithAsker sets the Asker that settles the host-wide policy's Ask decisions.
// Without one, Ask decisions deny.
func WithAsker(k policy.Asker) Option { return func(a *Authority) { a.asker = k } }

// WithDirOptions adds options to every grant's [dir.New] call (hooks, a read
// limit). The authority's own settings are applied after them. So
// [dir.WithSubject], [dir.WithPolicy], [dir.WithAsker] and [dir.WithAudit] given
// here have no effect: use the Authority's options.
func WithDirOptions(opts ...dir.Option) Option {
	return func(a *Authority) { a.dirOpts = append(a.dirOpts, opts...) }
}

// WithGitGuard puts a [dir.GitGuard] hook, made with opts, on every grant's Dir.
// It comes after the hooks of [WithDirOptions]. There is one per registered
// root, over that root's backend, shared by every grant over it. It refuses what
// would make or change a git dir under a name the policy's patterns do not
// know, as it does for a capfs session's Dir.
func WithGitGuard(opts ...dir.GitGuardOption) Option {
	return func(a *Authority) {
		a.guarded = true
		a.guardOpts = append(a.guardOpts, opts...)
	}
}

// WithClock sets the clock that stamps grants and decides expiry ([time.Now] by
// default). It must be safe for concurrent use. With a clock other than the
// default, no expiry timers run, since the clock need not follow wall time. An
// expired grant is then revoked by the first call that finds it expired, by
// [Authority.Sweep], or by listing it.
func WithClock(now func() time.Time) Option {
	return func(a *Authority) {
		if now != nil {
			a.clock = now
			a.realClock = false
		}
	}
}

// New returns an empty Authority.
func New(opts ...Option) *Authority {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	a := &Authority{
		clock:     time.Now,
		realClock: true,
		sink:      audit.Discard,
		prefix:    hex.EncodeToString(b[:]),
		roots:     map[string]*root{},
		grants:    map[string]*grant{},
	}
	for _, o := range opts {
		if o != nil {
			o(a)
		}
	}
	return a
}

// Register names backend b as a root that grants can be made over ("workspace:conv1",
// "extension-storage:ext.id"). The name is what grant records carry; the host path
// behind b, if any, never leaves the authority. name must be 1 to 256 bytes of
// printable UTF-8, not already registered (an error wrapping [fs.ErrExist]).
func (a *Authority) Register(name string, b vfs.Backend) error {
	return a.register(name, b, nil)
}

func (a *Authority) register(name string, b vfs.Backend, desc *RootDescriptor) error {
	if name == "" || len(name) > 256 || !utf8.ValidString(name) || strings.ContainsFunc(name, isControl) {
		return invalid("root name %q must be 1 to 256 bytes of printable UTF-8", name)
	}
	if b == nil {
		return invalid("root %q: nil backend", name)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.roots[name]; ok {
		return fmt.Errorf("authority: root %q: %w", name, fs.ErrExist)
	}
	r := &root{name: name, b: b, desc: desc}
	if a.guarded {
		r.guard = dir.GitGuard(b, a.guardOpts...)
	}
	a.roots[name] = r
	return nil
}

// Unregister removes root name and revokes every active grant over it, returning
// how many it revoked. An unknown name is an error wrapping [fs.ErrNotExist].
func (a *Authority) Unregister(name string) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.roots[name]
	if !ok {
		return 0, fmt.Errorf("authority: root %q: %w", name, fs.ErrNotExist)
	}
	delete(a.roots, name)
	n := 0
	now := a.clock()
	for _, g := range a.grants {
		if g.root == r && g.endLocked(now, Revoked) == Revoked {
			n++
		}
	}
	return n, a.saveLocked()
}

// Roots returns the registered root names, sorted.
func (a *Authority) Roots() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.roots))
	for n := range a.roots {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Grant gives req.Subject a Dir over req.Path within root req.Root, limited to
// req.Access, and records the grant. The Dir:
//
//   - is confined to the directory req.Path leads to. The path is resolved to its
//     canonical place (through any symlink on the way), decided there by the
//     host-wide policy and hooks as a sub, and pinned now. The record keeps both:
//     [Grant].Path as asked, Grant.Resolved where it led. A symlink put at the
//     path later does not move the grant.
//   - is read-only unless Access includes Write, Delete or Move.
//   - names req.Subject ([Subject.String]) in every policy request and audit
//     event. It sends its events, marked with the grant's id, to the authority's
//     audit sink. Paths in requests and events are from the registered root, and
//     canonical. Under a grant on "keys" that led to ".ssh", a read of "id_rsa"
//     is decided and recorded as ".ssh/id_rsa".
//   - decides every call, in this order. An expired grant is refused (rule
//     "grant:<id>:expired"). An operation outside the access list is refused
//     (rule "grant:<id>:access", see [Required]). Then the host-wide policy
//     decides, and its decision stands. Without one, the call is allowed under
//     rule "grant:<id>".
//
// Refusals reach the guest as fs_permission_denied. A call that finds the grant
// expired also revokes it. Every later call then fails with revoked, through
// this Dir and anything derived from it (Files, Handles already open). With the
// default clock a timer does the same at the expiry time. [Authority.Revoke] and
// [Authority.RevokeSubject] revoke at once (revoked).
//
// Errors:
//   - A malformed request wraps [fs.ErrInvalid].
//   - An unknown root wraps [fs.ErrNotExist].
//   - A Path that is malformed, climbs out, is not a directory of the root, or
//     leads to a place the host-wide policy refuses, gives the [*vfs.Error] from
//     resolving or deciding it (invalid_path, path_outside_sandbox, not_found,
//     not_a_directory, fs_permission_denied).
//   - A Path that no longer leads to req.Resolved wraps [fs.ErrPermission].
func (a *Authority) Grant(ctx context.Context, req GrantRequest) (*dir.Dir, Grant, error) {
	now := a.clock()
	if err := req.Subject.Validate(); err != nil {
		return nil, Grant{}, err
	}
	a.mu.Lock()
	if r, ok := a.roots[req.Root]; ok && r.desc != nil {
		desc := *r.desc
		a.mu.Unlock()
		if err := applyKind(&desc, &req); err != nil {
			return nil, Grant{}, err
		}
	} else {
		a.mu.Unlock()
	}
	if len(req.Access) == 0 {
		return nil, Grant{}, invalid("empty access list")
	}
	var set accessSet
	for _, x := range req.Access {
		if !x.Valid() {
			return nil, Grant{}, invalid("unknown access %q", x)
		}
		set |= x.bit()
	}
	if strings.TrimSpace(req.Reason) == "" {
		return nil, Grant{}, invalid("a grant needs a reason")
	}
	if !req.Source.Valid() {
		return nil, Grant{}, invalid("unknown source %q", req.Source)
	}
	var expires time.Time
	switch {
	case req.TTL < 0:
		return nil, Grant{}, invalid("negative TTL")
	case req.TTL > 0 && !req.Expires.IsZero():
		return nil, Grant{}, invalid("both TTL and Expires set")
	case req.TTL > 0:
		expires = now.Add(req.TTL)
	case !req.Expires.IsZero():
		expires = req.Expires
		if !now.Before(expires) {
			return nil, Grant{}, invalid("expiry %s is not in the future", expires.Format(time.RFC3339))
		}
	}
	rawPath := req.Path
	if rawPath == "" {
		rawPath = "."
	}
	p, err := vfs.ParseGuest(rawPath)
	if err != nil {
		return nil, Grant{}, vfs.Reop(err, "Grant")
	}

	a.mu.Lock()
	r, ok := a.roots[req.Root]
	a.seq++
	seq := a.seq
	a.mu.Unlock()
	if !ok {
		return nil, Grant{}, fmt.Errorf("authority: root %q: %w", req.Root, fs.ErrNotExist)
	}

	id := fmt.Sprintf("g-%s-%06d", a.prefix, seq)
	g := &grant{
		a:           a,
		seq:         seq,
		set:         set,
		expires:     expires,
		root:        r,
		ruleAllow:   "grant:" + id,
		ruleAccess:  "grant:" + id + ":access",
		ruleExpired: "grant:" + id + ":expired",
		rec: Grant{
			ID:      id,
			Subject: req.Subject,
			Root:    r.name,
			Path:    p.WithoutDirMark().String(),
			Access:  set.list(),
			Reason:  req.Reason,
			Source:  req.Source,
			Created: now.Round(0),
			Expires: expires.Round(0),
			Status:  Active,
		},
	}
	if r.desc != nil {
		g.rec.Kind = r.desc.Kind
	}
	d, loc, err := a.build(ctx, g, r, p)
	if err != nil {
		return nil, Grant{}, err
	}
	ctl := g.ctl
	if err := leadsTo(id, req.Resolved, loc); err != nil {
		ctl.Revoke()
		return nil, Grant{}, err
	}
	g.rec.Resolved = loc

	a.mu.Lock()
	defer a.mu.Unlock()
	if a.roots[req.Root] != r {
		// Unregistered (and perhaps registered again) while the Dir was built.
		ctl.Revoke()
		return nil, Grant{}, fmt.Errorf("authority: root %q: %w", req.Root, fs.ErrNotExist)
	}
	a.grants[id] = g
	a.dirty = true // a new record: the store keeps every grant Grant returns
	g.dir = d
	if a.realClock && !expires.IsZero() {
		g.armTimer()
	}
	if err := a.saveLocked(); err != nil {
		delete(a.grants, id)
		g.endLocked(now, Revoked)
		return nil, Grant{}, err
	}
	return d, g.snapshot(), nil
}

// build makes the Dir tree of grant g over root r, confined to the directory p
// leads to (dir.Control.Child: resolved, decided and pinned there), and sets
// g.ctl. It returns that directory's canonical place in the root.
func (a *Authority) build(ctx context.Context, g *grant, r *root, p vfs.Path) (*dir.Dir, string, error) {
	id := g.rec.ID
	opts := append(slices.Clone(a.dirOpts),
		dir.WithSubject(g.rec.Subject.String()),
		dir.WithPolicy(&grantPolicy{g: g, host: a.host}),
		dir.WithAsker(a.asker),
		dir.WithAudit(grantSink{id: id, sink: a.sink}),
	)
	if r.guard != nil {
		opts = append(opts, dir.WithHooks(r.guard))
	}
	d, ctl := dir.New(r.b, opts...)
	loc := "."
	if !p.IsRoot() {
		child, err := ctl.Child(ctx, p.String())
		if err == nil {
			loc, err = child.Location(ctx)
		}
		if err != nil {
			ctl.Revoke()
			return nil, "", vfs.Reop(err, "Grant")
		}
		d = child.Dir()
	}
	g.ctl = ctl
	if !g.set.writes() {
		d = d.ReadOnly()
	}
	return d, loc, nil
}

// leadsTo checks that grant id's path led to want ("" : anywhere), having led
// to got. The error wraps fs.ErrPermission.
func leadsTo(id, want, got string) error {
	if want == "" {
		return nil
	}
	if w, err := vfs.ParseGuest(want); err == nil && w.WithoutDirMark().String() == got {
		return nil
	}
	return fmt.Errorf("authority: grant %s: its path now leads to %q, not to %q where it led when granted: %w", id, got, want, fs.ErrPermission)
}

// Revoke revokes grant id at once: every call that starts afterwards on its Dir, or
// anything derived from it, fails with revoked. Revoking a grant that has already
// ended is a no-op. An unknown id (or one removed by Prune) is an error wrapping
// [fs.ErrNotExist].
func (a *Authority) Revoke(id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.grants[id]
	if !ok {
		return fmt.Errorf("authority: grant %q: %w", id, fs.ErrNotExist)
	}
	g.endLocked(a.clock(), Revoked)
	return a.saveLocked()
}

// RevokeSubject revokes every active grant of subject s and returns how many it
// revoked. A grant found expired meanwhile is recorded as expired, not counted.
func (a *Authority) RevokeSubject(s Subject) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock()
	n := 0
	for _, g := range a.grants {
		if g.rec.Subject == s && g.endLocked(now, Revoked) == Revoked {
			n++
		}
	}
	a.saveLocked() //nolint:errcheck // recorded for StoreErr
	return n
}

// Sweep revokes every active grant whose expiry has passed, recording it as
// expired, and returns how many. With the default clock, timers do this on
// their own. With [WithClock], call it to stop Handles of expired grants whose
// Dir nobody calls.
func (a *Authority) Sweep() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.sweepLocked(a.clock())
	a.saveLocked() //nolint:errcheck // recorded for StoreErr
	return n
}

func (a *Authority) sweepLocked(now time.Time) int {
	n := 0
	for _, g := range a.grants {
		if g.rec.Status == Active && g.dueAt(now) && g.endLocked(now, Expired) == Expired {
			n++
		}
	}
	return n
}

// Grants returns the active grants, in the order they were made. Grants whose expiry
// has passed are revoked and recorded as expired first, so they are not listed.
func (a *Authority) Grants() []Grant {
	return a.list(func(g *grant) bool { return g.rec.Status == Active })
}

// SubjectGrants returns the active grants of subject s, in the order they were made.
func (a *Authority) SubjectGrants(s Subject) []Grant {
	return a.list(func(g *grant) bool { return g.rec.Status == Active && g.rec.Subject == s })
}

// ListAll returns every grant the authority remembers, active or ended (see Status),
// in the order they were made.
func (a *Authority) ListAll() []Grant {
	return a.list(func(*grant) bool { return true })
}

// Lookup returns the record of grant id, with its status brought up to date. An
// unknown id is an error wrapping [fs.ErrNotExist].
func (a *Authority) Lookup(id string) (Grant, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.grants[id]
	if !ok {
		return Grant{}, fmt.Errorf("authority: grant %q: %w", id, fs.ErrNotExist)
	}
	if now := a.clock(); g.rec.Status == Active && g.dueAt(now) {
		g.endLocked(now, Expired)
		a.saveLocked() //nolint:errcheck // recorded for StoreErr
	}
	return g.snapshot(), nil
}

// Prune forgets the records of grants that have ended (revoked or expired) and
// returns how many. Their Dirs stay revoked.
func (a *Authority) Prune() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sweepLocked(a.clock())
	n := 0
	for id, g := range a.grants {
		if g.rec.Status != Active {
			delete(a.grants, id)
			n++
		}
	}
	if n > 0 {
		a.dirty = true
	}
	a.saveLocked() //nolint:errcheck // recorded for StoreErr
	return n
}

func (a *Authority) list(keep func(*grant) bool) []Grant {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sweepLocked(a.clock()) > 0 {
		a.saveLocked() //nolint:errcheck // recorded for StoreErr
	}
	gs := make([]*grant, 0, len(a.grants))
	for _, g := range a.grants {
		if keep(g) {
			gs = append(gs, g)
		}
	}
	slices.SortFunc(gs, func(x, y *grant) int {
		switch {
		case x.seq < y.seq:
			return -1
		case x.seq > y.seq:
			return 1
		}
		return 0
	})
	out := make([]Grant, len(gs))
	for i, g := range gs {
		out[i] = g.snapshot()
	}
	return out
}

// snapshot returns a copy of the record that shares nothing with it. a.mu held.
func (g *grant) snapshot() Grant {
	r := g.rec
	r.Access = slices.Clone(r.Access)
	return r
}

// dueAt reports whether the grant's expiry has passed at now.
func (g *grant) dueAt(now time.Time) bool {
	return !g.expires.IsZero() && !now.Before(g.expires)
}

// endLocked ends an active grant: it revokes its Dir tree and records status (or
// Expired, if its expiry has passed, whatever status says). It returns the status
// recorded, or "" if the grant had already ended. a.mu held.
func (g *grant) endLocked(now time.Time, status Status) Status {
	if g.rec.Status != Active {
		return ""
	}
	if g.dueAt(now) {
		status = Expired
	}
	if g.ctl != nil { // nil for a grant restored from the store and not yet rebuilt
		g.ctl.Revoke()
	}
	g.a.dirty = true
	g.rec.Status = status
	g.rec.Ended = now.Round(0)
	g.ended.Store(true)
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	return status
}

// expire ends the grant as expired, from a policy decision. It is cheap once done.
func (g *grant) expire(now time.Time) {
	if g.ended.Load() {
		return
	}
	g.a.mu.Lock()
	defer g.a.mu.Unlock()
	g.endLocked(now, Expired)
	g.a.saveLocked() //nolint:errcheck // recorded for StoreErr
}

// armTimer schedules the grant's expiry on the real clock. a.mu held.
func (g *grant) armTimer() {
	d := time.Until(g.expires)
	g.timer = time.AfterFunc(max(d, 0), func() {
		a := g.a
		a.mu.Lock()
		defer a.mu.Unlock()
		if g.rec.Status != Active {
			return
		}
		if now := a.clock(); g.dueAt(now) {
			g.endLocked(now, Expired)
			a.saveLocked() //nolint:errcheck // recorded for StoreErr
			return
		}
		g.armTimer() // the wall clock moved back: not due yet
	})
}

// grantPolicy is the policy of one grant's Dir tree.
type grantPolicy struct {
	g    *grant
	host policy.Policy
}

// Decide refuses calls once the grant has expired or beyond its access list, then
// defers to the host-wide policy.
func (p *grantPolicy) Decide(ctx context.Context, r *policy.Request) policy.Decision {
	g := p.g
	if !g.expires.IsZero() {
		if now := g.a.clock(); !now.Before(g.expires) {
			g.expire(now)
			return policy.Decision{
				Effect: policy.Deny,
				Rule:   g.ruleExpired,
				Reason: "the grant has expired",
			}
		}
	}
	switch purpose := dir.Purpose(ctx); purpose {
	case dir.PurposeArchive, dir.PurposeWatch:
		if a := Access(purpose); !g.set.has(a) {
			return policy.Decision{Effect: policy.Deny, Rule: g.ruleAccess, Reason: "the grant does not include " + purpose + " access"}
		}
	}
	need, known := Required(r.Op)
	if !known || (need != "" && !g.set.has(need)) {
		reason := "the grant does not include " + string(need) + " access"
		if !known {
			reason = "operation " + string(r.Op) + " is not covered by any access"
		}
		return policy.Decision{Effect: policy.Deny, Rule: g.ruleAccess, Reason: reason}
	}
	if p.host == nil {
		return policy.Decision{Effect: policy.Allow, Rule: g.ruleAllow}
	}
	return p.host.Decide(ctx, r)
}

// grantSink marks a grant's events with its id.
type grantSink struct {
	id   string
	sink audit.Sink
}

func (s grantSink) Record(ctx context.Context, e audit.Event) {
	e.Grant = s.id
	s.sink.Record(ctx, e)
}
