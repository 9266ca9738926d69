//go:build linux

package fuseexport

import (
	"context"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/capfs/capfs/vfs"
)

// node is one inode the kernel holds. It keeps no state of its own beyond the
// go-fuse Inode (its parents and names, which go-fuse updates on rename and
// unlink): every request derives the node's path from them and makes one call
// on the exported Dir's Backend view, so the Dir decides each request on the
// path as it is now.
type node struct {
	gofs.Inode
	s  *Server
	io ioState // open handles, with Options.Passthrough (guarded by s.ptMu)

	lastMu  sync.Mutex
	last    fuse.Attr // the attributes answered last, for when the node has no name left
	movedIn *node     // the directory whose name a rename took from the node (see openReplaced)
	movedAt string    // that name
	tmp     bool      // an unnamed file's node, under its hidden name (see Tmpfile)
}

// remember keeps a as the node's attributes last answered.
func (n *node) remember(a *fuse.Attr) {
	n.lastMu.Lock()
	n.last = *a
	n.lastMu.Unlock()
}

// lastAttr is the node's attributes as answered last, with no links: what
// fstat of a descriptor whose file lost its last name gets (a directory
// removed while open has no handle to ask).
func (n *node) lastAttr(out *fuse.Attr) {
	n.lastMu.Lock()
	*out = n.last
	n.lastMu.Unlock()
	out.Nlink = 0
}

var (
	_ gofs.NodeLookuper   = (*node)(nil)
	_ gofs.NodeGetattrer  = (*node)(nil)
	_ gofs.NodeSetattrer  = (*node)(nil)
	_ gofs.NodeOpener     = (*node)(nil)
	_ gofs.NodeCreater    = (*node)(nil)
	_ gofs.NodeMkdirer    = (*node)(nil)
	_ gofs.NodeMknoder    = (*node)(nil)
	_ gofs.NodeUnlinker   = (*node)(nil)
	_ gofs.NodeRmdirer    = (*node)(nil)
	_ gofs.NodeRenamer    = (*node)(nil)
	_ gofs.NodeSymlinker  = (*node)(nil)
	_ gofs.NodeReadlinker = (*node)(nil)
	_ gofs.NodeLinker     = (*node)(nil)
	_ gofs.NodeStatfser   = (*node)(nil)
)

// errNameless is path's answer for a node that is no longer in the tree
// (unlinked while open, or renamed over). It never reaches the kernel as
// such: each request answers as a local file system would for an inode with
// no name (see getattr, openReplaced, Fsyncdir), or ENOENT ([absent]).
const errNameless = syscall.ESTALE

// absent is errno, with a nameless node's answered as ENOENT.
func absent(errno syscall.Errno) syscall.Errno {
	if errno == errNameless {
		return syscall.ENOENT
	}
	return errno
}

// path returns the node's path relative to the exported Dir, from the names
// go-fuse keeps; errNameless for a node with no name left.
func (n *node) path() (vfs.Path, syscall.Errno) {
	var elems []string
	in := n.EmbeddedInode()
	root := in.Root()
	for in != root {
		name, parent := in.Parent()
		if parent == nil {
			return vfs.Path{}, errNameless
		}
		elems = append(elems, name)
		in = parent
	}
	if len(elems) == 0 {
		return vfs.Path{}, 0
	}
	for i, j := 0, len(elems)-1; i < j; i, j = i+1, j-1 {
		elems[i], elems[j] = elems[j], elems[i]
	}
	joined := strings.Join(elems, "/")
	if len(joined) > vfs.MaxPathLen {
		return vfs.Path{}, syscall.ENAMETOOLONG
	}
	p, err := vfs.ParseGuest(joined)
	if err != nil {
		return vfs.Path{}, syscall.ENOENT
	}
	return p, 0
}

// nameMax is the longest name an export accepts, as on Linux's own file
// systems (NAME_MAX).
const nameMax = 255

// child returns the path of name in directory n. A name an unnamed file
// holds (see Tmpfile) is reserved: EPERM.
func (n *node) child(name string) (vfs.Path, syscall.Errno) {
	if hiddenName(name) {
		return vfs.Path{}, syscall.EPERM
	}
	return n.childOf(name)
}

