// Package materialize checks a Dir's subtree out into a real, private host
// directory for a sandboxed process, finds what the process changed, and brings
// the changes back through the same Dir.
//
// Checkout walks the source through its *dir.Dir (so the Dir's policy decides
// and its audit trail records every read) and writes a new directory, mode
// 0700, under a base directory (Options.Base, else $CAPFS_TMPDIR, else /dev/shm
// when it is a writable tmpfs with room, else os.TempDir()), recording a
// Manifest: every path's type, size, mode, modification time, SHA-256 digest
// (files) and target (symlinks). The strategy is the fastest safe one (see Strategy): a read-only
// bind of the physical directory itself, hard links, or a parallel copy that
// hashes while it copies. Tree.Diff lists what changed since; Tree.SyncBack
// validates every change, checks the source for conflicting edits, and only then
// applies the changes through the Dir; Tree.Close removes what Checkout made.
//
// # Guarantees
//
//   - The checkout holds only regular files, directories and symlinks whose
//     target is relative and stays inside the tree. Paths the Dir's policy denies,
//     special files and other symlinks are left out and reported (Tree.Skipped);
//     setuid, setgid and sticky bits are not copied.
//   - Nothing in a checkout is ever followed by this package: files are created
//     with O_CREAT|O_EXCL|O_NOFOLLOW beneath a handle on the checkout root, with
//     openat2 refusing any symlink on the way (a component-by-component walk with
//     O_NOFOLLOW where openat2 is missing); Diff and SyncBack walk it by
//     directory handles, lstat without following, and open only regular files
//     (O_NONBLOCK, checked to be the inode examined), so links and FIFOs the
//     sandbox leaves cannot lead them out or block them.
//   - Nothing leaves the checkout except through the Dir. SyncBack refuses
//     special files, absolute and escaping symlinks, names the Dir cannot hold,
//     changes beyond the Limits, and every change the source Dir would refuse:
//     each call the sync will make is first put to Dir.Check, which applies the
//     Dir's read-only and lock state and its own policy (with its Asker), such
//     as the secret and persistence patterns of policy.Defaults()
//     (.git/hooks/**); SyncOptions.Policy can add stricter rules. It strips
//     setuid, setgid and sticky bits and checks every changed path for a
//     conflicting edit in the source, all before writing anything: a refusal or
//     a conflict (under ConflictFail) leaves the source untouched. Files are
//     written atomically (Dir.WriteFile).
//   - Close removes the checkout directory and everything in it, and nothing
//     else; a bound physical directory is left alone.
//
// # Not guaranteed
//
//   - SyncBack is not a transaction. Dir.Check stops before the Dir's hooks and
//     its backend, so a hook refusing a call, a backend failing one (a full
//     disk, a quota), or the host revoking or locking the Dir (or its Asker
//     answering differently) after validation stops SyncBack partway; it
//     reports what it had applied.
//   - The policy decides what a sync may write: a Dir with the default
//     policy.AllowAll lets the sandbox write anything beneath it, .git/hooks
//     included. Build the source Dir with a policy (policy.Defaults() at
//     least), or pass one as SyncOptions.Policy.
//   - The checkout must not be modified while SyncBack runs (run it after the
//     sandboxed process has exited): a file whose contents changed after
//     validation stops the sync with conflict, leaving earlier changes applied.
//   - Conflict detection compares the source with the manifest at the moment of
//     the check; an edit racing with the apply phase is overwritten.
//   - A bound or hard-linked checkout shares inodes with the host directory:
//     the sandbox must see it read-only (Options.ReadOnly is that promise), and
//     the host's own later edits show through. A bind shows the directory as it
//     is while the sandbox runs: what the Dir allowed at checkout, plus whatever
//     the host adds afterwards, and any name the physical backend leaves out of
//     listings (names holding a backslash).
//   - A file is held in memory while it is written back (Dir.WriteFile takes
//     the contents): the largest file synced bounds the memory used.
//   - Linux only (openat2, /proc/self/fd).
package materialize
