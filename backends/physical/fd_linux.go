//go:build linux

package physical

import (
	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/internal/hostfd"
)

// HostFd gives the descriptor of an open regular file with no size limit of
// its own (a file of a backend made WithMaxFileSize answers no: a write that
// bypassed this file could not be held to the limit). A file not opened for
// writing whose descriptor can write (O_RDONLY|O_TRUNC is opened O_RDWR)
// answers no too. See package hostfd.
func (f *file) HostFd(hostfd.Token) (int, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed || f.typ.IsDir() || f.max != 0 {
		return -1, false
	}
	if !f.write {
		fl, err := unix.FcntlInt(uintptr(f.fd), unix.F_GETFL, 0)
		if err != nil || fl&unix.O_ACCMODE != unix.O_RDONLY {
			return -1, false
		}
	}
	return f.fd, true
}
