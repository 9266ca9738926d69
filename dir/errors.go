package dir

import (
	"context"
	"errors"

	"github.com/capfs/capfs/vfs"
)

// hookError is the guest's view of a hook's refusal: a *vfs.Error keeps its code;
// anything else is fs_permission_denied, with the hook's error as the cause (the
// host can match it with errors.Is).
func hookError(herr error, method, path, dest string) error {
	var ve *vfs.Error
	if errors.As(herr, &ve) {
		return vfs.Readdress(ve, method, path, dest)
	}
	e := errAt(vfs.CodePermission, method, path, dest, "refused by a hook")
	e.Err = herr
	return e
}

// errAt is an error addressed to the guest's paths (see vfs.GuestError).
func errAt(code vfs.Code, op, path, dest, msg string) *vfs.Error {
	return vfs.GuestError(code, op, path, dest, msg)
}

// readdress gives err the guest's paths. A non-*vfs.Error becomes canceled (for
// context errors) or io_error, without its text, which might hold a host path.
func readdress(err error, op, path, dest string) error {
	if err == nil {
		return nil
	}
	var ve *vfs.Error
	if errors.As(err, &ve) {
		return vfs.Readdress(ve, op, printable(path), printable(dest))
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: printable(path), Dest: printable(dest), Err: err}
	}
	e := errAt(vfs.CodeIO, op, path, dest, "i/o error")
	return e
}

// reopDest re-addresses a parse error of a destination path: Path is the source as
// written, Dest the (printable) destination.
func reopDest(err error, op, src string) error {
	var ve *vfs.Error
	if errors.As(err, &ve) {
		return vfs.Readdress(ve, op, printable(src), ve.Path)
	}
	return err
}

// printable keeps error and audit text readable (see vfs.PrintablePath).
func printable(s string) string { return vfs.PrintablePath(s) }

func auditGuestPath(s string) string { return printable(s) }

// canceled reports a context error as a *vfs.Error.
func canceled(op string, p vfs.Path, err error) error {
	return &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
}

// codeOf is vfs.CodeOf without its allocation (errors.AsType keeps the target on
// the stack); the hot paths call it on nil and not_found errors.
func codeOf(err error) vfs.Code {
	if e, ok := errors.AsType[*vfs.Error](err); ok {
		return e.Code
	}
	return ""
}
