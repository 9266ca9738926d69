package vfs

import (
	"errors"
	"io/fs"
	"syscall"
)

// Code is a stable, machine-readable error code. Codes are part of the API: they
// never change meaning, and new ones are only added.
type Code string

// The error codes. Each matches the io/fs sentinel named beside it with errors.Is.
const (
	CodeOutside      Code = "path_outside_sandbox" // fs.ErrPermission
	CodeInvalidPath  Code = "invalid_path"         // fs.ErrInvalid
	CodePermission   Code = "fs_permission_denied" // fs.ErrPermission
	CodeReadOnly     Code = "read_only"            // fs.ErrPermission
	CodeRevoked      Code = "revoked"              // fs.ErrPermission
	CodeNotFound     Code = "not_found"            // fs.ErrNotExist
	CodeExists       Code = "already_exists"       // fs.ErrExist
	CodeNotDir       Code = "not_a_directory"      // fs.ErrInvalid
	CodeIsDir        Code = "is_a_directory"       // fs.ErrInvalid
	CodeNotEmpty     Code = "not_empty"            // fs.ErrExist (as ENOTEMPTY/EEXIST on POSIX)
	CodeTooLarge     Code = "file_too_large"       // none
	CodeQuota        Code = "quota_exceeded"       // none
	CodeTooManyLinks Code = "too_many_links"       // fs.ErrInvalid
	CodeNotRegular   Code = "not_regular_file"     // fs.ErrInvalid
	CodeCrossMount   Code = "cross_mount"          // none
	CodeConflict     Code = "conflict"             // none
	CodeClosed       Code = "closed"               // fs.ErrClosed
	CodeNotSupported Code = "not_supported"        // errors.ErrUnsupported
	CodeIO           Code = "io_error"             // none
	CodeCanceled     Code = "canceled"             // the context's error
)

// Error is the one error type capfs returns. It carries a stable Code, the operation
// and the path as the guest named it (relative to the capability it called). It never
// carries a host path: backends build it with NewError or Errno, which keep only the
// cause's errno or message-free sentinel.
//
// Error matches, through errors.Is, the io/fs sentinel of its code (see the Code
// constants), any *Error with the same Code (so errors.Is(err, vfs.ErrNotFound) works),
// and its cause.
type Error struct {
	Code Code   // stable code
	Op   string // operation, e.g. "open", "rename"
	Path string // guest path, relative to the capability that was called
	Dest string // second path of rename/link/copy, if any
	Err  error  // underlying cause; never holds a host path
	msg  string // optional human detail
}

// Sentinels for errors.Is: errors.Is(err, vfs.ErrNotFound) is true for any *Error
// whose Code is not_found.
var (
	ErrOutside      = &Error{Code: CodeOutside}
	ErrInvalidPath  = &Error{Code: CodeInvalidPath}
	ErrPermission   = &Error{Code: CodePermission}
	ErrReadOnly     = &Error{Code: CodeReadOnly}
	ErrRevoked      = &Error{Code: CodeRevoked}
	ErrNotFound     = &Error{Code: CodeNotFound}
	ErrExists       = &Error{Code: CodeExists}
	ErrNotDir       = &Error{Code: CodeNotDir}
	ErrIsDir        = &Error{Code: CodeIsDir}
	ErrNotEmpty     = &Error{Code: CodeNotEmpty}
	ErrTooLarge     = &Error{Code: CodeTooLarge}
	ErrQuota        = &Error{Code: CodeQuota}
	ErrTooManyLinks = &Error{Code: CodeTooManyLinks}
	ErrNotRegular   = &Error{Code: CodeNotRegular}
	ErrCrossMount   = &Error{Code: CodeCrossMount}
	ErrConflict     = &Error{Code: CodeConflict}
	ErrClosed       = &Error{Code: CodeClosed}
	ErrNotSupported = &Error{Code: CodeNotSupported}
)

// NewError returns an *Error. p is the path as the receiving layer knows it; layers
// above re-address it to their own view with Readdress.
func NewError(code Code, op string, p Path, msg string) *Error {
	return &Error{Code: code, Op: op, Path: p.String(), msg: msg}
}

