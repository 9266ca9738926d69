//go:build !unix

package vfstest

import (
	"io/fs"
	"os"
)

// hostRename is os.Rename on systems without a POSIX rename.
func hostRename(from, to string) error { return os.Rename(from, to) }

// nlink returns 0: the host link count is unknown on this system.
func nlink(fs.FileInfo) int { return 0 }

// inode returns 0: the host inode number is unknown on this system.
func inode(fs.FileInfo) uint64 { return 0 }
