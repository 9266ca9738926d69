//go:build linux

package fuseexport

import (
	"context"
	"io/fs"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/capfs/capfs/vfs"
)

// chown is the ownership part of a SETATTR: one Chown (follow) or Lchown of p
// through the Dir, an id the request does not set kept (-1). The kernel has
// already applied chown(2)'s rules to the caller (default_permissions: only a
// privileged process may change the owner, an owner may change the group to
// one of its own); the Dir then decides (policy.OpChown) and the backend acts
// as the server's own user, so a server that is not root gives nothing away.
//
// Errors: a refusal by the policy, the backend's own rules (a file with other
// hard links, a link leading out of the Dir, a FIFO) or the host is EPERM, as
// chown(2) reports it; read-only is EROFS. Where the backend keeps no owners,
// entries show the mount's own (Options.UID/GID): a chown that changes
// nothing of that succeeds, any other is EPERM.
func (s *Server) chown(ctx context.Context, p vfs.Path, uid uint32, uok bool, gid uint32, gok bool, follow bool) syscall.Errno {
	u, g := -1, -1
	if uok {
		u = int(uid)
	}
	if gok {
		g = int(gid)
	}
	err := vfs.Chown(ctx, s.b, p, u, g, follow)
	if err == nil {
		return 0
	}
	switch vfs.CodeOf(err) {
	case vfs.CodeNotSupported:
		if (!uok || uid == s.uid) && (!gok || gid == s.gid) {
			return 0
		}
		return syscall.EPERM
	case vfs.CodePermission, vfs.CodeOutside, vfs.CodeNotRegular:
		return syscall.EPERM
	}
	return errnoOf(err, opWrite)
}

// giveToCaller makes an entry just created at p (info, as the backend
// reported it) the caller's, as a file system does: owner the calling uid;
// group the calling gid, unless the directory holding p has the setgid bit,
// in which case the host has already given it that directory's group. It
// acts only where it can and must: a server running as root, over a backend
// that keeps owners, for a caller other than the server's own user. It is a
// Lchown through the Dir (decided as policy.OpChown and audited); if that is
// refused the entry stays the server's, which is what the returned Info then
// reports.
func (s *Server) giveToCaller(ctx context.Context, p vfs.Path, info vfs.Info) vfs.Info {
	if !s.privileged || !info.HasOwner {
		return info
	}
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return info
	}
	uid, gid := int(c.Uid), int(c.Gid)
	if uid == info.Uid {
		uid = -1
	}
	if gid == info.Gid {
		gid = -1
	}
	if gid != -1 {
		if parent, err := s.b.Stat(ctx, p.Dir()); err == nil && parent.Mode&fs.ModeSetgid != 0 {
			gid = -1
		}
	}
	if uid == -1 && gid == -1 {
		return info
	}
	if err := vfs.Chown(ctx, s.b, p, uid, gid, false); err != nil {
		return info
	}
	if uid != -1 {
		info.Uid = uid
	}
	if gid != -1 {
		info.Gid = gid
	}
	return info
}
