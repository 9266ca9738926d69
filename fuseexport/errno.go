//go:build linux

package fuseexport

import (
	"errors"
	"syscall"

	"github.com/capfs/capfs/vfs"
)

// opKind says how a refusal reads to the kernel: a request that looks a name up
// (lookup, getattr, readlink, readdir) answers a path the policy hides as absent;
// a request that changes the tree answers it as a permission error.
type opKind int

const (
	opLookup opKind = iota // lookup, getattr, readdir, readlink: refusals hide the path
	opRead                 // open for reading, read
	opWrite                // every request that changes something
)

// Errno maps an error from a Dir call to the errno the kernel returns to the
// process that made the request. The mapping is by [vfs.Code]:
//
//	not_found                            ENOENT
//	fs_permission_denied                 ENOENT for lookups (a hidden path is absent), EACCES otherwise
//	path_outside_sandbox                 ENOENT for lookups, EPERM otherwise (a link leaving the mount)
//	read_only                            EROFS
//	revoked                              EACCES
//	already_exists                       EEXIST
//	not_empty                            ENOTEMPTY
//	not_a_directory                      ENOTDIR
//	is_a_directory                       EISDIR
//	file_too_large                       EFBIG
//	quota_exceeded                       ENOSPC
//	too_many_links                       ELOOP
//	not_regular_file                     EPERM (FIFOs, sockets and devices are refused)
//	invalid_path                         EINVAL
//	cross_mount                          EXDEV
//	conflict                             ESTALE (the entry changed under the call)
//	closed                               EBADF
//	not_supported                        EOPNOTSUPP
//	canceled                             EINTR
//	io_error and anything else           the errno it carries, else EIO
func Errno(err error) syscall.Errno { return errnoOf(err, opWrite) }

func errnoOf(err error, kind opKind) syscall.Errno {
	if err == nil {
		return 0
	}
	switch code := vfs.CodeOf(err); {
	case kind == opLookup && (code == vfs.CodePermission || code == vfs.CodeOutside):
		return syscall.ENOENT // a lookup of a name the Dir refuses finds nothing
	case code == vfs.CodeNotRegular:
		return syscall.EPERM // the kernel's answer for an operation a special file refuses
	case code != vfs.CodeIO && code != "":
		return code.Errno() // the one mapping (see vfs.Code.Errno)
	}
	var e syscall.Errno
	if errors.As(err, &e) && e != 0 {
		return e
	}
	return syscall.EIO
}
