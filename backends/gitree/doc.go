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
//     tree id, full or abbreviated (at least 4 hex digits). A revision that names
//     nothing is not_found, and so is an abbreviated id that several trees or commits
//     share (the message says it is ambiguous); the error names the revision and
//     never the repository's host path.
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
// Storage. Objects in pack files (nearly all of a cloned or garbage-collected
// repository) are read by the package's own pack reader rather than through
// go-git's storage: it looks ids up in the version 2 pack indexes itself, reads an
// entry's compressed bytes with one positioned read (no lock, so any number of
// goroutines read at once), inflates them with its own DEFLATE decoder, resolves
// OFS_DELTA and REF_DELTA chains with a byte-bounded cache of delta bases
// (WithDeltaBaseCacheSize, 32 MiB by default) and decodes trees straight from
// their bytes. Everything else — loose objects (an overlay's commits write them),
// packs written after Open, alternates, a repository opened through a ".git"
// file, or every object with WithDirectPacks(false) — is read through go-git's
// filesystem storage under one mutex, with a bounded number of pack descriptors
// kept open (WithMaxOpenDescriptors), go-git's object cache (WithObjectCacheSize)
// and an optional LargeObjectThreshold. Revisions, refs and commits are resolved
// through go-git at Open. The pack reader holds one descriptor per pack file until
// Close.
//
// Corrupt and hostile packs. The pack reader trusts nothing a pack says: every
// malformed entry answers a *vfs.Error (io_error, its message naming the reason
// and the entry's offset, never a host path) in time bounded by the pack's size
// and memory bounded by the object's size. Delta chains are walked with cycle
// detection (REF_DELTA and OFS_DELTA alike) and at most 10,000 deep (git writes
// at most 4,095); a delta's instructions are checked against its base and its
// declared result size before the result is allocated, at exactly that size; an
// object rebuilt from deltas may not exceed 1 GiB (file_too_large), so one read
// of a hostile pack holds at most about twice that; inflating stops one byte
// past an entry's declared size, and an entry claiming more than its compressed
// bytes can produce (deflate's 1032:1) is refused before allocating; every entry
// read whole is checked against the CRC-32 its index records (a streamed blob,
// by a read from its start to its end, with its zlib checksum), and the zlib
// checksum of every whole object. A pack whose index is readable but does not
// match it is refused for every object it names, as git refuses it. go-git reads
// every object of the packs the reader knows through the reader, so go-git's own
// pack decoding (which recurses through a delta cycle until the stack overflows)
// never sees them. The bounds do not cover what go-git alone reads: loose
// objects, packs whose index the reader cannot use (version 1, unreadable), packs
// written after Open, or everything with WithDirectPacks(false).
// testdata/hostile holds one pack per kind of attack, with the error each must
// answer.
//
// Large blobs and ReadAt. A blob up to 8 MiB (WithStreamThreshold) is read whole
// at OpenFile, size and content in one pass, and ReadAt and Seek on it are copies.
// A larger one is streamed, and what is random-access depends on how it is stored:
//   - Stored whole in a pack (git never deltifies blobs over core.bigFileThreshold,
//     512 MiB by default): random access. While
//     inflating, the decoder records a checkpoint at a deflate block boundary about
//     every 1/64 of the blob and at least 256 KiB apart (the input bit and the last
//     32 KiB of output); a ReadAt restarts from the nearest checkpoint at or before
//     its offset, or carries on forward, whichever is closer. Once a region has been
//     decoded once, a read anywhere in it inflates at most one spacing (plus the
//     rest of a deflate block) more than it returns; the first read beyond the
//     decoded region inflates everything up to it, since deflate cannot be entered
//     anywhere else. Checkpoints are shared by all open files of the blob, cost at
//     most 4 MiB per blob, and are kept for the last 8 blobs streamed on an FS. The
//     zlib checksum and the entry's index CRC are verified only by a read that
//     decodes from the start to the end. Reading a blob of any size this way, from
//     start to end, allocates a few MiB (the decoder's 288 KiB window, 64 KiB of
//     input, at most 4 MiB of checkpoints): TestStreamedBlobHeapBoundStress holds a
//     512 MiB blob's read (CAPFS_STRESS=1; 64 MiB otherwise) to 32 MiB, measured
//     at 2.7 MiB.
//   - Stored as a delta: the chain is resolved into memory at the first read (as
//     git and go-git do); from then on every read is a copy, and the file holds the
//     whole blob in memory until it is closed. A deltified blob over 1 GiB is
//     file_too_large (git does not deltify blobs over core.bigFileThreshold, 512
//     MiB by default).
//   - Loose, or read through go-git: sequential. A read before the stream's
//     position reopens the object and inflates it from the start.
//
// Measured: issue 4's benchmark (bench/RESULTS.md, go run ./bench/cmd/benchtable
// -only gitree) on one commit of Go's own src (11,478 files, 128 MB, one pack,
// 1,324 blobs deltified), in one run on a loaded 2-core VM (wall-clock figures
// vary by tens of percent between runs there; RESULTS.md has two), median
// wall-clock time per iteration, each from a fresh Open: listing every path 19.5 ms against git
// ls-tree -r's 20.3 ms; reading every blob 811 ms single-threaded and 598 ms in two
// goroutines against git cat-file --batch's 654 ms (single-threaded); checking the
// tree out into a directory 4.8 s against git archive | tar -x's 5.0 s (ext4's file
// creation dominates both). What each storage choice buys, from the same run
// (list every path, read every blob in one goroutine unless said):
//
//	setting                                              list      read
//	defaults (direct pack reads, 32 MiB delta base cache) 22.8 ms   693 ms
//	defaults, 2 goroutines                                  –        445 ms
//	no delta base cache                                   23.2 ms   801 ms
//	go-git storage (16 descriptors kept, 96 MiB cache)    33 ms     1.69 s
//	go-git storage, 2 goroutines (serialized by its lock)   –        1.83 s
//	go-git storage, descriptors not kept                  97.9 ms   2.42 s
//	go-git storage, LargeObjectThreshold 64 KiB           34.7 ms   1.7 s
//	go-git storage, 1 MiB object cache                    40.1 ms   2.24 s
//
// Reading packs directly is 2.4× faster than go-git's storage in one goroutine
// (an entry costs one pread, no lock and no reverse-offset bookkeeping, and its
// inflater runs about 1.7× as fast as compress/zlib and 1.3× as fast as
// klauspost/compress on BenchmarkInflate's data, and is kept only while it
// stays at least as fast as klauspost/compress on the gitree bench: see
// WithLibraryInflater and bench/RESULTS.md) and scales with goroutines where go-git's lock
// serializes them; the delta base cache saves about 13%; keeping go-git's pack
// descriptors open saves 30% of its reading time and two thirds of its listing;
// LargeObjectThreshold changes nothing measurable here (256 blobs exceed 64 KiB; the
// threshold only keeps them out of go-git's cache). A
// random 4 KiB ReadAt in a 16 MiB streamed blob takes about 1.4 ms with
// checkpoints against 42 ms through go-git (BenchmarkStreamedReadAt).
package gitree
