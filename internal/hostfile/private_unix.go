//go:build unix

package hostfile

import (
	"os"
	"syscall"
)

// ownedByOther reports whether st's owner is not this process's user.
func ownedByOther(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(sys.Uid) != os.Getuid()
}
