// Package fuseexport serves a capfs Dir to the kernel as a FUSE file system.
// Programs that expect a real directory (compilers, make, git, editors) then
// work on a capability without a checkout.
//
// The package builds on Linux only (the FUSE mount, passthrough, fallocate
// flags; go-fuse does not build for windows); on other systems it is empty,
// and capfs mount says so.
//
// [Mount](mountpoint, d, opts) mounts d. Every request the kernel sends becomes a
// call on d's Backend view (dir.Dir.Backend). That is the same enforcement path
// as every other Dir call. It checks revocation, read-only attenuation and the
// host's write lock, and the policy (deciding on what the path reaches). It runs
// hooks and records one audit event. Open files are dir.Handle values, checked
// at every read and write.
//
// # Guarantees
//
//   - One request, one Dir call. lookup and getattr are one Lstat; a symlink's
//     lookup adds the Readlink that checks where it leads. open and create are
//     one OpenFile. read and write are one ReadAt or WriteAt on the open Handle.
//     mkdir, symlink and link are the call and an Lstat of the new entry. unlink
//     and rmdir are one Remove. rename is one Rename: RENAME_NOREPLACE and
//     RENAME_EXCHANGE are passed on, RENAME_WHITEOUT is EINVAL. readlink is one
//     Readlink. readdir is one Dir.ReadDirVisible, plus a Readlink per symlink
//     listed. setattr is the Chmod, Chtimes or truncating open it asks for. A
//     directory is listed once per open, at its first read.
//   - Readdirplus is off unless [Options].ReadDirPlus. Then the listing is one
//     Dir.ReadDirVisibleInfo, each entry's status read with it, in one pass where
//     the backend can. The entries it returns carry that status, so a process
//     that stats or opens them next sends no lookup. An entry is looked up
//     instead (one Lstat) once anything may have changed since the listing, once
//     the listing is older than AttrTimeout, and for a file open in passthrough.
//   - With Options.Passthrough, the kernel itself reads and writes a file a
//     backend opened on the host with nothing to check per call (a physical
//     or read-only physical mount's file, an Overlay's upper file). Its open is still one Dir call; its reads and writes are none.
//     Options.Passthrough says what that gives up.
//   - Nothing is read ahead or copied. Names longer than 255 bytes are
//     ENAMETOOLONG. So is a path longer than PATH_MAX (4096 bytes) from the
//     exported root, since a Dir holds no longer path.
//   - A path is derived, for every request, from the names go-fuse keeps for the
//     kernel's nodes. A rename holds the server's tree lock until those names are
//     updated. So a directory a process holds open (its working directory, a
//     pinned capability's handle) is never reached through a name that a
//     concurrent rename gave to something else.
//   - Nodes follow the object. A node that lost its last name is never reached
//     through a name. fstat of a directory removed while open answers its last
//     attributes with no links; listing it is ENOENT, fsync succeeds, a creation
//     in it is ENOENT, as on Linux's own file systems. An open of a file that a
//     rename through the mount replaced (write a temporary, rename it over the
//     name) opens the file holding the name now, the open the kernel's retry
//     would make, so a reader never finds the name missing
//     (TestReplaceByRenameNeverMissing). Where the backend's hard links part on
//     writing (the physical backend, see below), each name of a file with
//     several names has a node of its own, with the one inode number, so a write
//     reaches the name written; those nodes' attributes are not cached, so every
//     name shows the link count at once.
//   - open(O_TMPFILE) creates the file under a hidden name in its directory
//     (".capfs-tmpfile-" and random, a create the Dir decides and audits),
//     reports no links, and is never looked up or listed; linkat of its
//     descriptor renames it into place, closing it unlinked removes it. No
//     request through the mount may create such a name (EPERM).
//   - Errors are mapped from their vfs.Code (see [Errno]). A path the policy hides
//     answers ENOENT to lookups, as if absent, and EACCES to changes. A read-only
//     Dir is mounted read-only, so every change is EROFS. A write refused as
//     read_only by a Dir (the host's write lock, a read-only mount of a
//     Namespace) is EROFS too.
//   - Interrupts: every request the server has begun is answered, whatever
//     signals its caller takes meanwhile. (A build's make takes SIGCHLD each time
//     a job ends.) A stat or an open never fails with EINTR. A change is made
//     whole and answered as made; a creation gives its new entry to its creator.
//     This is Linux NFS's rule: only SIGKILL cuts a request short. A process
//     being killed does not wait for a request the server has not yet read, and
//     waits for one it is answering.
//   - Confinement: the server follows no symlink; the kernel resolves them
//     itself, in the namespace of the process that looks one up. A symlink's
//     target is data: one leaving the exported Dir (absolute, or climbing above
//     its root) is listed, looked up and read like any link, as a checkout
//     holds it, and the kernel follows it in the caller's namespace, never
//     through the server (a lookup below the mount's root is always of a name
//     the Dir resolves beneath its root). A link whose target the Dir hides (an
//     absolute one on the physical backend) is absent. Creating one is the
//     Dir's to decide: stored where the backend holds its data privately,
//     refused by the physical backend (EPERM). FIFOs, sockets and device nodes
//     are absent, and mknod of one is EPERM. So no process blocks on a FIFO or
//     reaches a device through the mount. The mount is nosuid and nodev.
//   - Stable inode numbers: an entry's inode number is its backend's object ID.
//     When Options.Mounts lists the Namespace's mounts, the ID is mixed with the
//     mount's index, so two backends cannot share a number. A Dir over a
//     Namespace must list them, or the kernel takes two entries with one number
//     for one file. So hard links share the number, and it survives a rename and
//     the kernel forgetting the node. Entries without an ID (git trees, synthetic
//     directories) are numbered from their path. The server keeps only the nodes
//     the kernel holds (go-fuse's tree, pruned on FORGET). So memory stays bounded
//     by the kernel's cache, not by the tree.
//   - Caching: the kernel may trust names, attributes and absences for Options'
//     timeouts, one second each by default. It keeps a file's pages from one
//     read-only open to the next. It drops them when the attributes it fetches
//     show another mtime or size. So a file changed through the mount is read anew
//     at once, and one changed through another route within AttrTimeout.
//   - The policy stays exact with caching on. A name the policy hides is absent
//     to lookups and left out of listings, so no cached entry holds it. A write
//     lock needs nothing cached dropped: every write reaches the Dir. A
//     revocation does: the server watches the Dir's host changes
//     (dir.Dir.HostChanges) and, once it is revoked, drops every entry,
//     attribute and page the kernel holds of the mount, so the next stat, lookup
//     or read of a file held open reaches the Dir and fails. The notifications
//     land just after Revoke returns (the host never waits for the server), not
//     within AttrTimeout (TestRevocationDropsKernelCaches). Files passed through
//     (Options.Passthrough) are read by the kernel without the Dir.
//   - Files opened for writing (unless passed through) bypass the page cache. This
//     direct I/O also drops the pages it overwrites. So concurrent readers and
//     writers of one descriptor see each other's bytes at once. Shared writable
//     mmap still works (Linux 6.6+).
//   - [Server.Invalidate] drops what the kernel holds for a path changed through
//     another route. Its notifications are sent from the server's own goroutine,
//     never the caller's, so it is safe from a hook.
//   - Link counts and times: st_nlink is the backend's count after every link,
//     unlink and rename, and 0 for an open file whose last name is gone. st_ctime
//     is the backend's change time where it keeps one (the physical backend's
//     st_ctime), else the mtime.
//   - Permissions: the mount uses default_permissions. The kernel checks mode
//     bits against the attributes answered: the backend's owner where it keeps
//     one, else Options.UID/GID, by default the mounting user. So a mode 0000
//     file is closed to every user but root. A 0600 file owned by another uid is
//     closed to every other non-root user, as on disk. (go-fuse's rewrite of null
//     permissions is off.) The server itself acts as its own user: a non-root
//     server cannot read a 0600 file of another user however the kernel decided.
//   - Stale mounts: Mount refuses a mount point left by a crashed server
//     ([ErrStaleMount]). [CheckStale] finds one and [ClearStale] detaches it.
//     [Server.Unmount] falls back to a lazy detach when files are still open.
//
// # Not guaranteed
//
//   - Coherence across routes is bounded by the timeouts, unless the host calls
//     Invalidate. A file changed through another Dir, or on the host, may show
//     its old attributes, name or contents for up to AttrTimeout or EntryTimeout.
//     Its contents may show for longer if the change kept its size and mtime. A
//     process holding a file open (or mmap'ed) keeps the pages it read. mmap
//     writes reach the Dir when the kernel writes the pages back, not at once.
//   - Locks (flock, fcntl) are kept by the kernel for this mount alone. They
//     exclude processes using the mount from each other, not from another route
//     to the same files. Extended attributes are not supported (EOPNOTSUPP).
//     setuid and setgid bits are refused by the Dir (chmod: EACCES).
//   - Times: atime is reported equal to mtime, since a Dir keeps no access time.
//     So is ctime on backends that keep no change time (memory, SQLite, git).
//     A symlink's own times are set by Dir.Lchtimes (utimensat with
//     AT_SYMLINK_NOFOLLOW; EOPNOTSUPP on a backend that cannot). fchmod and
//     futimens of a file whose name is gone reach its open file (a write the
//     Dir checks on the handle).
//   - Ownership: an entry reports the owner its backend keeps (the physical
//     backend's st_uid and st_gid). Entries of backends that keep none (memory,
//     SQLite, git, CAS, the lazy run's Overlay) are owned by Options.UID and GID,
//     by default the mounting user. chown and lchown are Dir.Chown and Dir.Lchown
//     (policy.OpChown, audited), after the kernel's own chown(2) checks: only root
//     may give a file away. The backend acts as the server's user, so only a root
//     server changes owners. A refusal (the policy, a file with other hard links,
//     a FIFO, the host) is EPERM; a read-only Dir is EROFS. On a backend without
//     owners, a chown that changes nothing succeeds and any other is EPERM.
//   - An entry a process creates through a root server's mount (create, mknod,
//     mkdir, symlink) is given to that process as on disk. It gets the process's
//     uid, and its gid unless the directory has the setgid bit; then it gets the
//     directory's group, which the host applies. That is an Lchown through the
//     Dir, decided and audited as policy.OpChown. Where it is refused, the entry
//     stays the server's. A non-root server's entries are its own.
//   - Hard links on the physical backend: chmod and utimes of a file with several
//     names are refused (EACCES). Opening one for writing gives the name written
//     a private copy, so the other names keep the old contents
//     (physical.HardLinksReplace: a name may share its inode with a file outside
//     the root, and a write in place would reach it). The lazy layer's names
//     part the same way (its upper is a host directory). Writes through any
//     name of a file reach the one file on backends that hold hard links
//     themselves (memory, SQLite).
//   - Symlink targets are parsed by the Dir to keep links inside. A target
//     holding a name longer than 255 bytes is EINVAL (Linux stores it).
//   - Paths are bounded by PATH_MAX from the namespace's root, not from the mount
//     point. Exporting a subtree (capfs mount --work) shortens the longest path
//     by the subtree's own path. The CLI's default policy refuses (EACCES) a path
//     too long for it to decide on.
//   - POSIX conformance: pjdfstest.sh runs every pjdfstest group (make stress)
//     on three mounts: a physical Dir, a memory Dir and the lazy layer of capfs
//     run. pjdfstest_expected.txt lists, per mount, every test that fails and
//     why: the reasons above, and the memory backend's quota. The run fails on
//     any other.
//   - Directory entries carry no inode number (d_ino is FUSE's unknown value).
//     stat's st_ino is the stable one.
//   - A listing shows the names the Dir's ReadDirVisible shows, "." and ".."
//     first. Those are the names its Walk shows, less those whose status the
//     policy refuses: a secret matched by a file pattern, such as ".env", which
//     Walk names unless the policy sets HideSecrets. So every name listed can be
//     looked up. A host name no capfs path can hold (one containing a backslash)
//     can be neither looked up nor listed. Options.Unaddressable is told of each
//     once.
//   - unlink and rmdir act on the name. The kernel checks the entry's type from
//     its cache. So an entry replaced through another route between the kernel's
//     lookup and the call is removed if the Dir allows it.
//   - Statfs reports the backend's figures (Dir.StatFS): the host file system
//     under a physical backend, the quota of memory or SQLite. Others, and
//     those without a quota, report fixed figures (1 TiB free). st_blocks is
//     the backend's allocation where it knows it (physical: holes hold none),
//     else the size in 512-byte blocks.
//   - A Go program must not page-fault on a mapping of a file in a mount its own
//     process serves. The faulting thread blocks the runtime's stop-the-world
//     while the server waits to run. Map such files from another process, as
//     TestMmapShared does.
//
// # Lazy sandboxes
//
// A lazy sandbox serves the copy-on-write layer of
// [github.com/capfs/capfs/backends/overlay] (dir.New(overlay), then Mount). The
// files of its private upper directory are among those Options.Passthrough
// hands to the kernel; its lower files never are.
package fuseexport