func (e *Error) Error() string {
	s := e.Op
	if e.Path != "" {
		if s != "" {
			s += " "
		}
		s += e.Path
	}
	if e.Dest != "" {
		s += " -> " + e.Dest
	}
	if s != "" {
		s += ": "
	}
	s += string(e.Code)
	if e.msg != "" {
		s += ": " + e.msg
	} else if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the io/fs sentinel of e's code, or an *Error with the
// same code.
func (e *Error) Is(target error) bool {
	if t, ok := target.(*Error); ok {
		return t.Code == e.Code
	}
	switch target {
	case fs.ErrNotExist:
		return e.Code == CodeNotFound
	case fs.ErrExist:
		return e.Code == CodeExists || e.Code == CodeNotEmpty
	case fs.ErrPermission:
		switch e.Code {
		case CodeOutside, CodePermission, CodeReadOnly, CodeRevoked:
			return true
		}
	case fs.ErrInvalid:
		switch e.Code {
		case CodeInvalidPath, CodeNotDir, CodeIsDir, CodeTooManyLinks, CodeNotRegular:
			return true
		}
	case fs.ErrClosed:
		return e.Code == CodeClosed
	case errors.ErrUnsupported:
		return e.Code == CodeNotSupported
	}
	return false
}

// Message returns the human detail, if any.
func (e *Error) Message() string { return e.msg }

// CodeOf returns the Code of the first *Error in err's chain, or "" if there is none.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return ""
}

// Readdress returns err with its paths replaced by the caller's view of them. Layers
// use it to turn a backend-relative path into the guest's path. It returns err unchanged
// if it is not an *Error, and never modifies err itself.
func Readdress(err error, op, path, dest string) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	c := *e
	if op != "" {
		c.Op = op
	}
	c.Path = path
	c.Dest = dest
	return &c
}

// Errno converts a host error into an *Error with the matching code. Only the errno
// (or the io/fs sentinel) is kept as the cause: the message of an *fs.PathError or
// *os.LinkError, which contains a host path, is dropped. nil stays nil; an *Error is
// re-addressed to p.
func Errno(op string, p Path, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return Readdress(e, op, p.String(), "")
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return &Error{Code: codeForErrno(errno), Op: op, Path: p.String(), Err: errno}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &Error{Code: CodeNotFound, Op: op, Path: p.String(), Err: fs.ErrNotExist}
	case errors.Is(err, fs.ErrExist):
		return &Error{Code: CodeExists, Op: op, Path: p.String(), Err: fs.ErrExist}
	case errors.Is(err, fs.ErrPermission):
		return &Error{Code: CodePermission, Op: op, Path: p.String(), Err: fs.ErrPermission}
	case errors.Is(err, fs.ErrClosed):
		return &Error{Code: CodeClosed, Op: op, Path: p.String(), Err: fs.ErrClosed}
	case errors.Is(err, fs.ErrInvalid):
		return &Error{Code: CodeInvalidPath, Op: op, Path: p.String(), Err: fs.ErrInvalid}
	case errors.Is(err, errors.ErrUnsupported):
		return &Error{Code: CodeNotSupported, Op: op, Path: p.String(), Err: errors.ErrUnsupported}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		// Keep the cause only if it is host-path free (a bare sentinel or errno).
		return &Error{Code: CodeIO, Op: op, Path: p.String(), msg: "i/o error"}
	}
	return &Error{Code: CodeIO, Op: op, Path: p.String(), msg: "i/o error"}
}

func codeForErrno(e syscall.Errno) Code {
	switch e {
	case syscall.ENOENT:
		return CodeNotFound
	case syscall.EEXIST:
		return CodeExists
	case syscall.ENOTEMPTY:
		return CodeNotEmpty
	case syscall.ENOTDIR:
		return CodeNotDir
	case syscall.EISDIR:
		return CodeIsDir
	case syscall.EACCES, syscall.EPERM, syscall.EBADF:
		// EBADF from a live descriptor means "not open for this": writing through a
		// read-only handle. A closed *os.File reports fs.ErrClosed instead.
		return CodePermission
	case syscall.EROFS:
		return CodeReadOnly
	case syscall.EXDEV:
		return CodeCrossMount
	case syscall.ELOOP, syscall.EMLINK:
		return CodeTooManyLinks
	case syscall.EFBIG:
		return CodeTooLarge
	case syscall.ENOSPC, syscall.EDQUOT:
		return CodeQuota
	case syscall.EINVAL, syscall.ENAMETOOLONG:
		return CodeInvalidPath
	case syscall.ENXIO, syscall.ENODEV:
		// Opening a FIFO with no reader, or a device with nothing behind it.
		return CodeNotRegular
	case syscall.ENOSYS, syscall.EOPNOTSUPP:
		return CodeNotSupported
	}
	return CodeIO
}
