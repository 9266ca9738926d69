package vfs

import (
	"context"
	"io/fs"
	"time"
)

// LinkTimer is implemented by backends that can set the times of p's own
// entry, a symlink itself included (utimensat with AT_SYMLINK_NOFOLLOW): the
// physical, memory and sqlite backends.
//
// Lchtimes is [Backend.Chtimes] without following a final symlink
// (intermediate ones are followed beneath the root). A zero time leaves that
// time unchanged. It fails, changing nothing, as Chtimes does, with read_only
// on a read-only backend and not_supported where the backend cannot set a
// link's times after all. The function [Lchtimes] answers not_supported for
// backends without it. It is in [Optionals].
type LinkTimer interface {
	Lchtimes(ctx context.Context, p Path, atime, mtime time.Time) error
}

// Lchtimes sets the times of p's own entry in b (see [LinkTimer]).
// It calls b's Lchtimes when b is a LinkTimer. Otherwise it fails with
// read_only when b declares itself read-only, else not_supported. Nothing is
// changed on failure.
func Lchtimes(ctx context.Context, b Backend, p Path, atime, mtime time.Time) error {
	const op = "lchtimes"
	if err := ctx.Err(); err != nil {
		return &Error{Code: CodeCanceled, Op: op, Path: p.String(), Err: err}
	}
	if l, ok := b.(LinkTimer); ok {
		return l.Lchtimes(ctx, p, atime, mtime)
	}
	if b.Features().ReadOnly {
		return errReadOnly(op, p)
	}
	return NewError(CodeNotSupported, op, p, "the backend cannot set a symlink's own times")
}

// Lchtimes sets the times of p's own entry (see [LinkTimer]), through the
// mount that serves it. On a synthetic directory it fails with read_only.
func (n *Namespace) Lchtimes(ctx context.Context, p Path, atime, mtime time.Time) error {
	return n.setattr(ctx, "lchtimes", p, false, func(b Backend, rel Path) error { return Lchtimes(ctx, b, rel, atime, mtime) })
}

// Lchtimes refuses: it would write.
func (r *readOnlyBackend) Lchtimes(ctx context.Context, p Path, atime, mtime time.Time) error {
	return denyRO("lchtimes", p)
}

// Lchtimes forwards to the wrapped backend (see [Lchtimes]).
func (b *locatedBackend) Lchtimes(ctx context.Context, p Path, atime, mtime time.Time) error {
	return Lchtimes(ctx, b.Backend, p, atime, mtime)
}

// AttrFile is implemented by Files that change the status of the very object
// they opened, whatever names it has now, or none (fchmod, futimens): the
// physical, memory and sqlite backends' files.
//
// Chmod changes the permission bits as [Backend.Chmod] does. Chtimes changes
// the times as [Backend.Chtimes] does; a zero time leaves that time unchanged.
// Both fail with closed on a closed File, read_only where the File was opened
// through a read-only layer, and not_supported where the backend cannot. The
// functions [FileChmod] and [FileChtimes] answer not_supported for Files
// without it. It is in [OptionalFiles]: [WrapFile] keeps it.
type AttrFile interface {
	Chmod(mode fs.FileMode) error
	Chtimes(atime, mtime time.Time) error
}

// FileChmod changes the permission bits of the object f opened (see
// [AttrFile]); not_supported where f is no AttrFile.
func FileChmod(f File, mode fs.FileMode) error {
	if a, ok := f.(AttrFile); ok {
		return a.Chmod(mode)
	}
	return &Error{Code: CodeNotSupported, Op: "fchmod", msg: "the file cannot change its mode"}
}

// FileChtimes changes the times of the object f opened (see [AttrFile]);
// not_supported where f is no AttrFile.
func FileChtimes(f File, atime, mtime time.Time) error {
	if a, ok := f.(AttrFile); ok {
		return a.Chtimes(atime, mtime)
	}
	return &Error{Code: CodeNotSupported, Op: "futimens", msg: "the file cannot change its times"}
}

// Chmod refuses: it would write.
func (f *readOnlyFile) Chmod(mode fs.FileMode) error { return f.deny("fchmod") }

// Chtimes refuses: it would write.
func (f *readOnlyFile) Chtimes(atime, mtime time.Time) error { return f.deny("futimens") }

// Chmod forwards to the wrapped File (see [AttrFile]).
func (a *addressedFile) Chmod(mode fs.FileMode) error { return a.fix(a.f.(AttrFile).Chmod(mode)) }

// Chtimes forwards to the wrapped File (see [AttrFile]).
func (a *addressedFile) Chtimes(atime, mtime time.Time) error {
	return a.fix(a.f.(AttrFile).Chtimes(atime, mtime))
}
