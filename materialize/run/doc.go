// Package run runs a command in a sandbox on Dirs and brings its changes
// back through them: the one loop behind capfs run, run --grants and
// authority.Run.
//
// The package builds on Linux only (FUSE, bubblewrap); on other systems it is
// empty, and capfs run says so.
//
// Each Dir reaches the sandbox one of two ways: a checkout
// ([materialize.Checkout], a private copy with a manifest as its base) or,
// where FUSE works, a lazy mount ([StartLazy]: a FUSE
// copy-on-write layer over the Dir, whose upper directory holds the changes
// and whose first sight of each entry is its base). The command runs once,
// under a [sandbox.Runner]. Its changes are then a [materialize.Tree] per
// writable Dir, synced back through that Dir ([syncback.Run]):
// every change decided again by the Dir's policy, under a journal, with
// conflicts judged against the base.
//
// # Guarantees
//
//   - Every read the sandbox sees and every change it makes goes through the
//     mount's Dir: its policy decides, its audit trail records.
//   - A read-only mount is bound read-only; nothing of it is synced back.
//   - A lazy view refuses at once the writes its [ViewPolicy] refuses
//     (EROFS), and every write to a .git.
package run
