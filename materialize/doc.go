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
// # The checkout mirrors the policy
//
// A sandbox sees what the Dir would show it, and no more:
//
//   - Paths the policy hides are absent (above). A bind (StrategyBind) is used
//     only when the physical directory holds nothing but what the Dir's walk
//     showed: a name the Dir cannot address (the physical backend drops names
//     holding a backslash from listings) or a path it hides rules the bind out.
//   - Write-denied paths are read-only inside: Tree.ReadOnlyPaths lists every
//     .git directory or file and every entry Dir.Check refuses to write (the
//     persistence files of policy.Defaults(), say), for the sandbox to bind
//     read-only over themselves (sandbox.Mount.ReadOnly): a process gets EROFS
//     at once rather than a refusal at sync-back, and git inside cannot commit,
//     tag, reset or otherwise move the host's refs, objects or index.
//   - git's object database shows no more than the checkout: under GitAuto (the
//     default) each .git directory's history (every commit in its object store,
//     reachable or not, its index and its submodules' git directories) is
//     scanned, and a .git whose history names a path the policy hides (or that
//     is too large to scan: Options.GitScanBudget) is emptied and reported in
//     Skipped, so `git show HEAD:.env` finds no repository. GitOmit always
//     empties .git; GitKeep keeps it unscanned.
//   - With Options.Private, no host path of the source shows in the sandbox's
//     /proc/self/mountinfo: nothing is bound from the source, and the checkout
//     is a tmpfs of its own where this process may mount one (root), so its
//     entry's root is "/" (else its own temporary name shows).
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
//     the host adds afterwards (a name the physical backend cannot address
//     included, if the host adds one after the checkout).
//   - ReadOnlyPaths covers entries that exist at checkout: creating a new
//     refused file (a .bashrc where there was none) is refused at sync-back
//     only, and so is a change to a refused symlink (a bind cannot cover one).
//   - The git scan knows paths only from trees and the index: a blob no tree
//     or index entry names (git add, then git rm --cached, before gc) is not
//     recognized as a hidden file's contents.
//   - A file is held in memory while it is written back (Dir.WriteFile takes
//     the contents): the largest file synced bounds the memory used.
//   - Linux only (openat2, /proc/self/fd).
package materialize
