package vfs

import (
	"errors"
	"io/fs"
	"syscall"
)

// Code is a stable, machine-readable error code. Codes are part of the API.
// They never change meaning, and new ones are only added.
type Code string

// The error codes. Each matches the [io/fs] sentinel named beside it with [errors.Is].
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

// Error is the one error type capfs returns. It carries a stable [Code], the
// operation and the path as the guest named it (relative to the capability it
// called). It never carries a host path. Backends build it with [NewError] or
// [Errno], which keep only the cause's errno or message-free sentinel.
//
// Through [errors.Is], Error matches the io/fs sentinel of its code (see the
// Code constants), any *Error with the same Code, and its cause. So
// errors.Is(err, [ErrNotFound]) works.
type Error struct {
	Code Code   // stable code
	Op   string // operation, e.g. "open", "rename"
	Path string // guest path, relative to the capability that was called (its bytes: see Error)
	Dest string // second path of rename/link/copy, if any
	Err  error  // underlying cause; never holds a host path
	msg  string // optional human detail
}

// Sentinels for [errors.Is]. errors.Is(err, vfs.ErrNotFound) is true for any
// [*Error] whose Code is not_found.
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

// NewError returns an [*Error]. p is the path as the receiving layer knows it.
// Layers above re-address it to their own view with [Readdress].
func NewError(code Code, op string, p Path, msg string) *Error {
	return &Error{Code: code, Op: op, Path: p.String(), msg: msg}
}

// Error returns "op path -> dest: code: detail", leaving out the empty parts.
// The detail is the message, or else the cause's text. The paths are their
// bytes, which need not be UTF-8 nor printable: a text surface escapes the
// whole text once, with internal/termsafe (the CLI and the MCP server do), so
// that a name shows in one escaped form everywhere ("caf\xe9").
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

// Is reports whether target is the io/fs sentinel of e's code, or an [*Error]
// with the same code.
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

// MessageOf returns the message of the first [*Error] in err's chain: what it
// says without its op and path. It is "" when there is none.
func MessageOf(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.msg
	}
	return ""
}

// CodeOf returns the [Code] of the first [*Error] in err's chain, or "" if there is none.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return ""
}

// Readdress returns err with its paths replaced by the caller's view of them.
// Layers use it to turn a backend-relative path into the guest's path. It returns
// err unchanged if it is not an [*Error]. It never modifies err itself.
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

// Errno converts a host error into an [*Error] with the matching code.
// Only the errno (or the io/fs sentinel) is kept as the cause. The message of an
// [*fs.PathError] or [*os.LinkError], which contains a host path, is dropped. nil
// stays nil. An *Error is re-addressed to p.
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

// Errno returns the errno c stands for on POSIX: not_found is ENOENT,
// already_exists EEXIST, read_only EROFS, and so on. io_error and unknown codes
// are EIO. [Errno] (the function) maps it back.
//
//	not_found ENOENT             already_exists EEXIST     not_empty ENOTEMPTY
//	not_a_directory ENOTDIR      is_a_directory EISDIR     read_only EROFS
//	fs_permission_denied EACCES  revoked EACCES            path_outside_sandbox EPERM
//	cross_mount EXDEV            too_many_links ELOOP      file_too_large EFBIG
//	quota_exceeded ENOSPC        invalid_path EINVAL       not_regular_file EINVAL
//	closed EBADF                 not_supported EOPNOTSUPP  canceled EINTR
//	conflict ESTALE
func (c Code) Errno() syscall.Errno {
	if e, ok := codeErrno[c]; ok {
		return e
	}
	return syscall.EIO
}

var codeErrno = map[Code]syscall.Errno{
	CodeNotFound:     syscall.ENOENT,
	CodeExists:       syscall.EEXIST,
	CodeNotEmpty:     syscall.ENOTEMPTY,
	CodeNotDir:       syscall.ENOTDIR,
	CodeIsDir:        syscall.EISDIR,
	CodeReadOnly:     syscall.EROFS,
	CodePermission:   syscall.EACCES,
	CodeRevoked:      syscall.EACCES,
	CodeOutside:      syscall.EPERM,
	CodeCrossMount:   syscall.EXDEV,
	CodeTooManyLinks: syscall.ELOOP,
	CodeTooLarge:     syscall.EFBIG,
	CodeQuota:        syscall.ENOSPC,
	CodeInvalidPath:  syscall.EINVAL,
	CodeNotRegular:   syscall.EINVAL,
	CodeClosed:       syscall.EBADF,
	CodeNotSupported: syscall.EOPNOTSUPP,
	CodeCanceled:     syscall.EINTR,
	CodeConflict:     syscall.ESTALE,
}

// PathError returns err in the shape the os package gives.
// The result is an [*fs.PathError] with op, the guest's path as the caller named
// it, and the [Code.Errno] of err's code. Both dialects understand it:
// [os.IsNotExist], [os.IsExist] and [os.IsPermission], and [errors.Is] with
// [fs.ErrNotExist], [fs.ErrExist] and [fs.ErrPermission]. nil and errors that
// hold no *Error ([io.EOF]) are returned unchanged.
//
// The wrapped error is the errno, not the [*Error]. [Errno] maps the errno back
// to a code, exactly but for six. revoked, path_outside_sandbox and closed read
// back as fs_permission_denied. not_regular_file reads back as invalid_path.
// conflict and canceled read back as io_error.
func PathError(op, path string, err error) error {
	e, ok := errors.AsType[*Error](err)
	if !ok {
		return err
	}
	return &fs.PathError{Op: op, Path: path, Err: e.Code.Errno()}
}

// ReaddressTo is [Readdress] for a layer that names its paths as [Path]
// values. err gets p (and dest, if given) and keeps its Op. An error that is
// not an [*Error] first becomes one with [Errno](op, p, err). nil stays nil.
func ReaddressTo(err error, op string, p Path, dest ...Path) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*Error](err); !ok {
		err = Errno(op, p, err)
	}
	to := ""
	if len(dest) > 0 {
		to = dest[0].String()
	}
	return Readdress(err, "", p.String(), to)
}

// Under re-addresses err, whose paths are relative to directory p, to the
// paths they have from the root p is in: "a/b" under "w" is "w/a/b", and "."
// under "w" is "w". An error that is not an [*Error] is returned unchanged.
func Under(err error, p Path) error {
	e, ok := errors.AsType[*Error](err)
	if !ok {
		return err
	}
	dest := ""
	if e.Dest != "" {
		dest = under(p, e.Dest)
	}
	return Readdress(err, "", under(p, e.Path), dest)
}

// under joins p and rel, a path relative to it.
func under(p Path, rel string) string {
	switch {
	case p.IsRoot():
		return rel
	case rel == "" || rel == ".":
		return p.String()
	}
	return p.String() + "/" + rel
}

// Reop returns err with only its Op replaced.
// An error that is not an [*Error] is returned unchanged.
func Reop(err error, op string) error {
	e, ok := errors.AsType[*Error](err)
	if !ok {
		return err
	}
	return Readdress(e, op, e.Path, e.Dest)
}

// GuestError returns an *Error addressed to guest paths as the guest wrote
// them, made [PrintablePath].
func GuestError(code Code, op, path, dest, msg string) *Error {
	return &Error{Code: code, Op: op, Path: PrintablePath(path), Dest: PrintablePath(dest), msg: msg}
}

// PrintablePath returns a guest path as errors and audit records show it.
// NUL bytes are spelled out, and the path is cut after 512 bytes.
func PrintablePath(s string) string {
	if len(s) > 512 {
		s = s[:512] + "…"
	}
	return printable(s)
}
