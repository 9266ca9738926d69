package dir

import "github.com/capfs/capfs/internal/hostfd"

// HostFd forwards to the backend's file while the capability is live (see
// package hostfd: the descriptor escapes the Handle's later checks, so only
// capfs's own code that can rule out a revocation or lock while it is used
// asks for it).
func (f handleFile) HostFd(t hostfd.Token) (int, bool) {
	if f.closed.Load() || f.s.gate.state()&(revokedBit|lockedBit) != 0 {
		return -1, false
	}
	return hostfd.Of(f.f)
}
