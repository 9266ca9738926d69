// Package hostfd lets capfs's own packages reach the host file descriptor
// under an open file, for the one use that needs it: handing a file to the
// kernel for FUSE passthrough (fuseexport.Options.Passthrough).
//
// Guarantees: only regular files a backend opened on the host, with no
// size limit of their own to enforce, answer. [Filer] is an optional File
// interface of vfs.OptionalFiles, so every File wrapper keeps it where the
// wrapped File has it (vfs.WrapFile), and vfstest.CheckForwards fails on
// one that drops it. A wrapper whose per-call checks the descriptor would
// escape withholds it, or answers only where they still hold: a read-only
// view gives a descriptor open for reading only; a quota's writable files,
// an overlay's lower files and a revoked or locked Dir's handles give none.
// The method takes a [Token], a type no package outside this module can
// name, so the descriptor is not part of capfs's public API.
//
// What it does not guarantee: a descriptor handed out escapes every later
// per-call check of the wrappers it went through (a Dir's revocation and
// write lock, hooks on reads and writes). And its access mode bounds reads
// and writes only: fchmod, futimens and the like work on a descriptor open
// for reading. A caller uses it only where those checks cannot happen while
// the descriptor is in use, for reads and writes only (FUSE passthrough),
// and says so.
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
