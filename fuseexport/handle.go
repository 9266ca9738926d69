//go:build linux

package fuseexport

import (
	"context"
	"io"
	"math"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/capfs/capfs/vfs"
)

// handle is an open file: a [vfs.File] of the Backend view (a dir.Handle), checked
// at every call for revocation and, for writes, read-only and the write lock.
type handle struct {
	f     vfs.File
	write bool
	srv   *Server // with Options.Passthrough
	io    *node   // the node whose ioState counts this handle (Options.Passthrough)
	pt    bool    // in passthrough
	tmp   *node   // the unnamed file this handle created (see node.Tmpfile)
	opens *openTable
}

var (
	_ gofs.FileReader    = (*handle)(nil)
	_ gofs.FileWriter    = (*handle)(nil)
	_ gofs.FileFsyncer   = (*handle)(nil)
	_ gofs.FileReleaser  = (*handle)(nil)
	_ gofs.FileFlusher   = (*handle)(nil)
	_ gofs.FileAllocater = (*handle)(nil)
)

// openFlags chooses the kernel's caching for the open file. A file opened for
// reading goes through the page cache, which the kernel keeps from one open to
// the next (FOPEN_KEEP_CACHE): it drops a file's pages when the attributes it
// fetches show another mtime or size (FUSE_AUTO_INVAL_DATA; a write through the
// mount expires them at once, a change through another route is seen within
// AttrTimeout) and when Server.Invalidate names the file. Closing it sends no
// FLUSH (FOPEN_NOFLUSH: nothing to write). A file opened for writing bypasses
// the page cache (FOPEN_DIRECT_IO): each
// read and write is a request to the Dir, as a write-through cache would send
// anyway, because the kernel's write-through page cache, with concurrent
// positional reads and writes on one file, can serve a reader zeros where a
// write has just landed (found by vfstest's shared-handle test through the
// mount). Shared writable mmap still works (FUSE_DIRECT_IO_ALLOW_MMAP, Linux
// 6.6 and later).
func (h *handle) openFlags() uint32 {
	if h.write {
		return fuse.FOPEN_DIRECT_IO
	}
	return fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH
}

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h.srv != nil {
		h.srv.served.Add(1)
	}
	n, err := h.f.ReadAt(dest, off)
	if err != nil && err != io.EOF && n == 0 {
		return nil, errnoOf(err, opRead)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if h.srv != nil {
		h.srv.served.Add(1)
	}
	n, err := h.f.WriteAt(data, off)
	if err != nil && n == 0 {
		return 0, errnoOf(err, opWrite)
	}
	return uint32(n), 0
}

func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return errnoOf(h.f.Sync(), opWrite)
}

func (h *handle) Flush(ctx context.Context) syscall.Errno { return 0 }

// Allocate is fallocate(2) for mode 0 and FALLOC_FL_KEEP_SIZE; other modes
// (punching or zeroing ranges) are EOPNOTSUPP. Mode 0 grows the file to
// off+size with zeros through the Dir (so the write lock and a quota decide
// at once), and KEEP_SIZE, a reservation only, changes nothing. No space is
// reserved on the host: that would need the host descriptor, whose one use
// is passthrough (package hostfd).
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	switch {
	case !h.write:
		return syscall.EBADF
	case mode&^unix.FALLOC_FL_KEEP_SIZE != 0:
		return syscall.EOPNOTSUPP
	case off > math.MaxInt64 || size > math.MaxInt64-off:
		return syscall.EFBIG
	}
	if mode&unix.FALLOC_FL_KEEP_SIZE != 0 {
		return 0
	}
	info, err := h.f.Stat()
	if err == nil && int64(off+size) > info.Size {
		err = h.f.Truncate(int64(off + size))
	}
	return errnoOf(err, opWrite)
}

func (h *handle) Release(ctx context.Context) syscall.Errno {
	if h.opens != nil {
		h.opens.remove(h)
	}
	if t := h.tmp; t != nil {
		t.s.tree.RLock()
		t.dropTmp(uninterrupted(ctx), t)
		t.s.tree.RUnlock()
	}
	if h.io != nil {
		var req <-chan struct{}
		if fc, ok := ctx.(*fuse.Context); ok {
			req = fc.Cancel
		}
		h.io.s.releasing(req, h)
	}
	return errnoOf(h.f.Close(), opRead)
}

// openFlags keeps the flags a Backend's OpenFile takes from an open(2) request.
// O_APPEND is not passed on: the kernel computes every append's offset (under
// the inode lock, from the size it just refreshed) and sends it with the write.
func openFlags(flags uint32) int {
	f := int(flags) & syscall.O_ACCMODE
	if flags&syscall.O_TRUNC != 0 && f != os.O_RDONLY {
		f |= os.O_TRUNC
	}
	return f
}

func kindOfOpen(flags uint32) opKind {
	if flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		return opRead
	}
	return opWrite
}
