//go:build linux

package fuseexport

import (
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/internal/hostfd"
)

// Passthrough (Options.Passthrough): a file whose backend opened it on the
// host with nothing to enforce per call (today: a file of an Overlay's
// private upper directory, through a Dir) is handed to the kernel, which then
// reads and writes it directly (FUSE passthrough, Linux 6.9 and later, a
// server with CAP_SYS_ADMIN): no request per read or write.
//
// The kernel holds every open file of an inode in one I/O mode: in
// passthrough, all on the same backing file; otherwise none in passthrough
// (an open that breaks this fails with EIO). The server keeps the same
// account per node (ioState) and decides each open by it:
//   - an eligible file, on a node with no other opens, or with passthrough
//     opens on this very file (device and inode) only: passthrough;
//   - a node in passthrough whose new open is not eligible or is another
//     file (a lower file, or a file replaced by another route while the node
//     was open): ESTALE, the open fails rather than reach the wrong file;
//   - otherwise the open is served as without Passthrough, and counted: while
//     it is open, no open of the node is passed through. (A direct-I/O open
//     beside passthrough ones is legal for the kernel, but go-fuse releases
//     a node's backing-file reference at every RELEASE of the node, so its
//     close would drop the backing the passthrough opens use, and the next
//     passthrough open, registering another, would fail with EIO.)
// The account is released when the server has done with RELEASE: after the
// kernel has released its own, and after go-fuse has dropped the node's
// backing-file reference (countingFS.Release), so it never undercounts what
// the kernel or go-fuse holds. (Released any earlier, the account of a
// served handle would let a passthrough open register a backing file that
// the rest of that RELEASE then drops: the open fails with EIO.)

// ioState is a node's account of its open handles (guarded by Server.ptMu).
type ioState struct {
	other    int // opens served by the server (page cache or direct I/O)
	pt       int // opens in passthrough
	dev, ino uint64
}

// ptHandle is a handle the kernel reads and writes directly.
type ptHandle struct {
	*handle
	fd int
}

var _ gofs.FilePassthroughFder = (*ptHandle)(nil)

// PassthroughFd gives go-fuse the descriptor to register with the kernel
// (called once, at the open).
func (h *ptHandle) PassthroughFd() (int, bool) { return h.fd, true }

// asHandle returns the handle behind a file handle go-fuse passes back, or
// nil.
func asHandle(fh gofs.FileHandle) *handle {
	switch h := fh.(type) {
	case *handle:
		return h
	case *ptHandle:
		return h.handle
	}
	return nil
}

// fileHandle returns what an open of n with the handle h gives the kernel.
// On an error, h's file is closed.
func (s *Server) fileHandle(n *node, h *handle) (gofs.FileHandle, uint32, syscall.Errno) {
	flags := h.openFlags()
	s.opens.add(n, h) // until Release (fchmod and futimens of a file with no name left)
	if !s.opts.Passthrough {
		return h, flags, 0
	}
	h.srv = s
	fd, ok := hostfd.Of(h.f)
	var st unix.Stat_t
	if ok && (unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || !s.passthroughWorks(fd)) {
		ok = false
	}
	s.ptMu.Lock()
	defer s.ptMu.Unlock()
	io := &n.io
	switch {
	case ok && io.other == 0 && (io.pt == 0 || io.dev == st.Dev && io.ino == st.Ino):
		io.pt++
		io.dev, io.ino = st.Dev, st.Ino
		h.io, h.pt = n, true
		// No FOPEN_DIRECT_IO: the kernel serves a direct-I/O open through
		// the server even when it passes the file through. FOPEN_NOFLUSH:
		// the mount's page cache holds nothing of a passthrough file (its
		// pages are the backing file's), so a FLUSH at close would wait
		// for nothing.
		return &ptHandle{handle: h, fd: fd}, flags&^fuse.FOPEN_DIRECT_IO | fuse.FOPEN_NOFLUSH, 0
	case io.pt > 0:
		s.opens.remove(h)
		_ = h.f.Close()
		return nil, 0, syscall.ESTALE
	}
	io.other++
	h.io = n
	return h, flags, 0
}

// releasing notes that h is being released by the RELEASE request whose
// cancel channel is req: its account is returned once go-fuse has done with
// the request (afterRelease). Without a request (nil), at once.
func (s *Server) releasing(req <-chan struct{}, h *handle) {
	if h.io == nil {
		return
	}
	if req == nil {
		s.released(h)
		return
	}
	s.ptMu.Lock()
	if s.pendingRel == nil {
		s.pendingRel = map[<-chan struct{}]*handle{}
	}
	s.pendingRel[req] = h
	s.ptMu.Unlock()
}

// afterRelease returns the account of the handle the RELEASE request req
// released, if any.
func (s *Server) afterRelease(req <-chan struct{}) {
	s.ptMu.Lock()
	h := s.pendingRel[req]
	delete(s.pendingRel, req)
	s.ptMu.Unlock()
	if h != nil {
		s.released(h)
	}
}

// released returns h's share of its node's account.
func (s *Server) released(h *handle) {
	if h.io == nil {
		return
	}
	s.ptMu.Lock()
	if h.pt {
		h.io.io.pt--
	} else {
		h.io.io.other--
	}
	s.ptMu.Unlock()
}

// passthroughWorks reports whether the kernel takes fd as a backing file:
// the first eligible open registers it once and unregisters it (go-fuse,
// finding it refused, would stop trying for the mount's life, while this
// account would believe the node in passthrough). A server without the
// privilege, or a backing file too deep in stacked file systems, turns
// Passthrough off for the mount.
func (s *Server) passthroughWorks(fd int) bool {
	s.ptOnce.Do(func() {
		id, errno := s.fuse.RegisterBackingFd(&fuse.BackingMap{Fd: int32(fd)})
		if errno != 0 {
			return
		}
		s.fuse.UnregisterBackingFd(id)
		s.ptOn.Store(true)
	})
	return s.ptOn.Load()
}
