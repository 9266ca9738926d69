package vfs

import "context"

// FSStat is what statfs(2) reports of the storage that holds a path: its
// capacity and what is left of it, in bytes and in entries.
type FSStat struct {
	// Total and Free are the bytes the storage holds and the bytes still
	// free for the caller (a quota's remainder, or the host's f_bavail).
	Total, Free int64
	// Files and FreeFiles are the entries the storage can hold and those
	// still free; Files is 0 where the backend sets no limit on entries.
	Files, FreeFiles int64
}

// StatFSer is implemented by backends that know their capacity: the physical
// backend (fstatfs of its root), memory and sqlite with a quota.
//
// StatFS reports the storage that holds p. It fails as Stat of p would, and
// with not_supported where the backend knows no capacity after all (memory or
// sqlite without a quota). The function [StatFS] answers not_supported for
// backends without it. It is in [Optionals].
type StatFSer interface {
	StatFS(ctx context.Context, p Path) (FSStat, error)
}

// StatFS reports the storage that holds p in b (see [StatFSer]), or fails
// with not_supported where b is no StatFSer.
func StatFS(ctx context.Context, b Backend, p Path) (FSStat, error) {
	const op = "statfs"
	if err := ctx.Err(); err != nil {
		return FSStat{}, &Error{Code: CodeCanceled, Op: op, Path: p.String(), Err: err}
	}
	if s, ok := b.(StatFSer); ok {
		return s.StatFS(ctx, p)
	}
	return FSStat{}, NewError(CodeNotSupported, op, p, "the backend reports no capacity")
}

// StatFS reports the storage of the mount that serves p (see [StatFSer]). A
// synthetic directory has none: not_supported.
func (n *Namespace) StatFS(ctx context.Context, p Path) (FSStat, error) {
	const op = "statfs"
	t := n.table()
	q, err := n.route(ctx, t, p, true, op)
	if err != nil {
		return FSStat{}, ReaddressTo(err, op, p)
	}
	l := t.locate(q)
	switch l.kind {
	case kindInMount, kindMountPoint, kindCovered:
		st, err := StatFS(ctx, l.m.b, l.rel)
		return st, ReaddressTo(err, op, p)
	case kindSynthetic:
		return FSStat{}, NewError(CodeNotSupported, op, p, "a synthetic directory holds no storage")
	}
	return FSStat{}, NewError(CodeNotFound, op, p, "")
}

// StatFS forwards to the wrapped backend: it only reads.
func (r *readOnlyBackend) StatFS(ctx context.Context, p Path) (FSStat, error) {
	return StatFS(ctx, r.b, p)
}

// StatFS forwards to the wrapped backend (see [StatFS]).
func (b *locatedBackend) StatFS(ctx context.Context, p Path) (FSStat, error) {
	return StatFS(ctx, b.Backend, p)
}
