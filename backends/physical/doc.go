// Package physical serves a host directory as a [vfs.Backend], confined beneath a
// directory handle. No path, symlink, hard link, special file or race can make it
// act outside that directory. It is the backend untrusted guests reach the host's
// own files through.
//
// [New] opens the root once (O_PATH|O_DIRECTORY); Sub opens a new handle beneath
// it. Every later operation resolves relative to such a handle, never by host
// path. The implementation needs Linux; elsewhere New fails with not_supported.
//
// # Guarantees
//
//   - Confinement. Every lookup is one openat2 call with RESOLVE_BENEATH and
//     RESOLVE_NO_MAGICLINKS. It adds RESOLVE_NO_SYMLINKS under [SymlinksReject]
//     and RESOLVE_NO_XDEV under [WithOneFilesystem]. The kernel resolves the whole
//     path, symlinks included, and refuses any step that would leave the root,
//     whatever renames run concurrently. A name directly in the root is examined
//     with fstatat relative to the root handle, without following it; a link
//     there goes through openat2.
//   - The portable resolver. Where openat2 is missing or refused (ENOSYS or EPERM
//     when New probes it, as under some seccomp filters; ENOSYS later), a walk
//     takes the path one component at a time from the root handle. Directories
//     are opened with O_PATH|O_NOFOLLOW|O_DIRECTORY relative to the directory
//     reached so far. Anything else is examined with fstatat without following
//     it. Symlinks are read with readlinkat and followed by the same rules as
//     [vfs.Resolve]. ".." returns to the directory handle the walk came from,
//     never the directory's current parent, so a directory moved out mid-walk
//     cannot lead it out. The final name is then opened with O_NOFOLLOW relative
//     to its directory. If it turned into a symlink meanwhile, the lookup starts
//     over, a bounded number of times. [WithResolver] forces either resolver.
//   - Symlinks resolve beneath the root. An absolute target, a ".." above the
//     root (of the backend, or of a Sub) or a /proc magic link fails with
//     path_outside_sandbox. More than [vfs.MaxSymlinks] links fail with
//     too_many_links; both resolvers apply that limit. Intermediate links are
//     always followed; the final one as vfs.Backend documents.
//   - Mutations act on a name in a resolved directory. Mkdir, Remove, Rename,
//     Link, Symlink and Readlink resolve the parent directory (following links,
//     beneath the root) to a handle. They then call mkdirat, unlinkat, renameat2,
//     linkat, symlinkat or readlinkat with the last name, which those calls never
//     follow. renameat2 gets RENAME_NOREPLACE and RENAME_EXCHANGE for the vfs
//     flags. For linkat both ends are resolved and confined separately, or once
//     when both names are in the same directory; the source is never followed. A
//     trailing slash is checked by the backend, never handed to these calls.
//   - Symlink refuses, with path_outside_sandbox, a target that is absolute or
//     climbs above the root from the link's directory. It checks lexically from
//     the link's path ([vfs.SymlinkTarget], as package dir does). It also checks
//     physically from the directory the link is really created in, climbing its
//     ".." handles up to the root, since host tools read this tree directly.
//     [WithVerbatimLinks], for capfs's private directories only, makes such a
//     target data: stored, listed and read back, never followed.
//   - Special files are never opened. With openat2, OpenFile resolves the path
//     once, to an O_PATH handle, which opens nothing. It examines the handle with
//     fstat and refuses anything but a regular file or a directory with
//     not_regular_file. Then it reopens that very handle through its entry in
//     /proc/self/fd, a magic link to the inode examined. There is no second path
//     walk, so nothing a concurrent rename puts at the path in between can be
//     opened instead. The /proc directory is opened once per process and checked:
//     it must be procfs, reached from a procfs root without crossing a mount,
//     listing this process's own descriptors. O_CREATE first tries
//     O_CREAT|O_EXCL, which creates a new regular file or opens nothing.
//   - Without the reopen (no /proc, or one failing those checks, and always with
//     the portable resolver), the path is examined without opening it: an O_PATH
//     handle, fstatat, or the portable walk. Then it is opened by name with
//     O_NONBLOCK|O_NOCTTY and the handle is checked again. So a FIFO, socket or
//     device swapped in meanwhile can neither hang the call nor be used; it is,
//     though, opened once (see "Not guaranteed"). ReadDir opens with O_DIRECTORY,
//     which fails before anything else is opened. Chmod, Chtimes and Chown refuse
//     special files too. A caller that sets [vfs.ExpectRegular] (a search opening
//     names its listing showed as regular files) gives up part of this guarantee,
//     and only for those opens.
//   - Hard links. A regular file with more than one name may share its inode with
//     a file outside the root (a link the host planted). Under [HardLinksReplace]
//     (the default) it may be read, but it is never written. Opening it for
//     writing gives the name a private copy first, renamed over the name, and the
//     handle writes that copy. The copy is a new file in the same directory, with
//     the old contents (none for O_TRUNC), the old mode, and the old owner where
//     the process may set it. Under [HardLinksReject] it cannot be opened at all.
//     Chmod, Chtimes, Chown and Lchown refuse it under either policy
//     (fs_permission_denied); Lchown refuses a symlink with several names too.
//   - O_TRUNC is never handed to the kernel. The file is truncated with ftruncate
//     only after the status of the inode opened shows a single name, and not at
//     all when O_CREAT|O_EXCL has just created it. So a hard link renamed over the
//     path meanwhile is not emptied. The write permission is checked (by the
//     open) before any replacement.
//   - [WithMaxFileSize](n): Write, WriteAt and Truncate that would make a file
//     larger than n fail with file_too_large and write nothing. Reads return at
//     most n+1 bytes of a file, the next read failing with file_too_large. So a
//     huge, sparse or growing file cannot be read whole.
//   - Sub pins its directory. It holds its own handle, so a later rename or
//     replacement of the path does not redirect it (THREATS 51): it keeps working
//     on the moved directory, as Go's os.Root does. Its links resolve beneath it.
//     Open Files hold their own descriptors likewise.
//   - Errors are [*vfs.Error] values with the guest's path relative to this
//     backend: errnos only, never a host path. New's own errors, for the host,
//     name the root. Info carries the guest's base name and no Sys.
//   - EAGAIN from openat2 (a rename or mount anywhere on the system while it
//     resolved a "..") is retried: 64 times at once, then, yielding, until 10 ms
//     have passed (4096 tries at most). Then it fails with io_error. It never
//     falls back to weaker resolution.
//   - Creation applies perm exactly (no umask), through the new file's handle.
//     setuid and setgid are never set: dropped at creation, refused by Chmod.
//   - An [FS] and its Files are safe for concurrent use. Close waits for calls
//     still using the descriptor, so its number is never reused under them. Calls
//     after it fail with closed. A File or Sub nobody closes releases its
//     descriptor when it is garbage collected.
//   - Canonical locations ([vfs.Backend].Resolve). Resolve reports where a path
//     leads, by the same rules and limits as every other call. Intermediate links
//     are followed, the final one as asked. ".." in link targets is taken
//     physically (back to the directory the walk came from), beneath the root.
//     With openat2, a path with no symlink on it is its own canonical path. It
//     costs one openat2 (O_PATH|O_NOFOLLOW with RESOLVE_NO_SYMLINKS), an fstat and
//     a close, or one fstatat for a name in the root. A missing final name costs
//     one more openat2 (its parent). Only a path on which the kernel meets a
//     symlink (ELOOP) is walked component by component, as the portable resolver
//     always does. The walk records the names of the directories it really
//     passes through. Location.Path carries no trailing-slash mark.
//   - The Resolved mark. A path marked Resolved ([vfs.Path.Resolved]) follows no
//     symlink at all in any call. With openat2 every lookup adds
//     RESOLVE_NO_SYMLINKS. That covers the final link too, except where the call
//     does not follow it: Lstat, Readlink, Remove, Rename, Link and
//     O_CREATE|O_EXCL act on the link itself. The portable walk refuses any link
//     it would follow. A call that meets one fails with conflict ("a symlink
//     stands on a resolved path") before acting. This holds for Stat, Lstat,
//     ReadDir, OpenFile (every flag set, O_CREATE included), Sub, Readlink, Chmod,
//     Chtimes, and for the parents of Mkdir, Remove, Rename, Symlink and Link. A
//     layer that resolved a path, decided on it and then acts on it thus reaches
//     the place it decided on, or nothing.
//   - The fused calls. [FS.ResolveStat], [FS.ResolveOpen] and [FS.ResolveReadDir]
//     fuse the two steps for Stat, reads and listings. One lookup serves the
//     decision (a callback, for ResolveOpen and ResolveReadDir) and the call.
//     ResolveOpen opens the very object decided on, through the O_PATH handle of
//     the resolution. ResolveReadDir lists the very directory decided on, through
//     the descriptor its one openat2 (O_DIRECTORY, RESOLVE_NO_SYMLINKS) opened.
//   - Locate ([vfs.Locator]). A Sub reports the current path of its directory
//     beneath the root of the FS New returned, after any renames of either. It
//     reads the kernel's names of both handles (/proc/self/fd, re-read each
//     time). Where those are missing or do not agree, it climbs ".." and finds
//     each directory in its parent by device and inode. An answer is returned only
//     once it is checked: opened beneath the origin's handle with no symlink
//     followed, it must be the Sub's own directory. The last answer is checked
//     first on the next call. A directory removed or moved out of the tree fails
//     with not_found. The FS New returned (and a Sub of its root) locates at the
//     root.
//
// # Policies pinned here
//
//   - O_CREATE through a dangling symlink whose target stays beneath the root
//     creates the target, as Go's os does. One whose target leaves the root fails
//     with path_outside_sandbox and creates nothing. O_CREATE|O_EXCL never follows.
//   - Readlink returns the stored target text. An absolute target, which only the
//     host can have planted and which would show a host path, fails with
//     path_outside_sandbox instead ([WithVerbatimLinks] shows it).
//   - Chmod and Chtimes act on a link's target inside the root. The target is
//     resolved to an O_PATH handle and changed through it, never by name, so
//     nothing is followed after the check. They use fchmodat2 or utimensat with
//     AT_EMPTY_PATH, or the handle's /proc/self/fd link on older kernels. Chown
//     does the same (fchownat with AT_EMPTY_PATH on the handle). Lchown opens the
//     final name without following it (O_PATH|O_NOFOLLOW beneath the root) and
//     changes that link. Info reports st_uid and st_gid (HasOwner). Who may give a
//     file away is the host's decision (EPERM: fs_permission_denied).
//   - Under WithOneFilesystem a path crossing a mount point fails with
//     path_outside_sandbox ("crosses a mount point"). The portable resolver
//     detects crossings by device number, so a bind mount of the same filesystem
//     is not detected there.
//   - Under SymlinksReject a path that would follow a symlink fails with
//     fs_permission_denied. Lstat and Readlink still work on links.
//   - Listings leave out names a [vfs.Path] cannot hold (containing a backslash);
//     such entries cannot be addressed. A listing made under
//     [vfs.WithUnaddressable] reports each one it leaves out, so the layers above
//     say so rather than drop it silently.
//   - Remove and Rename of the root fail with invalid_path.
//   - A File opened by name after a check (the fallback above) keeps O_NONBLOCK
//     from the open. Regular files on local filesystems ignore it, and the first
//     EAGAIN (from one that does not) clears it. Reopened and newly created files
//     are opened without it.
//   - Files implement [vfs.TypedFile]: Type reports the type checked at the open
//     (fs.ModeDir or 0), so layers above need no fstat to tell. Files opened for
//     reading implement [vfs.OpenStater] too. OpenStat reports the status that
//     check read: the fstat of the O_PATH handle, or of the descriptor after a
//     checked open. So a reader sizes its buffer without a second fstat.
//
// # Cost
//
// In system calls, with openat2:
//   - Stat and Lstat take openat2, fstat and close (one fstatat for a name in the
//     root). So does Resolve of a path with no symlink on it, and ResolveStat,
//     which answers both.
//   - Opening an existing file takes openat2 (O_PATH), fstat, the openat of the
//     /proc/self/fd entry and the close of the O_PATH handle, at any depth (plus
//     ftruncate for O_TRUNC). Creating a new file takes openat2 (O_CREAT|O_EXCL)
//     and fchmod. Without the reopen, opening takes the three calls of Stat, then
//     openat2 and fstat for the real open.
//   - With vfs.ExpectRegular's hint, opening a regular file for reading takes one
//     openat2 and one fstat (OpenFile and ResolveOpen alike). Anything else then
//     takes the usual route as well.
//   - Rename and Link take an openat2 and a close per parent directory not the
//     root (one for both names when they share it), and the renameat2 or linkat.
//   - The portable resolver takes an openat and a close per directory on the way.
//
// # Not guaranteed
//
//   - Host processes changing the tree concurrently can make any single call see
//     either state, but never make it act outside the root. Without the /proc
//     reopen (see above), a FIFO or device node renamed over a regular file
//     between the check and the open is opened once (without blocking, and
//     refused). Hosts that keep device nodes in a served tree should mount it
//     nodev.
//   - With vfs.ExpectRegular's hint, an open for reading is first tried as one
//     openat2 (O_RDONLY|O_NONBLOCK|O_NOCTTY, RESOLVE_NO_SYMLINKS beside the usual
//     confinement). Only a regular file reached without a symlink is kept. Its
//     path is then canonical, and a ResolveOpen decides on it before anything is
//     read. Anything else is closed unread and takes the usual route, which gives
//     the usual result. So a FIFO, socket or device renamed over a listed name
//     after the listing may be opened once, without blocking and never read. That
//     is the same exposure as without the reopen. Explicit opens (the hint unset)
//     keep the guarantee that special files are never opened.
//   - The reopen names descriptors in /proc/self/fd, the descriptor table that all
//     threads of a Go program share. A program that gives a thread its own table
//     (unshare(CLONE_FILES) on a locked thread; Go's runtime never does) must not
//     call the backend from that thread. A host able to mount over /proc (or over
//     this process's entries in it) after New is not defended against.
//   - The stored text of relative links is checked when this backend creates
//     them. Links planted by the host, later renames, and links whose own target
//     runs through another link to ".." can still point above the root for host
//     tools that follow them. This backend never follows them out.
//   - The hard-link check happens at open: a link the host adds to a file already
//     open for writing is written through. WithMaxFileSize is checked against the
//     size at the time of each call, so concurrent appenders can overshoot it by
//     one write each.
//   - A replaced file's copy is visible under a temporary name (".capfs-*.tmp") in
//     its directory while it is made. It does not carry the old file's extended
//     attributes or ACLs. Durability needs Sync.
package physical
