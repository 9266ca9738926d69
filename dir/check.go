package dir

import (
	"context"

	"github.com/capfs/capfs/policy"
)

// Check asks whether a call performing op on path (and dest, for the two-path ops
// rename, copy and link, or the target of a symlink) would be allowed, without
// making it: it runs steps 1 to 4 of the enforcement path (revocation, path
// parsing, read-only and the host's write lock, the policy with its Asker) and
// stops there. No hook runs and nothing is changed; with a policy, the backend is
// read to resolve the paths to where they lead, following a final symlink as the
// operation would (Remove, Rename, Symlink, Link, Mkdir, Create and Copy's source
// act on the entry itself; Readlink reads it; the others follow it), and the
// policy decides there as well as on the names given. size is the number of
// bytes a write would leave in the file, or -1 when unknown (the policy's size
// limits use it).
//
// A nil result means the same call made now would pass those steps; a later call
// can still be refused by a hook, by the backend (not_found, quota_exceeded, ...),
// or because the host revoked or locked the capability in between. The error is
// the one the real call would return from those steps, with Op "Check".
//
// Check is audited like every call, as one event whose op is "check." followed by
// op ("check.write"), so a trail never shows a check as the operation itself.
// Hosts use it to validate a batch of changes before applying any (materialize's
// SyncBack); a guest learns nothing from it that the call itself would not tell.
func (d *Dir) Check(ctx context.Context, op policy.Op, path, dest string, size int64) error {
	sp := checkSpecs[op]
	if sp == nil {
		sp = checkSpec(op) // an op the policy does not know: it refuses it
	}
	c := &call{sp: sp, path: path}
	if sp.kind != destNone {
		c.dest = dest
	}
	if size >= 0 {
		c.size = size + 1
	}
	return d.do(ctx, c, func(context.Context) error { return nil })
}
