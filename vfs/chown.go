package vfs

import "context"

// Chowner is implemented by backends that keep ownership ([Info.HasOwner]) and
// can change it: the physical backend.
//
// Chown changes the numeric owner and group of what p reaches, following a
// final symlink. Lchown changes p's own entry, a symlink itself included, and
// follows nothing at the final name. Intermediate symlinks are followed beneath
// the root as for every method. An id of -1 leaves that id unchanged, as
// chown(2). Both fail, changing nothing, with
//
//   - invalid_path for an id below -1 or above the host's range (the one
//     invalid-argument code);
//   - not_found, not_a_directory, path_outside_sandbox, too_many_links as any
//     resolution of p does;
//   - fs_permission_denied where the host refuses the change (an unprivileged
//     process giving a file away, or the backend's own rule: the physical
//     backend refuses files with several hard links, as it does for Chmod);
//   - not_regular_file where the backend refuses the kind of file (the
//     physical backend: FIFOs, sockets and devices, as for Chmod);
//   - read_only on a read-only backend;
//   - not_supported where the backend cannot change ownership after all.
//
// Backends without ownership do not implement Chowner. The function [Chown]
// answers not_supported for them.
type Chowner interface {
	Chown(ctx context.Context, p Path, uid, gid int) error
	Lchown(ctx context.Context, p Path, uid, gid int) error
}

// Chown changes the owner of p in b.
// It calls b's Chown (follow) or Lchown when b is a [Chowner]. Otherwise it
// fails with read_only when b declares itself read-only, else not_supported.
// Nothing is changed on failure.
func Chown(ctx context.Context, b Backend, p Path, uid, gid int, follow bool) error {
	op := chownOp(follow)
	if err := ctx.Err(); err != nil {
		return &Error{Code: CodeCanceled, Op: op, Path: p.String(), Err: err}
	}
	if c, ok := b.(Chowner); ok {
		if follow {
			return c.Chown(ctx, p, uid, gid)
		}
		return c.Lchown(ctx, p, uid, gid)
	}
	if b.Features().ReadOnly {
		return errReadOnly(op, p)
	}
	return NewError(CodeNotSupported, op, p, "the backend keeps no ownership")
}

func chownOp(follow bool) string {
	if follow {
		return "chown"
	}
	return "lchown"
}

// Chown changes the owner of what p reaches (see [Chowner]), through the
// mount that serves it. On a synthetic directory it fails with read_only. In
// a mount whose backend keeps no ownership it fails with not_supported.
func (n *Namespace) Chown(ctx context.Context, p Path, uid, gid int) error {
	return n.setattr(ctx, "chown", p, true, func(b Backend, rel Path) error { return Chown(ctx, b, rel, uid, gid, true) })
}

// Lchown changes the owner of p's own entry (see [Chowner]), as
// [Namespace.Chown] does otherwise.
func (n *Namespace) Lchown(ctx context.Context, p Path, uid, gid int) error {
	return n.setattr(ctx, "lchown", p, false, func(b Backend, rel Path) error { return Chown(ctx, b, rel, uid, gid, false) })
}

// Chown refuses: it would write.
func (r *readOnlyBackend) Chown(ctx context.Context, p Path, uid, gid int) error {
	return denyRO("chown", p)
}

// Lchown refuses: it would write.
func (r *readOnlyBackend) Lchown(ctx context.Context, p Path, uid, gid int) error {
	return denyRO("lchown", p)
}

// Chown forwards to the wrapped backend (see [Chown]).
func (b *locatedBackend) Chown(ctx context.Context, p Path, uid, gid int) error {
	return Chown(ctx, b.Backend, p, uid, gid, true)
}

// Lchown forwards to the wrapped backend (see [Chown]).
func (b *locatedBackend) Lchown(ctx context.Context, p Path, uid, gid int) error {
	return Chown(ctx, b.Backend, p, uid, gid, false)
}
