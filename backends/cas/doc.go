// Package cas keeps trees as content-addressed, immutable data in the layout of
// the Remote Execution API (REAPI v2), which Bazel, Buildbarn, BuildBuddy and
// NativeLink speak: a file is a blob named by its Digest (lowercase SHA-256 hex
// and size), a directory is a build.bazel.remote.execution.v2.Directory message
// stored as a blob, and a tree is named by the digest of its root Directory.
// Package remote (backends/cas/remote) moves trees to and from REAPI servers;
// this package imports no gRPC.
//
// What it offers:
//   - Store: the local blob store (OpenStore), with named roots (SaveRoot, Root,
//     Roots, DeleteRoot), garbage collection (GC) and checks (Verify,
//     VerifyTree).
//   - Snapshot, SnapshotHost: store any vfs.Backend (a Dir's Backend, to store
//     what the Dir shows) or a host directory, with a stat cache that makes re-snapshotting an unchanged
//     tree a matter of stats.
//   - Mount: an FS, the read-only vfs.Backend of a tree, lazy (each directory and
//     blob read when first needed); OpenOverlay: a writable view over a tree,
//     opened in O(1) with per-path copy-up, whose Commit yields a new root
//     digest re-using the digests of everything it did not change.
//   - Materialize: a tree written to a host directory by hard links from a local
//     link cache; Ingest: a host directory (a sandbox's outputs) stored back.
//
// Guarantees:
//   - Trees are byte-exact REAPI: Directory.Encode writes the bytes proto.Marshal
//     of the remote-apis Go types writes (tested on golden vectors and random
//     trees), without reflection; files, directories and symlinks each sorted by
//     name in Go string order, is_executable from the owner-execute bit, default
//     values omitted, node properties never written. The empty Directory is
//     e3b0c442…b855/0. DecodeDirectory accepts only what Encode could write
//     (node properties skipped), so a tree read from anywhere has valid, unique,
//     sorted, UTF-8 names.
//   - A blob file is written to a temporary name and renamed into place; a blob
//     is zstd-compressed at rest only when that makes it smaller; every read
//     checks the bytes against the digest and fails with a *CorruptError
//     (ErrCorrupt) rather than return other bytes (a blob over 4 MiB is streamed
//     and its last read is the one that fails); a missing blob is ErrMissing.
//     Memory is bounded for any blob size (TestLargeBlobBoundedMemoryStress: about
//     36 MiB allocated, the same for 16 MiB, 64 MiB and 256 MiB blobs).
//   - Named roots are durable: SaveRoot syncs the store's file system, then
//     writes the name with fsync and rename.
//   - GC never deletes a blob a named root reaches, nor one written, or found by
//     Has, within its grace period (Has refreshes a blob's time at most every 10
//     seconds), nor the tree of a snapshot finished within it
//     (snapshots pin their roots); it holds the store's lock exclusively, which
//     ingests (snapshots, puts) hold shared, also across processes (flock(2));
//     it deletes nothing when any named tree cannot be read.
//   - The FS follows symlinks beneath its root only (vfs.Resolve): following an
//     absolute or escaping target is path_outside_sandbox. The target is data:
//     Readlink returns it, and Materialize writes it as it is.
//
// What it does not do: a Directory records names, contents, the executable bit
// and symlink targets, nothing else (other permission bits, times, owners, hard
// links, special files are not kept; snapshots report what they leave out).
// Files written by hard links share their inode with the link cache: a
// sandbox that can write them (root, or the cache's owner after a chmod) can
// change the cache entry; the change is detected by its modification time and
// the entry replaced at the next Materialize, and the store's blobs are never
// linked, but give sandboxes another uid or a read-only mount (as
// examples/cas-build does) where that matters. The overlay keeps written files
// in memory (bounded by its memory options), and relies on its base tree
// staying in the store (named, or within its pin's grace period).
package cas
