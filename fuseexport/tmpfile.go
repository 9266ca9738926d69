//go:build linux

package fuseexport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/capfs/capfs/vfs"
)

// tmpPrefix starts the name an O_TMPFILE file holds in its directory until
// it is linked into place or closed. Lookups and listings through the mount
// never show such a name, and no request through the mount may create or
// rename to one (EPERM).
const tmpPrefix = ".capfs-tmpfile-"

var _ gofs.NodeTmpfiler = (*node)(nil)

// hiddenName says whether name is one an unnamed file holds.
func hiddenName(name string) bool { return strings.HasPrefix(name, tmpPrefix) }

// Tmpfile creates an unnamed file in directory n (open with O_TMPFILE). The
// Dir has no unnamed files, so the file is created under a hidden name
// (tmpPrefix and random), decided by the policy and audited as any create in
// n. Its node reports no links. Linking it into place (linkat of its
// descriptor) renames it to the new name; closing it unlinked removes it.
// While it is open the hidden name exists in the backend (on the host for a
// physical Dir), as a temporary file would.
func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	ctx = uninterrupted(ctx)
	n.s.tree.RLock()
	defer n.s.tree.RUnlock()
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	name := tmpPrefix + hex.EncodeToString(rnd[:])
	p, errno := n.childOf(name)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	flag := openFlags(flags) | os.O_CREATE | os.O_EXCL
	f, err := n.s.b.OpenFile(ctx, p, flag, vfs.FileModeOf(mode)&^fs.ModeType)
	if err != nil {
		return nil, nil, 0, errnoOf(err, opWrite)
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		_ = n.s.b.Remove(ctx, p)
		return nil, nil, 0, errnoOf(err, opWrite)
	}
	info = n.s.giveToCaller(ctx, p, info)
	ch := n.s.newChild(ctx, n, p, info, out)
	out.Attr.Nlink = 0
	tn := ch.Operations().(*node)
	tn.setTmp(true)
	n.s.tmps.add(tn)
	tn.remember(&out.Attr)
	n.AddChild(name, ch, false)
	h := &handle{f: f, write: flags&syscall.O_ACCMODE != syscall.O_RDONLY, tmp: tn}
	fh, fflags, errno := n.s.fileHandle(tn, h)
	if errno != 0 {
		tn.dropTmp(ctx, tn)
		return nil, nil, 0, errno
	}
	return ch, fh, fflags, 0
}

// setTmp marks the node as an unnamed file's (or no longer).
func (n *node) setTmp(tmp bool) {
	n.lastMu.Lock()
	n.tmp = tmp
	n.lastMu.Unlock()
}

// isTmp says whether the node is an unnamed file's, not yet linked.
func (n *node) isTmp() bool {
	n.lastMu.Lock()
	defer n.lastMu.Unlock()
	return n.tmp
}

// dropTmp removes the hidden name of unnamed file tn, unless it was linked
// into place meanwhile. The open file stays usable where the backend keeps
// removed files open (memory, physical). The tree lock is held.
func (n *node) dropTmp(ctx context.Context, tn *node) {
	if !tn.isTmp() {
		return
	}
	tn.setTmp(false)
	n.s.tmps.remove(tn)
	p, errno := tn.path()
	if errno != 0 {
		return
	}
	_ = n.s.b.Remove(ctx, p)
	if name, parent := tn.Parent(); parent != nil {
		parent.RmChild(name)
	}
}

// linkTmp gives unnamed file t the name p in directory n (linkat of an
// O_TMPFILE descriptor): a rename of its hidden name that replaces nothing,
// decided by the policy and audited as a rename. The tree lock is held
// shared: only t's own name changes, as go-fuse changes a node's name after
// an unlink. A request on t that derives its hidden name between the rename
// and the move of t's name gets ENOENT.
func (n *node) linkTmp(ctx context.Context, t *node, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	from, errno := t.path()
	if errno != 0 {
		return nil, absent(errno)
	}
	to, errno := n.child(name)
	if errno != 0 {
		return nil, errno
	}
	if err := n.s.b.Rename(ctx, from, to, vfs.RenameNoReplace); err != nil {
		return nil, errnoOf(err, opWrite)
	}
	t.setTmp(false)
	n.s.tmps.remove(t)
	oldName, oldParent := t.Parent()
	if oldParent != nil {
		oldParent.MvChild(oldName, n.EmbeddedInode(), name, false)
	}
	info, err := n.s.b.Lstat(ctx, to)
	if err != nil {
		return nil, errnoOf(err, opLookup)
	}
	n.s.fillAttr(t.StableAttr().Ino, info, &out.Attr)
	out.SetAttrTimeout(n.s.attrTime(info))
	t.remember(&out.Attr)
	return t.EmbeddedInode(), 0
}

// tmpSet holds the nodes of unnamed files whose hidden names still exist.
type tmpSet struct {
	mu sync.Mutex
	m  map[*node]struct{}
}

func (t *tmpSet) add(n *node) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[*node]struct{}{}
	}
	t.m[n] = struct{}{}
}

func (t *tmpSet) remove(n *node) {
	t.mu.Lock()
	delete(t.m, n)
	t.mu.Unlock()
}

// dropTmps removes the hidden names of unnamed files still open when the
// mount ended (the kernel may not have sent their RELEASE), so none is left
// in the backend (a lazy run's sync-back would find it). It runs when the
// serve loop has ended, however the mount ended: no request runs.
func (s *Server) dropTmps() {
	s.tmps.mu.Lock()
	ns := make([]*node, 0, len(s.tmps.m))
	for n := range s.tmps.m {
		ns = append(ns, n)
	}
	s.tmps.mu.Unlock()
	s.tree.RLock()
	defer s.tree.RUnlock()
	for _, n := range ns {
		n.dropTmp(context.Background(), n)
	}
}
