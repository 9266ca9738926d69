// Package archive extracts untrusted archives safely and creates reproducible
// ones. It reads zip (store, deflate, zstd), tar (ustar, PAX, GNU), tar.gz and
// tar.zst with the standard library's readers and klauspost/compress; it never
// uses a reader that hands out names unsanitised.
//
// Extraction goes through a Target, normally a *dir.Dir (ExtractDirFile,
// ExtractToDir), in two phases:
//
//  1. Manifest. Every entry is read once and decided: its name sanitized
//     (SanitizeName), its type checked, collisions with earlier entries found,
//     the destination looked at, the destination's policy asked (Target.Check,
//     which for a Dir is Dir.Check: the same decision the write will get).
//     Accepted file data is copied to a private stage (memory up to
//     Options.MemoryBudget, then a 0700 temporary directory whose files are
//     named by entry number, never by an archive name), counted against the
//     Limits, and checked: each entry's declared size, each zip entry's
//     CRC-32 (always, stored or compressed, even a zero one) and compressed
//     size (deflate), the gzip CRC-32 or zstd checksum of the whole stream.
//  2. Merge. Only when the whole archive passed, the accepted entries are
//     created through the Target: directories (parents first), files, hard
//     links, and symlinks last, so nothing is ever written through a link the
//     archive made. For a Dir every call is an ordinary Dir call: decided,
//     hooked and audited, confined to the destination (a Sub of it).
//
// # Guarantees
//
//   - Nothing outside the destination changes, whatever the archive holds.
//   - A refused archive (a limit, corruption, a checksum, overlapping zip
//     entries, Options.Strict with a filtered entry, a Target error during
//     the manifest) leaves the destination exactly as it was: nothing is
//     written before the manifest phase has finished.
//   - A merge that fails part way (a quota, a concurrent change) removes what
//     it created (Result.RolledBack says whether all of it went); files it
//     replaced under Options.Overwrite were replaced atomically and stay
//     replaced.
//   - Every entry is either in Result.Extracted or in Result.Filtered with a
//     Reason, never silently dropped.
//
// Refused by default, entry by entry (filtered, with the Reason):
//
//   - names with "..", absolute ("/x"), drive ("C:", "c:x") or UNC ("//h")
//     prefixes, a backslash, NUL, C0/C1 control characters or DEL, invalid
//     UTF-8, a component over 255 bytes, a path over 4096 bytes or deeper than
//     Limits.MaxDepth;
//   - symlinks and hard links (with LinksInside: symlinks whose relative
//     target, resolved through the archive's own directories and links, stays
//     inside the destination, and hard links to a file extracted earlier from
//     the same archive);
//   - character and block devices, FIFOs, sockets, GNU and PAX sparse files,
//     encrypted zip entries, unknown entry types and compression methods;
//   - a name equal to an earlier entry's, or equal after Unicode NFC
//     normalization and full case folding ("README"/"readme",
//     "café" composed/decomposed, "STRASSE"/"straße"), a name beneath a file
//     or link entry, or beneath a link entry that was itself filtered;
//   - a name the destination already holds (unless Options.Overwrite and both
//     are regular files), and a name beneath a symlink or file of the
//     destination;
//   - whatever the destination's policy refuses (ReasonPolicy), including the
//     parent directories the merge would create.
//
// Modes are clamped, never applied as given: setuid, setgid and sticky are
// dropped; a file is extracted 0644, or 0755 if the archive gives it any
// execute bit, ANDed with the archive's bits and with owner read and write
// always set (0600 stays 0600, 0777 becomes 0755); a directory 0755 ANDed with
// its bits, owner rwx always set. Ownership (uid, gid, user and group names)
// is never applied. Modification times are applied only with
// Options.KeepModTimes.
//
// Limits (Limits, each settable, negative for none): the archive's bytes as
// read, counted after decompression for tar.gz and tar.zst (256 MiB), entries
// of any kind (50,000), the sum of extracted file sizes (512 MiB), one file
// (256 MiB), path depth (256) and a wall-clock budget for the whole extraction
// (5 minutes). A zip entry's declared size is checked against the limits
// before it is inflated, and the reader holds it to that size, so a zip bomb
// is refused without being expanded; overlapping zip entries (the
// non-recursive zip bomb) are refused from the central directory alone. A
// zip's central directory is read a second time, independently of
// archive/zip, and each entry's local header compared with it: a different
// name, method, flags, CRC-32 or sizes (those of the data descriptor, when
// the entry has one) refuses the archive (ErrCorrupt), so two tools never see
// different archives in one file.
//
// # Not guaranteed
//
//   - Collisions are detected within one archive; a name that differs only by
//     case from a name already in the destination is not refused (the
//     destination's backend decides whether they are the same file).
//   - Windows-reserved names (CON, NUL, trailing dots) are not refused: capfs
//     roots are POSIX trees.
//   - Between the manifest and the merge the destination can change under
//     other writers; the merge's calls are decided again (by the Dir) and fail
//     rather than follow anything outside, but a directory created meanwhile by
//     someone else is merged into.
//   - A zstd entry's compressed size is not checked byte for byte (its
//     decoder reads ahead; trailing bytes must still decode as zstd frames,
//     whose output the CRC-32 covers).
//   - A tar has one header per entry and no directory to disagree with; a
//     name given twice is filtered (ReasonCollision), never merged.
//
// Create writes archives reproducibly (sorted, normalized modes, no owners,
// optionally one fixed time) from a Source, normally a Dir (CreateFromDir),
// leaving out and listing what the Dir's policy refuses to read.
package archive
