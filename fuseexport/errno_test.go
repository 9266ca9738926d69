//go:build linux

package fuseexport

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// TestErrnoTable: each code maps to the errno Errno's table names, a
// lookup hides a refusal as absence, and an error that is no *vfs.Error
// keeps the errno it carries.
func TestErrnoTable(t *testing.T) {
	p := vfs.MustParse("a")
	cases := []struct {
		code  vfs.Code
		kind  opKind
		errno syscall.Errno
	}{
		{vfs.CodeNotFound, opWrite, syscall.ENOENT},
		{vfs.CodePermission, opWrite, syscall.EACCES},
		{vfs.CodePermission, opLookup, syscall.ENOENT},
		{vfs.CodeOutside, opWrite, syscall.EPERM},
		{vfs.CodeOutside, opLookup, syscall.ENOENT},
		{vfs.CodeReadOnly, opWrite, syscall.EROFS},
		{vfs.CodeRevoked, opWrite, syscall.EACCES},
		{vfs.CodeExists, opWrite, syscall.EEXIST},
		{vfs.CodeNotEmpty, opWrite, syscall.ENOTEMPTY},
		{vfs.CodeNotDir, opWrite, syscall.ENOTDIR},
		{vfs.CodeIsDir, opWrite, syscall.EISDIR},
		{vfs.CodeTooLarge, opWrite, syscall.EFBIG},
		{vfs.CodeQuota, opWrite, syscall.ENOSPC},
		{vfs.CodeTooManyLinks, opWrite, syscall.ELOOP},
		{vfs.CodeNotRegular, opWrite, syscall.EPERM},
		{vfs.CodeInvalidPath, opWrite, syscall.EINVAL},
		{vfs.CodeCrossMount, opWrite, syscall.EXDEV},
		{vfs.CodeConflict, opWrite, syscall.ESTALE},
		{vfs.CodeClosed, opWrite, syscall.EBADF},
		{vfs.CodeNotSupported, opWrite, syscall.EOPNOTSUPP},
		{vfs.CodeCanceled, opWrite, syscall.EINTR},
		{vfs.CodeIO, opWrite, syscall.EIO},
	}
	for _, c := range cases {
		if got := errnoOf(vfs.NewError(c.code, "op", p, ""), c.kind); got != c.errno {
			t.Errorf("%s (kind %d): %v, want %v", c.code, c.kind, got, c.errno)
		}
	}
	if got := errnoOf(fmt.Errorf("wrapped: %w", syscall.ENOSPC), opWrite); got != syscall.ENOSPC {
		t.Errorf("a bare errno: %v, want ENOSPC", got)
	}
	if got := errnoOf(nil, opWrite); got != 0 {
		t.Errorf("nil: %v", got)
	}
}
