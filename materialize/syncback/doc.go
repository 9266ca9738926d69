// Package syncback brings a checkout's changes back into its source Dir:
// every change goes through the source Dir's own checks, all of them are
// validated and judged against the checkout's base before anything is
// written, and the apply runs under a journal that [Recover] can finish after
// a crash.
//
// The package builds on Linux only, as [materialize] does; on other systems it
// is empty.
//
// [Run] takes a [materialize.Tree] (a checkout, or a lazy run's layer made
// into one) and its [Options], and returns a [Report] that lists every change.
// [Pending] finds the journals of syncs that did not finish; [Recover] rolls
// one forward. The checkout itself (its Manifest, Diff and Export, and
// whether Close keeps it) is package materialize's; this package reads it and
// records what it applied (see [materialize.Tree.Advance]).
//
// # Guarantees
//
//   - Nothing leaves the checkout except through the Dir. Run refuses
//     special files, absolute and escaping symlinks, names the Dir cannot hold,
//     changes beyond the [materialize.Limits], and every change the source Dir
//     would refuse: each call the sync will make is first put to Dir.Check,
//     which applies the Dir's read-only and lock state and its own policy
//     (with its Asker), such as the secret and persistence patterns of
//     policy.Defaults() (.git/hooks/**); [Options].Policy can add stricter
//     rules. It strips setuid, setgid and sticky bits.
//   - Sync-back is a plan. Every change (added, modified, deleted, type, mode
//     and time changes) is validated, and compared with the source as it is
//     now, before anything is written, and every refusal and conflict is
//     reported, not just the first. A path the source changed since the
//     checkout, and a path written beneath a directory the source removed,
//     renamed or replaced, is a conflict, never a partial apply. The caller
//     chooses: nothing applied ([RejectAbort], the default), or everything
//     that does not depend on a refused or conflicting change
//     ([RejectApplyRest]); and how conflicts settle ([ConflictFail],
//     [ConflictKeepOurs], [ConflictKeepTheirs]).
//   - Nothing is discarded without being listed. The report puts every change
//     in Applied, NotApplied (with its [Cause]: refused, conflict, theirs,
//     depends, aborted, limit, failed, stopped) or Settled (nothing to do).
//     When anything is not applied the checkout is kept: Close leaves it, and
//     [Report].Checkout names it for the host. Errors name guest paths only;
//     the checkout's host path is in the report alone.
//   - The apply is crash-safe. The plan is written to a journal outside the
//     project and the checkout ([Options].JournalDir, else
//     $CAPFS_STATE_DIR/journal, else $XDG_STATE_HOME/capfs/journal, else
//     ~/.local/state/capfs/journal: [DefaultJournalDir]) and flushed to disk
//     before the first change. Each file is written atomically (Dir.WriteFile:
//     a temporary file, fsync'ed, renamed over the target), so if the process
//     dies (kill -9) each file is wholly old or wholly new; [Recover], given
//     the journal [Pending] finds, rolls the plan forward: it applies each
//     remaining step whose base the source still has, counts those the source
//     already has the result of, lists the others as conflicts, and removes
//     the temporary file the interrupted write left. New contents are read
//     back from the checkout, digest checked.
//   - Times are part of a change: every file written and every file whose
//     modification time alone changed gets the checkout's time, so after a
//     build in the sandbox the source's files have the times make left there,
//     and the next make has nothing to do.
//
// # Not guaranteed
//
//   - Run is not an all-or-nothing transaction once it applies. Dir.Check
//     stops before the Dir's hooks and its backend, so a hook refusing a call,
//     a backend failing one (a full disk, a quota), or the host revoking or
//     locking the Dir (or its Asker answering differently) after validation
//     stops Run partway; it lists what it applied and what it did not.
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
//   - A directory's modification time is synced only after a sync that
//     applied everything, and only where the source's directory still has
//     the checkout's time ([materialize.Tree.SyncDirTimes]).
//   - The policy decides what a sync may write: a Dir with the default
//     policy.AllowAll lets the sandbox write anything beneath it, .git/hooks
//     included. Build the source Dir with a policy (policy.Defaults() at
//     least), or pass one as [Options].Policy.
//   - The checkout must not be modified while Run runs (run it after the
//     sandboxed process has exited): a file whose contents changed after
//     validation is not applied (conflict).
//   - A file is held in memory while it is written back (Dir.WriteFile takes
//     the contents): the largest file synced bounds the memory used.
//   - Linux only (openat2, /proc/self/fd).
package syncback
