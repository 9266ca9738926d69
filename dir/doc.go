// Package dir provides the guest-facing capabilities of capfs: Dir (a directory
// tree), File (one file), Handle (an open stream) and, for the host, Control (the
// caretaker facet that locks writes and revokes).
//
// A host calls New on a vfs.Backend (often a vfs.Namespace) and gets the root Dir
// and its Control. It hands the guest a Dir, usually narrowed first: ReadOnly()
// removes write authority, Sub(path) re-roots the Dir at a subtree, and both chain
// in any order. A guest can narrow further, never widen: no method returns a parent,
// a read-only capability stays read-only, and Control.Child gives a subtree its own
// revocation and write lock, chained under its parent's.
//
// # The enforcement path
//
// Every method of Dir and File that takes a context.Context, and every call through
// the io/fs view (FS) and the Backend view, goes through one internal function, in
// this order:
//
//  1. revoked? (the Control or an ancestor revoked it) -> revoked
//  2. parse the guest path(s) with vfs.ParseGuest -> invalid_path, path_outside_sandbox
//  3. a writing operation on a ReadOnly capability, or while the host has called
//     Control.SetWritable(false) -> read_only
//  4. the Policy decides (an Ask goes to the Asker; with no Asker it is refused) ->
//     fs_permission_denied with the decision's reason. It decides twice when the
//     two differ: on the paths as the guest wrote them, and on the canonical
//     locations they reach (see "Decide on what is reached" below); a refusal of
//     either refuses the call
//  5. the Hooks' Before, in order; an error refuses the call
//  6. the backend operation, on the canonical location, following nothing again
//  7. the Hooks' After, in reverse order (also for hooks whose Before ran when a
//     later hook refused)
//  8. exactly one audit.Event, whatever happened: outcome (ok, denied, failed),
//     code, deciding rule, duration, a unique request id, subject, policy op, and
//     the paths from the capability tree's root (plus the path as the guest wrote it)
//
// Methods without a context (ReadOnly, Revocable, Name, Help, FS, Backend) touch no
// storage and are not audited. A call refused at steps 1-5 changes nothing and does not reach the backend.
// Errors returned to the guest are *vfs.Error values addressed to the path as the
// guest wrote it, relative to the capability it called (or, for a failure deep
// inside a composite call, to the Dir-relative path that failed); never a host path.
//
// An open for reading and writing (O_RDWR) is decided as its write op and, with a
// custom policy, as a read of the same path as well: both must be allowed.
//
// # Decide on what is reached
//
// With a policy or hooks to serve, step 4 first resolves every path the call
// touches through the backend (vfs.Backend.Resolve): each symlink followed the way
// the operation will follow it (the final one by Stat, ReadFile, Open, Chmod, Sub;
// not by Lstat, Remove, Move, Symlink, Link, Mkdir, O_CREATE|O_EXCL), ".." in link
// targets taken physically, and in a vfs.Namespace, mounts mapped, so a link in a
// read-write mount to a path a read-only mount serves reaches that mount. The
// policy and the hooks see the canonical paths (policy.Request.Path and Dest; the
// guest's text stays in GuestPath), and so does the audit trail. The backend then
// acts on the canonical path marked vfs.Path.Resolved, following no symlink: a
// link swapped in after the decision makes the call fail with conflict, never
// reach something undecided. Reads and listings (ReadFile, Open for reading,
// ReadDir) resolve, decide and act in one backend call where the backend offers
// it (vfs.ResolveOpen, vfs.ResolveReadDir): the decision runs between the
// resolution and the action, on the very object acted on. A symlink's target (Symlink, links Copy recreates) is
// decided where it leads, so a new name for a protected path is refused, and so is
// a Move, Rename or Copy of something protected or onto a protected name: the
// paths beneath a directory that moves are decided under their old and their new
// names. A pinned capability (Sub, OpenDir, CreateDir, OpenFile's File,
// Control.Child) decides on where its directory is now, asking the backend
// (vfs.Locator: physical, memory and the git overlay answer), not on where it was
// pinned.
//
// A host serving an untrusted guest a project should pair policy.Defaults() (the
// secret and persistence lists: git read-only, shell and tool startup files) with
// policy.ForProject's rules (core.hooksPath and the commands the project's git
// configuration names) and the GitGuard hook (no directory laid out as a git dir
// under any other name), as capfs mcp and capfs run do.
//
// Deciding and acting are atomic with respect to other calls through Dirs over the
// same root backend (every New over one Namespace shares a lock): a Move, Copy,
// Symlink or Link holds the lock alone from its decision to its last change, every
// other mutation holds it shared, so no write can be decided on a name that a
// concurrent move is about to change. Hooks must not call back into a Dir over the
// same root with a policy (they would wait for the lock their own call holds).
//
// Composite calls (WriteFile's temporary file and rename, Copy, Move, RemoveAll,
// Walk, Glob) are one decision and one audit event. When the Dir has a custom policy
// (WithPolicy), they also consult it for every path they touch beneath the one the
// guest named, before changing anything: RemoveAll, Copy and Move (of a directory)
// are refused as a whole, with nothing changed, if any inner path is refused
// (fs_permission_denied naming that path); Walk and Glob silently leave refused
// entries out and do not descend into them. These inner decisions share the call's
// request id and are not audited separately; an Ask among them goes to the Asker.
// A composite call refused because of an inner path is audited as denied, with the
// rule that refused that path.
// With the default policy (allow all) the inner checks are skipped.
//
// Handles are checked at every call (revocation; read-only and the write lock for
// Write, WriteAt and Truncate), so revoking or locking stops a Handle that is already
// open. Their successful reads and writes are not audited one by one (the Open call
// was); refusals are. Close works even after revocation.
//
// # Guarantees
//
//   - Confinement: every path is parsed once by vfs.ParseGuest; "/" means the
//     capability's own root; ".." cannot climb above it. Sub, OpenDir, CreateDir,
//     OpenFile and Control.Child pin their directory through the backend's Sub, so a
//     later rename cannot redirect them.
//   - Read-only is complete: every mutating method, every write flag of Open
//     (O_WRONLY, O_RDWR, O_CREATE, O_TRUNC, O_APPEND), and every Dir, File and Handle
//     derived from a read-only capability.
//   - Revocation is immediate for every call that starts after Control.Revoke (or a
//     File's revoke function): Dirs, Files, Handles, directory entries' Info, the
//     io/fs and Backend views, across Sub and Child chains.
//   - WriteFile, File.WriteBytes, File.WriteText and Copy of a file are atomic: the
//     data goes to a hidden temporary sibling (".capfs-tmp-" and 16 random hex
//     digits) that is renamed over the target and removed on any failure, so
//     readers see the old contents or the new, never a torn file.
//   - Whole-file reads read at most the limit plus one byte, whatever the file's
//     reported size (DefaultMaxReadBytes, 64 MiB, unless WithMaxReadBytes), and fail
//     with file_too_large beyond it.
//   - Symlink (and the Backend view's Symlink, and links Copy recreates) refuses
//     absolute targets and targets that climb above the capability's root from the
//     link's directory (path_outside_sandbox): host tools would follow them after
//     materialization. RemoveAll, Copy, Walk and Glob never follow a symlink they
//     meet inside the tree.
//   - No guest can make a setuid or setgid entry. Chmod refuses those bits
//     (fs_permission_denied). A mode given at creation (Dir.Open with O_CREATE,
//     the Backend view's OpenFile and Mkdir, the afero view's OpenFile, Mkdir and
//     MkdirAll) keeps only the permission bits and sticky: setuid and setgid, as
//     fs.ModeSetuid/fs.ModeSetgid or as Unix bits 0o4000/0o2000, are dropped
//     without error, as a umask and a nosuid mount would, so code that passes a
//     whole mode along keeps working. Entries a guest creates without a mode get
//     0644 (files) and 0755 (directories).
//   - The io/fs view passes testing/fstest.TestFS; the Backend view passes
//     vfs/vfstest (with Config.RejectsEscapingSymlinks).
//
// # Not guaranteed
//
//   - The policy sees paths, not inodes: a hard link the host made to a protected
//     file is another path to it, and aliases made outside capfs while a Dir is
//     live (a host process renaming a protected directory to an unprotected name)
//     are decided by their new names. Hard links a guest makes are decided on both
//     names. Deny patterns are a safety net; keep secrets out of the tree (do not
//     mount them).
//   - Without a policy or hooks (policy.AllowAll, the default) nothing is decided,
//     so paths are not resolved ahead of the operation: the backend resolves them
//     as it always does, beneath its root, and a Namespace still maps links across
//     its mounts.
//   - The size a policy limits (policy.Config.MaxFileSize) is decided for
//     WriteFile, Append and every file Copy creates; bytes streamed through a
//     Handle are limited by the backend (its quota or maximum file size) only.
//   - List and ReadDir show every name in a directory the policy lets the guest
//     list, including names it would refuse to open; only Walk and Glob filter
//     entry by entry.
//   - The symlink creation rule knows only this capability's root, not the mounts
//     of a Namespace beneath it: a link may climb out of the mount that holds it
//     into another part of the same tree. Backends never follow such a link (each
//     resolves beneath its own root). A target leaving the tree (absolute, or
//     climbing above the root of a capability that is the tree's root) is data
//     (vfs.LinkTarget): decided on the link's name, stored, read back, never
//     followed; a backend whose tree host tools read directly (the physical
//     backend) must refuse to create one itself, with vfs.SymlinkTarget.
//   - Calls already running when the host revokes or locks may finish.
//   - RemoveAll, Copy and Move are not atomic against concurrent changes: entries
//     created meanwhile can make RemoveAll fail with not_empty, and a directory
//     swapped for a symlink during the walk can have the link's target, which is
//     always inside the same backend, emptied instead. Move with AllowCopy copies
//     and then deletes; if the delete fails, both copies remain.
//   - An atomic write replaces the name: other hard links keep the old contents,
//     and durability depends on the backend's Sync. The temporary file is visible
//     in listings while it is written.
//
// # Cost
//
// With the default options (policy.AllowAll, no hooks, audit.Discard) the steps
// that could neither refuse nor be observed are skipped: no policy.Request, request
// id, clock reading or audit event is made, and the enforcement itself allocates
// nothing. Beyond what the backend allocates, a Stat costs only the fs.FileInfo it
// returns (nothing on the memory backend, which hands out the immutable status it
// keeps while the entry is unchanged), opening a file only the Handle, and ReadDir
// three objects whatever the number of entries. Revocation and the write lock cost one or two atomic loads per
// call whatever the depth of Control.Child and File.Revocable chains (the first
// check after a host change walks the chain once). With a policy, hooks or a sink,
// each call makes its request id and, for a policy or hooks, one policy.Request,
// and resolves its paths once (on the physical backend, one openat2 when no symlink
// lies on the path), plus one Locate for a pinned capability.
//
// Every type here is safe for concurrent use.
package dir
