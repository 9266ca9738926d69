//go:build linux

package fuseexport

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/capfs/capfs/vfs"
)

// statfsBlock is the block size statfs reports its figures in.
const statfsBlock = 4096

// Statfs answers the figures of the storage that holds the node, as the
// Dir reports them (vfs.StatFS: a stat of the node's path, decided and
// audited): the physical backend's host file system, a memory or sqlite
// backend's quota. Where the backend knows none (memory or sqlite without a
// quota, git, CAS) it answers fixed figures: 1 TiB, all free, and 2^31 free
// entries. Entry counts the backend does not limit are the fixed ones too.
// Names may be 255 bytes long.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	ctx = uninterrupted(ctx)
	out.Bsize = statfsBlock
	out.Frsize = statfsBlock
	out.NameLen = nameMax
	out.Blocks = 1 << 40 / statfsBlock
	out.Bfree = out.Blocks
	out.Bavail = out.Blocks
	out.Files = 1 << 32
	out.Ffree = 1 << 31
	n.s.tree.RLock()
	defer n.s.tree.RUnlock()
	p, errno := n.path()
	if errno != 0 {
		p = vfs.Root // a file with no name left is still on the mount's storage
	}
	st, err := vfs.StatFS(ctx, n.s.b, p)
	switch {
	case err == nil:
	case vfs.CodeOf(err) == vfs.CodeNotSupported:
		return 0
	default:
		return errnoOf(err, opLookup)
	}
	out.Blocks = uint64(max(st.Total, 0)) / statfsBlock
	out.Bfree = uint64(max(st.Free, 0)) / statfsBlock
	out.Bavail = out.Bfree
	if st.Files > 0 {
		out.Files = uint64(st.Files)
		out.Ffree = uint64(max(st.FreeFiles, 0))
	}
	return 0
}
