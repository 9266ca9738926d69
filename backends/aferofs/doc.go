// Package aferofs mounts a virtual afero.Fs — afero.MemMapFs, the zipfs and tarfs
// archive views, an sftpfs connection, or any other in-process afero filesystem — as a
// vfs.Backend, under the same symlink resolver and checks as capfs's own backends.
//
// It is never meant for afero's OS filesystems. afero.OsFs, and afero.BasePathFs or
// afero.ReadOnlyFs layered over one, act on host paths with the host kernel's symlink
// semantics, which no adapter on top of afero can confine: use backends/physical for a
// host directory. New refuses an *afero.OsFs, and any afero wrapper it can see one
// through, with not_supported.
//
// # Guarantees
//
//   - Every path is resolved by vfs.Resolve, component by component, with one Lstat
//     (afero.Lstater where the filesystem has it, Stat otherwise) per component, before
//     the operation is handed to afero with the resolved, clean, absolute afero path.
//     Where the filesystem has symlinks (an afero.LinkReader, or the symlink entries of
//     a zip or tar archive), they are confined beneath the backend's root exactly as in
//     the memory backend: an absolute target or ".." above the root is
//     path_outside_sandbox, and at most vfs.MaxSymlinks links are followed.
//   - A guest path can only name entries beneath the root: vfs.Path holds no "..", and
//     the adapter only ever appends validated components to the root's afero path.
//   - os semantics where afero.MemMapFs deviates from them, fixed in the adapter: a
//     missing parent directory is not_found (MemMapFs would create it); removing a
//     non-empty directory is not_empty (MemMapFs would orphan its children); Rename
//     checks file/directory type mismatches, non-empty destinations, moves into the
//     source's own subtree and the RenameNoReplace and RenameExchange flags; opening a
//     directory for writing is is_a_directory; O_APPEND appends at the current end on
//     every write, not only at open; each File keeps its own offset, ReadAt/WriteAt never
//     move it, and ReadAt reports io.EOF on a short read; listings are sorted; only type
//     and permission bits are reported (MemMapFs adds os.ModeTemporary).
//   - Namespace operations (resolution plus the afero call) are serialized against
//     each other by one read/write lock per afero.Fs, shared by every Sub: Mkdir,
//     Remove, Rename, Symlink and creating opens are atomic with respect to every other
//     call made through this package, so RenameNoReplace really does not replace and
//     an O_APPEND write is not interleaved with another O_APPEND write.
//   - Errors are *vfs.Error values addressed to the backend-relative path; afero's
//     errors, which embed afero paths, are reduced to their code by vfs.Errno.
//
// # Not guaranteed
//
//   - Sub is not pinned. afero has no directory handles, so a Sub backend remembers the
//     resolved afero path of its root, not an object: if that directory is later
//     renamed or replaced, the Sub follows the name, not the directory. Hosts that need
//     DESIGN.md's pinned Sub must use a backend that has handles (memory, physical).
//   - Code that uses the afero.Fs directly, bypassing this package, is not serialized
//     with it: the atomicity above only holds among calls through the adapter.
//     RenameExchange is three afero renames through a temporary name in the source's
//     directory; a failure in the middle is rolled back where possible.
//   - Hard links are not supported (afero has no Link). Chmod and Chtimes are passed
//     to the filesystem, which may refuse them. afero's Chtimes cannot leave a time
//     unchanged: a zero mtime keeps the current modification time, and a zero atime
//     is set to the resulting modification time.
//   - A filesystem without afero.Lstater whose Stat follows symlinks resolves them
//     itself, out of the adapter's sight; such a filesystem must only hold links that
//     stay inside the tree mounted.
//   - Entries whose names are not valid guest names (empty, ".", "..", or containing a
//     backslash or NUL) are left out of listings and cannot be addressed.
package aferofs
