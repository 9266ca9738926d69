//go:build linux

package fuseexport

import (
	"context"
	"os"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/capfs/capfs/vfs"
)

// An open directory lists its entries once, at its first read, as a
// directory stream does. With Options.ReadDirPlus the listing also carries
// each entry's status (dir.Dir.ReadDirVisibleInfo, one pass over each layer
// where the backend can), and a READDIRPLUS answers an entry from it
// (gofs.FileLookuper) instead of a lookup of its own: `rm -rf` of a large
// tree in a lazy run asked one full path resolution per entry for it.
//
// A status from the listing is as fresh as the kernel's own cache of it
// would be, and never staler than a lookup's where the mount itself changed
// something. It is used only while
//   - no request that may change an entry (a write, a change of attributes,
//     a creation, removal or rename, an open for writing) has reached the
//     server since the listing (Server.changes),
//   - the listing is younger than the attribute timeout (the time the
//     kernel trusts an attribute it was given without asking again; never
//     with caching off),
//   - the name is no file open in passthrough (whose writes reach no
//     server), and
//   - the entry is no regular file with other hard links (its other names
//     may be open).
//
// Otherwise the entry is looked up as LOOKUP looks it up.

// dirHandle is an open directory (see above).
type dirHandle struct {
	n *node

	mu     sync.Mutex
	listed bool
	ents   []fuse.DirEntry
	infos  map[string]vfs.Info // by name, with Options.ReadDirPlus
	gen    uint64              // Server.changes when listed
	at     time.Time
	idx    int
}

var (
	_ gofs.NodeOpendirHandler = (*node)(nil)
	_ gofs.FileReaddirenter   = (*dirHandle)(nil)
	_ gofs.FileSeekdirer      = (*dirHandle)(nil)
	_ gofs.FileLookuper       = (*dirHandle)(nil)
	_ gofs.FileFsyncdirer     = (*dirHandle)(nil)
)

// OpendirHandle opens directory n; it is listed at its first read.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return &dirHandle{n: n}, 0, 0
}

// Readdirent returns the next entry, listing the directory first if it was
// not yet listed.
func (h *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if errno := h.list(ctx); errno != 0 {
		return nil, errno
	}
	if h.idx >= len(h.ents) {
		return nil, 0
	}
	e := h.ents[h.idx]
	h.idx++
	e.Off = uint64(h.idx)
	return &e, 0
}

// Seekdir moves to the entry after off (0: the first), as a listed stream
// does.
func (h *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if errno := h.list(ctx); errno != 0 {
		return errno
	}
	if off > uint64(len(h.ents)) {
		return syscall.EINVAL
	}
	h.idx = int(off)
	return 0
}

