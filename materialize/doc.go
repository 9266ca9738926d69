// Package materialize checks a Dir's subtree out into a real, private host
// directory for a sandboxed process and finds what the process changed;
// package syncback brings the changes back through the same Dir, and states
// its own guarantees (the plan, the journal, Recover).
//
// The package builds on Linux only (openat2, O_PATH, tmpfs checkouts); on other
// systems it is empty.
//
// Checkout walks the source through its *dir.Dir (so the Dir's policy decides
// and its audit trail records every read) and writes a new directory, mode
// 0700, under a base directory (Options.Base, else $CAPFS_TMPDIR, else /dev/shm
// when it is a writable tmpfs with room, else os.TempDir()), recording a
// Manifest: every path's type, size, mode, modification time, SHA-256 digest
// (files) and target (symlinks). The strategy is the fastest safe one (see Strategy): a read-only
// bind of the physical directory itself, hard links, or a parallel copy that
// hashes while it copies. Tree.Diff lists what changed since; package
// syncback brings the changes back through the Dir (syncback.Run), and
// Tree.Export copies them into another Dir; Tree.Close removes what Checkout
// made, unless it is kept.
//
// # Guarantees
//
//   - The checkout holds only regular files, directories and symlinks, each
//     link's target written as the source holds it, one that is absolute or
//     leaves the tree included: a target is data, resolved only by the sandbox
//     in its own namespace (issue 29). Paths the Dir's policy denies, special
//     files and links whose target the source hides are left out and reported
//     (Tree.Skipped); setuid, setgid and sticky bits are not copied.
//   - Nothing in a checkout is ever followed by this package: files are created
//     with O_CREAT|O_EXCL|O_NOFOLLOW beneath a handle on the checkout root, with
//     openat2 refusing any symlink on the way (a component-by-component walk with
//     O_NOFOLLOW where openat2 is missing); Diff and sync-back walk it by
//     directory handles, lstat without following, and open only regular files
//     (O_NONBLOCK, checked to be the inode examined), so links and FIFOs the
//     sandbox leaves cannot lead them out or block them.
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
//   - Linux only (openat2, /proc/self/fd).
package materialize
