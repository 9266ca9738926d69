package fuseexport

import (
	"context"
	"syscall"

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
