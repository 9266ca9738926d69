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
// brings the changes back through the Dir as one plan: every change validated
// and checked against the source before any is applied, then applied under a
// journal; Tree.Close removes what Checkout made, unless it is kept.
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
//     setuid, setgid and sticky bits.
//   - Sync-back is a plan. Every change (added, modified, deleted, type, mode
//     and time changes) is validated, and compared with the source as it is
//     now, before anything is written, and every refusal and conflict is
//     reported, not just the first. A path the source changed since the
//     checkout, and a path written beneath a directory the source removed,
//     renamed or replaced, is a conflict, never a partial apply. The caller
//     chooses: nothing applied (RejectAbort, the default), or everything that
//     does not depend on a refused or conflicting change (RejectApplyRest);
//     and how conflicts settle (ConflictFail, ConflictKeepOurs,
//     ConflictKeepTheirs).
//   - Nothing is discarded without being listed. The report puts every change
//     in Applied, NotApplied (with its cause: refused, conflict, theirs,
//     depends, aborted, limit, failed, stopped) or Settled (nothing to do).
//     When anything is not applied the checkout is kept: Close leaves it, and
//     SyncReport.Checkout names it for the host. Errors name guest paths only;
//     the checkout's host path is in the report alone.
//   - The apply is crash-safe. The plan is written to a journal outside the
//     project and the checkout (SyncOptions.JournalDir, else
//     $CAPFS_STATE_DIR/journal, else $XDG_STATE_HOME/capfs/journal, else
//     ~/.local/state/capfs/journal) and flushed to disk before the first change. Each file is
//     written atomically (Dir.WriteFile: a temporary file, fsync'ed, renamed
//     over the target), so if the process dies (kill -9) each file is wholly
//     old or wholly new; Recover, given the journal PendingJournals finds,
//     rolls the plan forward: it applies each remaining step whose base the
//     source still has, counts those the source already has the result of,
//     lists the others as conflicts, and removes the temporary file the
//     interrupted write left. New contents are read back from the checkout,
//     digest checked.
//   - Times are part of a change: every file written and every file whose
//     modification time alone changed gets the checkout's time, so after a
//     build in the sandbox the source's files have the times make left there,
//     and the next make has nothing to do.
//   - Close removes the checkout directory and everything in it, and nothing
//     else, unless the checkout is kept; a bound physical directory is left
//     alone.
//
// # The checkout mirrors the policy
//
// A sandbox sees what the Dir would show it, and no more (mirror.go):
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
//     default) each git directory's history (a .git, or a directory laid out
//     as one, such as a bare repository: every commit in its object store,
//     reachable or not, its index, its linked worktrees' indexes and its
//     submodules' git directories) is scanned (ScanGitHistory, cached in
//     Options.GitScanCache), and one whose history names a path the policy
//     hides (or that is too large to scan: Options.GitScanBudget) is emptied,
//     read-only, and reported in Skipped and GitReports, so `git show
//     HEAD:.env` finds no repository. Loose objects no history names (a blob
//     added and dropped) are removed from a kept one; a pack holding one
//     empties it. GitOmit always empties git directories; GitKeep scans as
//     GitAuto and empties those that name a hidden path, keeping those the
//     scan cannot finish or read.
//   - With Options.Private, no host path of the source shows in the sandbox's
//     /proc/self/mountinfo: nothing is bound from the source, and the checkout
//     is a tmpfs of its own where this process may mount one (root, base on a
//     tmpfs), so its entry's root is "/" (else its own temporary name shows).
//
// # Not guaranteed
//
//   - SyncBack is not an all-or-nothing transaction once it applies. Dir.Check
//     stops before the Dir's hooks and its backend, so a hook refusing a call,
//     a backend failing one (a full disk, a quota), or the host revoking or
//     locking the Dir (or its Asker answering differently) after validation
//     stops SyncBack partway; it lists what it applied and what it did not.
//     Recover rolls forward, never back: a step it cannot apply is listed.
//   - The source can change between a step's last check and its write: each
//     step looks at its path again just before it is applied (an Lstat
//     compared with what validation saw, and the full comparison when it
//     differs), which narrows the window but cannot close it; an edit of the
//     same size within the same tick of the filesystem's clock is not seen by
//     the Lstat. Recover always compares contents.
//   - Recover needs the checkout: if it is gone (a reboot emptied /dev/shm),
//     the files not yet written are listed as not applied. Set $CAPFS_TMPDIR
//     to a disk directory for checkouts that survive a power loss. A crash
//     before the journal is committed applied nothing; Recover then reports
//     the checkout, which holds every change, without itemising them all.
//   - Directories' modification times are not synced.
//   - The policy decides what a sync may write: a Dir with the default
//     policy.AllowAll lets the sandbox write anything beneath it, .git/hooks
//     included. Build the source Dir with a policy (policy.Defaults() at
//     least), or pass one as SyncOptions.Policy.
//   - The checkout must not be modified while SyncBack runs (run it after the
//     sandboxed process has exited): a file whose contents changed after
//     validation is not applied (conflict).
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
