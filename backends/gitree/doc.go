// Package gitree serves one revision of a git repository as a read-only capfs
// Backend, reading objects straight from the repository's object store with go-git:
// no checkout, no work tree, no index is touched.
//
// Beside the read-only FS, the package compares and writes revisions: Diff,
// DiffBackends and UnifiedDiff compare two revisions (or any two backends) as a typed
// list of changes and as git-style unified text; OpenOverlay gives a writable view of
// a branch whose writes stay in memory until Overlay.Commit writes blobs, trees and a
// commit into the object store and moves the branch only if it has not moved since
// the overlay was opened (conflict otherwise), touching no work tree or index. The
// overlay copies up per path: reads of untouched paths go to the base revision, the
// first write to a file copies that one file, deletions are whiteouts, a renamed
// base directory keeps overlaying its base tree, and Commit re-hashes only the
// directories that changed (see Overlay).
//
// Guarantees:
//   - Open resolves any revision go-git understands — branch, remote branch, tag
//     (annotated or light), full or abbreviated commit id, HEAD~3, main^2 — and also a
//     full tree id. A revision that names nothing is not_found; the error names the
//     revision and never the repository's host path.
//   - Every mutation fails with read_only; OpenFile with any write flag does too.
//   - Modes are faithful: regular files are 0644, executables 0755, directories
//     ModeDir|0755, symlinks (mode 120000) ModeSymlink|0777 with the blob's content as
//     target. Symlinks are followed by the shared resolver vfs.Resolve beneath the
//     backend's root, so absolute or escaping targets fail with path_outside_sandbox.
//     A submodule (gitlink) is an empty directory whose Info.Sys is an *Entry of kind
//     "submodule" carrying the commit id it pins.
//   - A file's ModTime is the committer time of the revision's commit (zero when the
//     backend was opened on a bare tree id).
//   - Sub pins the subtree's tree id: nothing later can redirect it.
//   - Decoded trees are kept in a bounded LRU cache keyed by tree id. All methods are
//     safe for concurrent use.
//
// The object store is go-git's filesystem storage, opened by Open itself (except
// for a ".git" file, which go-git follows with its defaults) with a bounded number
// of pack file descriptors kept open for reuse (WithMaxOpenDescriptors; Close
// releases them) and an optional LargeObjectThreshold (WithLargeObjectThreshold).
//
// Blobs up to 8 MiB (WithStreamThreshold) are loaded into memory whole at OpenFile;
// larger ones are streamed, reopening the object for a read before the stream's
// position. go-git itself decodes a packed object whole unless it exceeds
// WithLargeObjectThreshold, and always for deltified objects.
//
// Not (yet) provided: the object store is
// accessed under one mutex (go-git's filesystem storage does not promise concurrent
// safety), so readers are serialized while they fetch objects. BenchmarkReadAll
// compares the storage settings on a small packed repository (500 files of 2 KiB):
// reusing pack descriptors made reading every file about 2.9× faster than reopening
// the pack per object, a one-tree cache cost about 1.5×; the Go source tree
// benchmark of issue 4 is still to be written.
package gitree
