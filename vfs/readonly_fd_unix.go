//go:build unix

package vfs

import "golang.org/x/sys/unix"

// readOnlyFd reports whether fd is open for reading only.
func readOnlyFd(fd int) bool {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	return err == nil && fl&unix.O_ACCMODE == unix.O_RDONLY
}
