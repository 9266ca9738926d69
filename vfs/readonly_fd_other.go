//go:build !unix

package vfs

// readOnlyFd reports false: without fcntl, no descriptor's access mode is
// known, so a read-only view hands out none.
func readOnlyFd(int) bool { return false }
