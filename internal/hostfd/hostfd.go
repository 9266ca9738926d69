// Package hostfd lets capfs's own packages reach the host file descriptor
// under an open file, for the one use that needs it: handing a file of a
// lazy sandbox's private upper layer to the kernel for FUSE passthrough
// (fuseexport.Options.Passthrough).
//
// Guarantees: only regular files a backend opened on the host, with no
// size limit of their own to enforce, answer; every wrapper in the chain
// (a Dir's Backend view, the Overlay's upper files) forwards the question
// explicitly, and a wrapper that does not know this package answers no. The
// method takes a Token, a type no package outside this module can name, so
// the descriptor is not part of capfs's public API.
//
// What it does not guarantee: a descriptor handed out escapes every later
// per-call check of the wrappers it went through (a Dir's revocation and
// write lock, hooks on reads and writes). A caller uses it only where those
// cannot happen while the descriptor is in use, and says so.
package hostfd

// Token is the argument of Filer.HostFd; only this module's packages can
// name it.
type Token struct{}

// Filer is implemented by an open file that can name its host descriptor.
// HostFd returns the descriptor, which stays owned by the file (the caller
// neither closes it nor uses it after the file is closed), and whether there
// is one to give.
type Filer interface {
	HostFd(Token) (fd int, ok bool)
}

// Of returns f's host descriptor, if f (or what it wraps, forwarding
// explicitly) has one to give.
func Of(f any) (int, bool) {
	if h, ok := f.(Filer); ok {
		return h.HostFd(Token{})
	}
	return -1, false
}