// childOf is child without the reservation.
func (n *node) childOf(name string) (vfs.Path, syscall.Errno) {
	if len(name) > nameMax {
		return vfs.Path{}, syscall.ENAMETOOLONG
	}
	p, errno := n.path()
	if errno != 0 {
		return p, absent(errno) // a removed directory has no entries
	}
	if len(p.String())+1+len(name) > vfs.MaxPathLen {
		// The Dir's paths, from the exported root, are at most PATH_MAX long.
		return vfs.Path{}, syscall.ENAMETOOLONG
	}
	c, err := p.Child(name)
	if err != nil {
		return c, errnoOf(err, opWrite)
	}
	return c, 0
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	n.s.tree.RLock()
	defer n.s.tree.RUnlock()
	if hiddenName(name) {
		return nil, syscall.ENOENT // an unnamed file's (see Tmpfile)
	}
	p, errno := n.child(name)
	if errno != 0 {
		if errno == syscall.EINVAL {
			errno = syscall.ENOENT // a name the Dir cannot hold is absent
		}
		return nil, errno
	}
	info, err := n.s.b.Lstat(ctx, p)
	if err != nil {
		return nil, errnoOf(err, opLookup)
	}
	if errno := n.s.admit(ctx, p, info.Mode); errno != 0 {
		return nil, errno
	}
	return n.s.newChild(ctx, n, p, info, out), 0
}

func (n *node) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	ctx = uninterrupted(ctx)
	n.s.tree.RLock()
	defer n.s.tree.RUnlock()
	return n.getattr(ctx, fh, out)
}

func (n *node) getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h := asHandle(fh); h != nil {
		info, err := h.f.Stat()
		if err != nil {
			return errnoOf(err, opRead)
		}
		n.s.fillAttr(n.StableAttr().Ino, info, &out.Attr)
		out.SetTimeout(n.s.attrTime(info))
		if info.Nlink == 0 {
			if _, errno := n.path(); errno != 0 {
				// Open, and its last name removed (fstat after unlink): no
				// links, as on disk.
				out.Attr.Nlink = 0
			}
		}
		if n.isTmp() {
			out.Attr.Nlink = 0 // an unnamed file (see Tmpfile)
		}
		return 0
	}
	p, errno := n.path()
	if errno == errNameless {
		n.lastAttr(&out.Attr)
		return 0
	}
	if errno != 0 {
		return errno
	}
	info, err := n.s.b.Lstat(ctx, p)
	if err != nil {
		return errnoOf(err, opLookup)
	}
	n.s.fillAttr(n.StableAttr().Ino, info, &out.Attr)
	out.SetTimeout(n.s.attrTime(info))
	if n.isTmp() {
		out.Attr.Nlink = 0 // an unnamed file (see Tmpfile)
	}
	n.remember(&out.Attr)
	return 0
}

func (n *node) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	ctx = uninterrupted(ctx)
	n.s.tree.RLock()
	defer n.s.tree.RUnlock()
	// gone is the node's name lookup's errno: unlinked but open, only the
	// handle's operations remain.
	p, gone := n.path()
	gone = absent(gone)
	if gone != 0 && fh == nil {
		// fchmod, futimens: Linux sends a handle only for ftruncate.
		if h := n.s.opens.any(n); h != nil {
			fh = h
		} else {
			return gone
		}
	}
	isLink := n.StableAttr().Mode == syscall.S_IFLNK
	if errno := n.setOwner(ctx, p, gone, isLink, in); errno != 0 {
		return errno
	}
	if errno := n.setSize(ctx, p, gone, asHandle(fh), in); errno != 0 {
		return errno
	}
	if errno := n.setModeTimes(ctx, p, gone, asHandle(fh), isLink, in); errno != 0 {
		return errno
	}
	return n.getattr(ctx, fh, out)
}

// setOwner is Setattr's chown part, if it asks for one.
func (n *node) setOwner(ctx context.Context, p vfs.Path, gone syscall.Errno, isLink bool, in *fuse.SetAttrIn) syscall.Errno {
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	switch {
	case !uok && !gok:
		return 0
	case gone != 0:
		return gone // fchown of a file with no name left
	}
	return n.s.chown(ctx, p, uid, uok, gid, gok, !isLink)
}

