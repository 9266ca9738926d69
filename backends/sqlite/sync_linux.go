//go:build linux

package sqlite

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync makes f's data durable (fdatasync: the metadata a read needs, not
// the times).
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
