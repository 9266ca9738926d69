// Package gitree serves one revision of a git repository as a read-only
// [vfs.Backend]. It reads objects straight from the repository's object store
// with go-git. No checkout, work tree or index is touched.
//
// Beside the read-only [FS], the package compares and writes revisions. [Diff],
// [DiffBackends] and [UnifiedDiff] compare two revisions (or any two backends), as
// a typed list of changes and as git-style unified text. [OpenOverlay] gives a
// writable view of a branch whose writes stay in memory. [Overlay.Commit] writes
// blobs, trees and a commit into the object store. It moves the branch only if
// the branch has not moved since the overlay was opened (conflict otherwise). It
// touches no work tree or index. The overlay copies up per path (see [Overlay]).
//
// Guarantees:
//   - [Open] resolves any revision go-git understands: branch, remote branch, tag
//     (annotated or light), full or abbreviated commit id, HEAD~3, main^2. It also
//     resolves a tree id, full or abbreviated (at least 4 hex digits). A revision
//     that names nothing is not_found. So is an abbreviated id that several trees
//     or commits share (the message says it is ambiguous). The error names the
//     revision and never the repository's host path.
//   - Every mutation fails with read_only. OpenFile with any write flag does too.
//   - Modes are faithful: regular files are 0644, executables 0755, directories
//     ModeDir|0755. Symlinks (mode 120000) are ModeSymlink|0777, with the blob's
//     content as target. The shared resolver [vfs.Resolve] follows symlinks beneath
//     the backend's root, so following an absolute or escaping target fails with
//     path_outside_sandbox; the target itself is data, which Readlink returns and
//     a checkout or clone writes as it is. A submodule (gitlink) is an empty directory whose
//     Info.Sys is an [*Entry] of kind "submodule" carrying the commit id it pins.
//   - A file's ModTime is the committer time of the revision's commit (zero when
//     the backend was opened on a bare tree id).
//   - Sub pins the subtree's tree id: nothing later can redirect it.
//   - Decoded trees are kept in a bounded LRU cache keyed by tree id. All methods
//     are safe for concurrent use.
//
// # Storage
//
// Objects in pack files (nearly all of a cloned or garbage-collected repository)
// are read by the package's own pack reader, not through go-git's storage. It
// looks ids up in the version 2 pack indexes itself. It reads an entry's
// compressed bytes with one positioned read, with no lock, so any number of
// goroutines read at once. It inflates them with its own DEFLATE decoder. It
// resolves OFS_DELTA and REF_DELTA chains with a byte-bounded cache of delta
// bases ([WithDeltaBaseCacheSize], 32 MiB by default).
//
// Everything else is read through go-git's filesystem storage, under one mutex.
// That is loose objects (an overlay's commits write them), packs written after
// Open, alternates, a repository opened through a ".git" file, and every object
// with WithDirectPacks(false). That storage keeps a bounded number of pack
// descriptors open ([WithMaxOpenDescriptors]), uses go-git's object cache
// ([WithObjectCacheSize]) and an optional [WithLargeObjectThreshold]. Revisions,
// refs and commits are resolved through go-git at Open. The pack reader holds
// one descriptor per pack file until Close.
//
// # Corrupt and hostile packs
//
// The pack reader trusts nothing a pack says. Every malformed entry answers a
// [*vfs.Error] (io_error, its message naming the reason and the entry's offset,
// never a host path). It does so in time bounded by the pack's size and memory
// bounded by the object's size:
//   - Delta chains are walked with cycle detection (REF_DELTA and OFS_DELTA
//     alike), at most 10,000 deep (git writes at most 4,095).
//   - A delta's instructions are checked against its base and its declared result
//     size before the result is allocated, at exactly that size.
//   - An object rebuilt from deltas may not exceed 1 GiB (file_too_large). So one
//     read of a hostile pack holds at most about twice that.
//   - Inflating stops one byte past an entry's declared size. An entry claiming
//     more than its compressed bytes can produce (deflate's 1032:1) is refused
//     before allocating.
//   - Every entry read whole is checked against the CRC-32 its index records, and
//     every whole object against its zlib checksum. A streamed blob is checked by a
//     read from its start to its end.
//   - A pack whose index is readable but does not match it is refused for every
//     object it names, as git refuses it.
//
// go-git reads every object of the packs the reader knows through the reader, so
// go-git's own pack decoding never sees them. The bounds do not cover what go-git
// alone reads: loose objects, packs whose index the reader cannot use (version 1,
// unreadable), packs written after Open, or everything with
// WithDirectPacks(false). testdata/hostile holds one pack per kind of attack,
// with the error each must answer.
//
// # Large blobs and ReadAt
//
// A blob up to 8 MiB ([WithStreamThreshold]) is read whole at OpenFile, size and
// content in one pass. ReadAt and Seek on it are copies. A larger one is streamed.
// What is random-access depends on how it is stored:
//   - Stored whole in a pack: random access. Git never deltifies blobs over
//     core.bigFileThreshold (512 MiB by default). While inflating, the decoder
//     records a checkpoint at a deflate block boundary about every 1/64 of the
//     blob, at least 256 KiB apart. A ReadAt restarts from the nearest checkpoint
//     at or before its offset, or carries on forward, whichever is closer. Once a
//     region has been decoded, a read anywhere in it inflates at most one spacing
//     (plus the rest of a deflate block) more than it returns. The first read
//     beyond the decoded region inflates everything up to it. Checkpoints are
//     shared by all open files of the blob, cost at most 4 MiB per blob, and are
//     kept for the last 8 blobs streamed on an FS. The zlib checksum and the
//     entry's index CRC are verified only by a read that decodes from the start
//     to the end. Such a read allocates a few MiB, whatever the blob's size.
//   - Stored as a delta: the chain is resolved into memory at the first read (as
//     git and go-git do). From then on every read is a copy, and the file holds
//     the whole blob in memory until it is closed. A deltified blob over 1 GiB is
//     file_too_large.
//   - Loose, or read through go-git: sequential. A read before the stream's
//     position reopens the object and inflates it from the start.
//
// docs/design-notes.md records what each storage choice measured.
package gitree
