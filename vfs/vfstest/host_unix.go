//go:build unix

package vfstest

import (
	"io/fs"
	"syscall"
)

// hostRename is rename(2): unlike os.Rename, which refuses to replace an existing
// directory, it replaces an empty one as POSIX (and the SPI) says.
func hostRename(from, to string) error { return syscall.Rename(from, to) }

// nlink returns the host link count of fi, or 0 if unknown.
func nlink(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Nlink)
	}
	return 0
}

// inode returns the host inode number of fi, or 0 if unknown.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
