//go:build linux

package physical

import "github.com/capfs/capfs/internal/hostfd"

// HostFd gives the descriptor of an open regular file with no size limit of
// its own (a file of a backend made WithMaxFileSize answers no: a write that
// bypassed this file could not be held to the limit). See package hostfd.
func (f *file) HostFd(hostfd.Token) (int, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed || f.typ.IsDir() || f.max != 0 {
		return -1, false
	}
	return f.fd, true
}