// Fsyncdir makes the directory's entries durable as its backend can: the
// directory is opened through the Dir (decided and audited as a read) and
// synced (a physical directory is fsync'ed; memory has nothing to write, nor
// has a backend that is read-only or keeps no directory to sync).
func (h *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	n := h.n
	ctx = uninterrupted(ctx)
	n.s.tree.RLock()
	p, errno := n.path()
	n.s.tree.RUnlock()
	if errno == errNameless {
		return 0 // removed: nothing of it is left to write
	}
	if errno != 0 {
		return errno
	}
	f, err := n.s.b.OpenFile(ctx, p, os.O_RDONLY, 0)
	if err != nil {
		return errnoOf(err, opLookup)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch vfs.CodeOf(err) {
	case vfs.CodeReadOnly, vfs.CodeNotSupported:
		return 0 // nothing of the directory to write, as fsync on a read-only file system
	}
	return errnoOf(err, opWrite)
}

// list lists the directory unless it is listed. h.mu is held.
func (h *dirHandle) list(ctx context.Context) syscall.Errno {
	if h.listed {
		return 0
	}
	n := h.n
	ctx = uninterrupted(ctx)
	n.s.tree.RLock()
	defer n.s.tree.RUnlock()
	p, errno := n.path()
	if errno == errNameless {
		return syscall.ENOENT // removed while open: Linux's answer for a dead directory
	}
	if errno != 0 {
		return errno
	}
	gen, at := n.s.changes.Load(), time.Now()
	var err error
	if n.s.opts.ReadDirPlus {
		h.ents, h.infos, err = n.s.listInfo(ctx, p)
	} else {
		h.ents, err = n.s.list(ctx, p)
	}
	if err != nil {
		return errnoOf(err, opLookup)
	}
	h.listed, h.gen, h.at = true, gen, at
	return 0
}

// Lookup answers the lookup of name, the entry Readdirent returned last, for
// a READDIRPLUS: from the listing where its status may be trusted (see
// above), else as LOOKUP.
func (h *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if child, errno, ok := h.lookupListed(ctx, name, out); ok {
		return child, errno
	}
	return h.n.Lookup(ctx, name, out)
}

// lookupListed is Lookup from the listing; ok is false where the listing's
// status may not be used.
func (h *dirHandle) lookupListed(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno, bool) {
	h.mu.Lock()
	info, ok := h.infos[name]
	fresh := ok && h.gen == h.n.s.changes.Load() && time.Since(h.at) < h.n.s.attrTTL()
	h.mu.Unlock()
	if !fresh || (info.Mode.IsRegular() && info.Nlink > 1) || h.n.s.openDirect(h.n.GetChild(name)) {
		return nil, 0, false
	}
	n := h.n
	ctx = uninterrupted(ctx)
	n.s.tree.RLock()
	defer n.s.tree.RUnlock()
	p, errno := n.child(name)
	if errno != 0 {
		return nil, 0, false
	}
	if errno := n.s.admit(ctx, p, info.Mode); errno != 0 {
		return nil, errno, true
	}
	n.s.listed.Add(1)
	return n.s.newChild(ctx, n, p, info, out), 0, true
}

// openDirect reports whether in is a file open in passthrough, whose writes
// (if any) reach no server.
func (s *Server) openDirect(in *gofs.Inode) bool {
	if in == nil {
		return false
	}
	n, ok := in.Operations().(*node)
	if !ok {
		return true
	}
	s.ptMu.Lock()
	defer s.ptMu.Unlock()
	return n.io.pt > 0
}

// attrTTL is how long the kernel trusts attributes the mount gives it: 0
// with caching off.
func (s *Server) attrTTL() time.Duration { return cacheTime(s.opts.AttrTimeout) }

// cacheTime is the time the kernel is told it may cache for, given an
// Options timeout: zero means the default (one second), negative none.
func cacheTime(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return time.Second
	case d < 0:
		return 0
	}
	return d
}

// changed counts a request that may have changed an entry (see above).
func (c countingFS) changed() { c.s.changes.Add(1) }

func (c countingFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	defer c.changed()
	return c.RawFileSystem.SetAttr(cancel, in, out)
}

func (c countingFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	defer c.changed()
	return c.RawFileSystem.Mknod(cancel, in, name, out)
}

func (c countingFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	defer c.changed()
	return c.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (c countingFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	defer c.changed()
	return c.RawFileSystem.Unlink(cancel, h, name)
}

func (c countingFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	defer c.changed()
	return c.RawFileSystem.Rmdir(cancel, h, name)
}

func (c countingFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, from, to string) fuse.Status {
	defer c.changed()
	return c.RawFileSystem.Rename(cancel, in, from, to)
}

func (c countingFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	defer c.changed()
	return c.RawFileSystem.Link(cancel, in, name, out)
}

func (c countingFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	defer c.changed()
	return c.RawFileSystem.Symlink(cancel, h, target, name, out)
}

func (c countingFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	defer c.changed()
	return c.RawFileSystem.Create(cancel, in, name, out)
}

func (c countingFS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	defer c.changed()
	return c.RawFileSystem.Tmpfile(cancel, in, out)
}

func (c countingFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if in.Flags&(syscall.O_ACCMODE|syscall.O_TRUNC) != syscall.O_RDONLY {
		defer c.changed()
	}
	return c.RawFileSystem.Open(cancel, in, out)
}

func (c countingFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	defer c.changed()
	return c.RawFileSystem.Write(cancel, in, data)
}

func (c countingFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	defer c.changed()
	return c.RawFileSystem.Writev(cancel, in, data)
}

func (c countingFS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	defer c.changed()
	return c.RawFileSystem.CopyFileRange(cancel, in)
}

func (c countingFS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	defer c.changed()
	return c.RawFileSystem.Fallocate(cancel, in)
}