// setSize is Setattr's truncate part, if it asks for one: through the
// handle where it writes, else through the name.
func (n *node) setSize(ctx context.Context, p vfs.Path, gone syscall.Errno, h *handle, in *fuse.SetAttrIn) syscall.Errno {
	size, ok := in.GetSize()
	switch {
	case !ok:
		return 0
	case size > 1<<62:
		return syscall.EFBIG
	case h != nil && h.write:
		return errnoOf(h.f.Truncate(int64(size)), opWrite)
	case gone != 0:
		return gone
	}
	f, err := n.s.b.OpenFile(ctx, p, os.O_WRONLY, 0)
	if err != nil {
		return errnoOf(err, opWrite)
	}
	err = f.Truncate(int64(size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return errnoOf(err, opWrite)
}

// setModeTimes is Setattr's chmod and utimes parts, if it asks for them:
// through the name, a symlink's own times by Lchtimes (a link has no mode
// of its own: chmod of one is EOPNOTSUPP, as on Linux); where the name is
// gone (unlinked, or renamed over), through the open file h (fchmod,
// futimens), which the Dir checks as a write.
func (n *node) setModeTimes(ctx context.Context, p vfs.Path, gone syscall.Errno, h *handle, isLink bool, in *fuse.SetAttrIn) syscall.Errno {
	mode, modeSet := in.GetMode()
	mtime, mok := in.GetMTime()
	atime, aok := in.GetATime()
	if !mok {
		mtime = time.Time{}
	}
	if !aok {
		atime = time.Time{}
	}
	perm := vfs.FileModeOf(mode) &^ fs.ModeType
	b := n.s.b
	switch {
	case !modeSet && !mok && !aok:
		return 0
	case gone != 0 && !attrFile(h):
		return gone // nothing but the name could, and it is gone
	case gone != 0:
		return setModeTimesBy(modeSet, mok || aok,
			func() error { return vfs.FileChmod(h.f, perm) },
			func() error { return vfs.FileChtimes(h.f, atime, mtime) })
	case isLink && modeSet:
		return syscall.EOPNOTSUPP
	case isLink:
		return errnoOf(vfs.Lchtimes(ctx, b, p, atime, mtime), opWrite)
	}
	return setModeTimesBy(modeSet, mok || aok,
		func() error { return b.Chmod(ctx, p, perm) },
		func() error { return b.Chtimes(ctx, p, atime, mtime) })
}

// attrFile reports that h is open on a file that changes its own status
// (vfs.AttrFile).
func attrFile(h *handle) bool {
	if h == nil {
		return false
	}
	_, ok := h.f.(vfs.AttrFile)
	return ok
}

// setModeTimesBy calls chmod if mode is set, then chtimes if times are.
func setModeTimesBy(mode, times bool, chmod, chtimes func() error) syscall.Errno {
	if mode {
		if err := chmod(); err != nil {
			return errnoOf(err, opWrite)
		}
	}
	if !times {
		return 0
	}
	return errnoOf(chtimes(), opWrite)
}

func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	ctx = uninterrupted(ctx)
	n.s.tree.RLock()
	defer n.s.tree.RUnlock()
	p, errno := n.path()
	if errno == errNameless {
		return n.openReplaced(ctx, flags)
	}
	if errno != 0 {
		return nil, 0, errno
	}
	f, err := n.s.b.OpenFile(ctx, p, openFlags(flags), 0)
	if err != nil {
		return nil, 0, errnoOf(err, kindOfOpen(flags))
	}
	return n.s.fileHandle(n, &handle{f: f, write: flags&syscall.O_ACCMODE != syscall.O_RDONLY})
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	ctx = uninterrupted(ctx)
	n.s.tree.RLock()
	defer n.s.tree.RUnlock()
	p, errno := n.child(name)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	if mode&syscall.S_IFMT != 0 && mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, nil, 0, syscall.EPERM
	}
	flag := openFlags(flags) | os.O_CREATE
	perm := vfs.FileModeOf(mode) &^ fs.ModeType
	existed := true
	var (
		f   vfs.File
		err error
	)
	switch {
	case flags&syscall.O_EXCL != 0:
		flag |= os.O_EXCL
		existed = false
		f, err = n.s.b.OpenFile(ctx, p, flag, perm)
	case n.s.privileged:
		// The kernel sends CREATE for a name it believes absent, so the
		// file is created exclusively first: only a file this call made is
		// given to the caller. One made meanwhile through another route
		// fails the exclusive create and is opened, not given away.
		f, err = n.s.b.OpenFile(ctx, p, flag|os.O_EXCL, perm)
		if err == nil {
			existed = false
		} else if vfs.CodeOf(err) == vfs.CodeExists {
			f, err = n.s.b.OpenFile(ctx, p, flag, perm)
		}
	default:
		f, err = n.s.b.OpenFile(ctx, p, flag, perm)
	}
	if err != nil {
		return nil, nil, 0, errnoOf(err, opWrite)
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, 0, errnoOf(err, opWrite)
	}
	if !existed && info.Nlink <= 1 && info.HasOwner && uint32(info.Uid) == uint32(os.Geteuid()) {
		info = n.s.giveToCaller(ctx, p, info)
	}
	info.Name = name
	ch := n.s.newChild(ctx, n, p, info, out)
	fh, fflags, errno := n.s.fileHandle(ch.Operations().(*node), &handle{f: f, write: flags&syscall.O_ACCMODE != syscall.O_RDONLY})
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return ch, fh, fflags, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	n.s.tree.RLock()
	defer n.s.tree.RUnlock()
	p, errno := n.child(name)
	if errno != 0 {
		return nil, errno
	}
	if err := n.s.b.Mkdir(ctx, p, vfs.FileModeOf(mode)&^fs.ModeType); err != nil {
		return nil, errnoOf(err, opWrite)
	}
	return n.lookupNew(ctx, p, out, true)
}

