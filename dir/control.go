package dir

import (
	"context"
	"sync/atomic"

	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// gate holds the host's switches for one Control (or one Revocable File): a
// revocation bit and a write-lock bit in one atomic word. Gates form a chain from a
// child to the root; a capability is revoked (or locked) if any gate on its chain
// is.
//
// Checking is one atomic load for a root gate. A deeper gate caches the state of
// its whole chain, stamped with the tree's epoch, which every host change bumps
// after setting its bit: a check loads the epoch and the cache (two loads) and
// walks the chain only when the host changed something since the cache was filled.
// A check that starts after Revoke or SetWritable returned loads the new epoch, so
// it sees the change: either the cache carries that epoch, and was computed by a
// walk that started after the bit was set, or it is refilled now.
type gate struct {
	parent *gate
	tree   *gateTree
	bits   atomic.Uint32 // this gate's own revokedBit and lockedBit
	cache  atomic.Uint64 // epoch<<2 | the chain's bits; deeper gates only
}

// gateTree is shared by every gate under one New.
type gateTree struct {
	epoch    atomic.Uint64 // starts at 1, so an unfilled cache (0) never matches
	watchers watchers      // told of every change (see Dir.HostChanges)
}

const (
	revokedBit uint32 = 1 << iota
	lockedBit
)

func newGate(parent *gate) *gate {
	if parent == nil {
		t := &gateTree{}
		t.epoch.Store(1)
		return &gate{tree: t}
	}
	return &gate{parent: parent, tree: parent.tree}
}

// state returns the chain's revokedBit and lockedBit.
func (g *gate) state() uint32 {
	if g.parent == nil {
		return g.bits.Load()
	}
	return g.chainState()
}

func (g *gate) chainState() uint32 {
	e := g.tree.epoch.Load()
	if c := g.cache.Load(); c>>2 == e {
		return uint32(c & 3)
	}
	var st uint32
	for p := g; p != nil; p = p.parent {
		st |= p.bits.Load()
	}
	g.cache.Store(e<<2 | uint64(st))
	return st
}

// set changes this gate's bits and publishes the change to the chains below it.
func (g *gate) set(bit uint32, on bool) {
	if on {
		g.bits.Or(bit)
	} else {
		g.bits.And(^bit)
	}
	g.tree.epoch.Add(1)
	g.tree.watchers.tell()
}

func (g *gate) isRevoked() bool { return g.state()&revokedBit != 0 }

func (g *gate) writable() bool { return g.state()&lockedBit == 0 }

// Control is the host's caretaker facet for a Dir: it can lock writes and revoke
// the Dir and every capability derived from it (Dirs, Files, Handles, views),
// without the guest's cooperation. It is never handed to a guest, and no Dir method
// leads to it. Control methods are host actions: they are not policed or audited,
// except Child, which hands out a Dir and is decided and audited as a Sub.
// A Control is safe for concurrent use.
type Control struct {
	dir  *Dir
	gate *gate
}

// New returns a Dir over backend b and the Control that governs it. The Dir is
// writable (unless b is read-only) and unrevoked; every capability derived from it
// shares the options given here.
//
// Defaults: no subject, policy.AllowAll, no Asker (Ask decisions deny), no hooks,
// audit.Discard, DefaultMaxReadBytes.
func New(b vfs.Backend, opts ...Option) (*Dir, *Control) {
	e := &env{policy: defaultPolicy, audit: discardSink, maxRead: DefaultMaxReadBytes}
	for _, o := range opts {
		if o != nil {
			o(e)
		}
	}
	e.audited = e.audit != discardSink
	e.plain = !e.customPolicy && len(e.hooks) == 0 && !e.audited
	e.quiet = e.isQuiet()
	if e.quiet {
		e.engine = e.policy.(*policy.Engine)
	}
	e.tmu = treeLock(e, b)
	g := newGate(nil)
	d := &Dir{s: scope{env: e, gate: g}}
	d.s.setBackend(b)
	return d, &Control{dir: d, gate: g}
}

// Dir returns the Dir this Control governs.
func (c *Control) Dir() *Dir { return c.dir }

// SetWritable locks (false) or unlocks (true) writes through every capability
// derived from this Control, immediately: a write call that starts after
// SetWritable(false) fails with read_only, including writes through Handles opened
// before. Unlocking does not override a lock set by an ancestor Control, nor a
// ReadOnly() attenuation.
func (c *Control) SetWritable(writable bool) { c.gate.set(lockedBit, !writable) }

// Writable reports whether writes are currently allowed by this Control and every
// ancestor Control (it does not consider revocation or ReadOnly attenuation).
func (c *Control) Writable() bool { return c.gate.writable() }

// Revoke permanently invalidates the Dir and every capability derived from it,
// including Child controls' Dirs and Handles already open. Calls already running
// may finish; every call that starts afterwards fails with revoked. There is no
// way to undo it.
func (c *Control) Revoke() { c.gate.set(revokedBit, true) }

// Revoked reports whether this Control or an ancestor has been revoked.
func (c *Control) Revoked() bool { return c.gate.isRevoked() }

// Child returns a Control for the subtree at path (relative to this Control's Dir;
// "/" means its root, "." the Dir itself). Its Dir is made as Sub(path) on this
// Control's Dir makes one: path is resolved to the canonical directory it reaches
// (through any symlink on the way), decided there by the policy and hooks as an
// OpSub, audited, and pinned now; the child's paths, in every later decision and
// audit event, are from that place (see Location). It shares subject, policy,
// hooks and audit; its own revocation and write lock are chained under this
// Control's: revoking or locking this Control revokes or locks the child, not the
// other way round. Errors are *vfs.Error: revoked if this Control is revoked,
// invalid_path or path_outside_sandbox for a bad path, fs_permission_denied if the
// policy or a hook refuses the place path leads to, not_found or not_a_directory
// if path is not a directory.
func (c *Control) Child(ctx context.Context, path string) (*Control, error) {
	d := c.dir
	var out *Dir
	cl := &call{sp: specChild, path: path}
	err := d.do(ctx, cl, func(ctx context.Context) error {
		if !cl.rp.IsResolved() {
			// A Dir without policy or hooks resolves nothing to decide: the
			// host's child is pinned at the canonical place all the same.
			rp, err := d.s.canon(ctx, cl.p, followFinal)
			if err != nil {
				return err
			}
			cl.rp = rp
		}
		sub, err := d.s.b.Sub(ctx, cl.rp)
		if err != nil {
			return err
		}
		out = d.derive(ctx, sub, cl.rp)
		return nil
	})
	if err != nil {
		return nil, err
	}
	g := newGate(c.gate)
	out.s.gate = g
	return &Control{dir: out, gate: g}, nil
}

// Location returns the path of this Control's Dir from the root of the tree it
// descends from (the backend given to New), "." for that root: the canonical
// place of its directory now (where the backend can say where a pinned directory
// is), else the place it was pinned at. It is the prefix of the paths its
// decisions and audit events name. Errors are *vfs.Error: not_found if the
// directory has left the tree.
func (c *Control) Location(ctx context.Context) (string, error) {
	p, err := c.dir.s.where(ctx)
	if err != nil {
		return "", err
	}
	return p.String(), nil
}
