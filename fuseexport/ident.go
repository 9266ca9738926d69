//go:build linux

package fuseexport

import (
	"context"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/capfs/capfs/vfs"
)

// identity is the identity of the kernel's node for p, found with info and
// numbered ino, under parent. Entries with one inode number share one node,
// so the kernel keeps one set of pages and attributes for all names of a
// file, except where the backend's names of one file part on writing
// (vfs.Features.LinkWritesPrivate: the physical backend gives the name
// written a private copy). There each name of a regular file with several
// names gets a node of its own (the same inode number, another generation):
// the kernel's open carries no name, only its node, and a node with one name
// opens that name, not whichever name was added last. A name keeps its node
// for as long as the kernel holds it.
func (s *Server) identity(parent *node, p vfs.Path, info vfs.Info, ino uint64) gofs.StableAttr {
	id := gofs.StableAttr{Mode: vfs.UnixMode(info.Mode) & syscall.S_IFMT, Ino: ino}
	if !s.namesPart || id.Mode != syscall.S_IFREG || info.Nlink < 2 {
		return id
	}
	if ch := parent.GetChild(p.Base()); ch != nil && ch.StableAttr().Ino == ino {
		return ch.StableAttr()
	}
	id.Gen = s.gens.Add(1)
	return id
}

// attrTime is how long the kernel may keep the attributes info gives: the
// mount's attribute timeout, or no time for a file whose names have nodes of
// their own (see [Server.identity]). A link, unlink or rename through one
// name changes the count every name shows, and the kernel refreshes only the
// node it acted on.
func (s *Server) attrTime(info vfs.Info) time.Duration {
	if s.namesPart && info.Mode.IsRegular() && info.Nlink > 1 {
		return 0
	}
	return s.attrTTL()
}

// replacedBy notes that a rename through the mount put another file at name
// in directory dir, the node's last name. The name is kept, not its path:
// a later rename of dir moves it.
func (n *node) replacedBy(dir *node, name string) {
	n.lastMu.Lock()
	n.movedIn, n.movedAt = dir, name
	n.lastMu.Unlock()
}

// noteReplaced notes, for openReplaced, that a rename through the mount put
// moved (a node, or nil) at name in directory n, in place of dest (a node,
// or nil). The tree lock is held.
func (n *node) noteReplaced(dest, moved *gofs.Inode, name string) {
	if dest == nil || dest == moved {
		return
	}
	dest.Operations().(*node).replacedBy(n, name)
}

// openReplaced opens a regular file whose node lost its last name to a
// rename through the mount: it opens the file that holds the name now, at
// the name's path now, as a lookup after the rename would. The open then
// takes effect after the rename, not before it; on a local file system both orders can happen. The
// handle bypasses the page cache, which holds the replaced file's pages.
// Any other nameless node answers ENOENT, as before its name went.
func (n *node) openReplaced(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	n.lastMu.Lock()
	dir, name := n.movedIn, n.movedAt
	n.lastMu.Unlock()
	if dir == nil || n.StableAttr().Mode != syscall.S_IFREG || flags&syscall.O_CREAT != 0 {
		return nil, 0, syscall.ENOENT
	}
	p, errno := dir.child(name)
	if errno != 0 {
		return nil, 0, syscall.ENOENT
	}
	if info, err := n.s.b.Lstat(ctx, p); err != nil || !info.Mode.IsRegular() {
		return nil, 0, syscall.ENOENT
	}
	f, err := n.s.b.OpenFile(ctx, p, openFlags(flags), 0)
	if err != nil {
		return nil, 0, errnoOf(err, kindOfOpen(flags))
	}
	fh, fl, errno := n.s.fileHandle(n, &handle{f: f, write: flags&syscall.O_ACCMODE != syscall.O_RDONLY})
	return fh, fl&^fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_DIRECT_IO, errno
}