// Mknod creates regular files only: FIFOs, sockets and device nodes are
// refused (EPERM), as in every capfs tree.
func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	n.s.tree.RLock()
	defer n.s.tree.RUnlock()
	if mode&syscall.S_IFMT != syscall.S_IFREG && mode&syscall.S_IFMT != 0 {
		return nil, syscall.EPERM
	}
	p, errno := n.child(name)
	if errno != 0 {
		return nil, errno
	}
	f, err := n.s.b.OpenFile(ctx, p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, vfs.FileModeOf(mode)&^fs.ModeType)
	if err != nil {
		return nil, errnoOf(err, opWrite)
	}
	info, err := f.Stat()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, errnoOf(err, opWrite)
	}
	info = n.s.giveToCaller(ctx, p, info)
	info.Name = name
	return n.s.newChild(ctx, n, p, info, out), 0
}

// uninterrupted is a request's context without its cancellation. The kernel
// interrupts a request whenever its caller takes a signal (a build's make
// takes SIGCHLD each time a job ends; a Go program's runtime signals its own
// threads), and go-fuse then cancels the request's context: every Dir call
// made with it would fail with canceled, and the caller would get EINTR from a
// stat, an open or a mkdir, which programs do not retry, or, after a change
// was made, retry a creation that succeeded (EEXIST). So every request the
// server has begun is answered, as Linux's NFS lets no signal but SIGKILL cut
// a request short (and a process being killed does not wait on the answer of
// a request the server has not yet read).
func uninterrupted(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// lookupNew answers a creation with the new entry's attributes; created says
// the entry is new (mkdir, symlink: given to the caller), not a new name of an
// existing one (link).
func (n *node) lookupNew(ctx context.Context, p vfs.Path, out *fuse.EntryOut, created bool) (*gofs.Inode, syscall.Errno) {
	info, err := n.s.b.Lstat(ctx, p)
	if err != nil {
		return nil, errnoOf(err, opLookup)
	}
	if created {
		info = n.s.giveToCaller(ctx, p, info)
	}
	return n.s.newChild(ctx, n, p, info, out), 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx = uninterrupted(ctx)
	n.s.tree.RLock()
	defer n.s.tree.RUnlock()
	p, errno := n.child(name)
	if errno != 0 {
		return errno
	}
	return errnoOf(n.s.b.Remove(ctx, p), opWrite)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.Unlink(ctx, name)
}

// Linux renameat2 flags.
const (
	renameNoReplace = 1 << 0
	renameExchange  = 1 << 1
)

// Rename holds the server's tree lock exclusively from before the Dir call
// until go-fuse has moved its nodes (which it does after Rename returns, before
// answering the kernel): no request derives a path from the tree while the
// tree and the Dir disagree, so a directory held open (a pinned capability, a
// process's working directory) never resolves through the name its old place
// now holds.
func (n *node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	ctx = uninterrupted(ctx)
	n.s.tree.Lock()
	errno := n.rename(ctx, name, newParent, newName, flags)
	if errno != 0 {
		n.s.tree.Unlock()
		return errno
	}
	np := newParent.(*node)
	oldChild, destChild := n.GetChild(name), np.GetChild(newName)
	if oldChild == nil && destChild == nil || (np == n && name == newName) {
		n.s.tree.Unlock()
		return 0
	}
	exchange := flags == renameExchange
	if !exchange {
		np.noteReplaced(destChild, oldChild, newName)
	}
	go func() {
		defer n.s.tree.Unlock()
		moved := func() bool {
			if exchange {
				return np.GetChild(newName) == oldChild && n.GetChild(name) == destChild
			}
			return np.GetChild(newName) == oldChild && (oldChild == nil || n.GetChild(name) != oldChild)
		}
		// go-fuse moves its nodes right after Rename returns, on the request's
		// goroutine: yield until it has (a sleep here would hold every other
		// request for a timer tick), then sleep briefly if it is slow.
		deadline := time.Now().Add(2 * time.Second)
		for spin := 0; !moved() && time.Now().Before(deadline); spin++ {
			if spin < 1000 {
				runtime.Gosched()
			} else {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}()
	return 0
}

func (n *node) rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	from, errno := n.child(name)
	if errno != 0 {
		return errno
	}
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	to, errno := np.child(newName)
	if errno != 0 {
		return errno
	}
	var vf vfs.RenameFlags
	switch flags {
	case 0:
	case renameNoReplace:
		vf = vfs.RenameNoReplace
	case renameExchange:
		vf = vfs.RenameExchange
	default:
		return syscall.EINVAL // RENAME_WHITEOUT and combinations
	}
	return errnoOf(n.s.b.Rename(ctx, from, to, vf), opWrite)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	n.s.tree.RLock()
	defer n.s.tree.RUnlock()
	p, errno := n.child(name)
	if errno != 0 {
		return nil, errno
	}
	if err := n.s.b.Symlink(ctx, target, p); err != nil {
		return nil, errnoOf(err, opWrite)
	}
	return n.lookupNew(ctx, p, out, true)
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	ctx = uninterrupted(ctx)
	n.s.tree.RLock()
	defer n.s.tree.RUnlock()
	p, errno := n.path()
	if errno != 0 {
		return nil, absent(errno)
	}
	t, err := n.s.b.Readlink(ctx, p)
	if err != nil {
		return nil, errnoOf(err, opLookup)
	}
	return []byte(t), 0 // data, a target leaving the mount included: the kernel follows it
}

func (n *node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	n.s.tree.RLock()
	defer n.s.tree.RUnlock()
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	if t.isTmp() {
		return n.linkTmp(ctx, t, name, out)
	}
	oldp, errno := t.path()
	if errno != 0 {
		return nil, absent(errno)
	}
	p, errno := n.child(name)
	if errno != 0 {
		return nil, errno
	}
	if err := n.s.b.Link(ctx, oldp, p); err != nil {
		return nil, errnoOf(err, opWrite)
	}
	ch, errno := n.lookupNew(ctx, p, out, false)
	if errno == 0 && ch != t.EmbeddedInode() {
		// The new name has a node of its own (see Server.identity): the
		// kernel refreshes only that one, so drop the old name's cached
		// attributes (its link count) now.
		t.NotifyContent(-1, 0)
	}
	return ch, errno
}
