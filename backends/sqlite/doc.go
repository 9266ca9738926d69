// Package sqlite is a persistent vfs.Backend in one SQLite file, through
// modernc.org/sqlite (pure Go, no cgo): agent scratch that survives the session
// and can be copied, inspected with the sqlite3 shell, snapshotted and rolled back
// as one file.
//
// # Semantics
//
// The same as package memory's wherever both are defined (both pass vfstest): a
// real tree of inodes with files, directories, symlinks, hard links, permission
// bits (recorded, not enforced) and modification times; an open File keeps
// working on its inode after its name is removed or replaced; O_EXCL is atomic;
// Rename supports RenameNoReplace and RenameExchange; paths resolve with the
// shared resolver (vfs.Resolve), so a symlink never leads outside the root;
// Sub pins a directory inode; Resolve returns canonical Resolved paths. Access
// times are not kept. Info.Size of a directory is its number of entries.
//
// # Design for speed
//
//   - One write connection, its statements prepared once, and a pool of WAL
//     reader connections (query_only) that read file data while writes go on.
//   - Every mutating call is one logical operation in one transaction: a
//     Mkdir, a Rename (with the removal of what it replaces), a Remove, one
//     Write or WriteAt (all of it or nothing), a Truncate. Operations in flight at
//     the same time share a commit (group commit): each executes inside the open
//     transaction under a savepoint of its own (so a failed one rolls back alone),
//     the last one in flight commits (or the one that finds the batch 256
//     operations or 5 ms old), and each returns once its batch is committed.
//   - File data is stored in rows of DefaultChunkSize (256 KiB) keyed by
//     inode<<24|index in one integer-keyed b-tree: a file up to the chunk size
//     is one row; a larger one streams through memory one chunk at a time (a 1
//     GiB file never needs 1 GiB of memory). A write replaces whole chunks it
//     covers and patches the others; holes are missing rows and read as zeros.
//   - Every inode's attributes and every directory entry live in memory too (the
//     dentry and attribute cache; Open loads them, about 200 bytes per entry):
//     lookups, Stat, Lstat, ReadDir, Readlink and Resolve never touch SQLite and
//     run at the memory backend's speed. The cache is write-through: a change is
//     written to SQLite first, in the operation's transaction, and applied to
//     memory under the same locks only if that succeeded. It is valid because the
//     file is held exclusively (see Open).
//   - Reads of data with no uncommitted change use a reader connection; a
//     handle keeps the last chunk it read, so small sequential reads cost one
//     query per chunk; and a shared LRU cache of chunks (DefaultDataCache, 32
//     MiB, see WithDataCache), filled by writes (write-through) and reads and
//     keyed by each file's data version, answers repeated reads of hot files
//     without SQLite.
//   - WAL mode, synchronous NORMAL by default (see WithSynchronous), temp store
//     in memory, chosen by measurement (TestTune, CPU time): 4 KiB pages (a fifth
//     cheaper per small file than 8 KiB, a third dearer per MiB of large files;
//     agent scratch is mostly small files), no mmap (no gain measured), a 32 MiB
//     page cache on the writer, 8 MiB on each reader.
//
// # Durability
//
//   - What a call acknowledged survives a crash of the process (kill -9, a
//     panic): a mutating call returns only after its transaction committed to the
//     WAL. The one exception is the creation of a new file by OpenFile, which
//     commits with the handle's first Write, Truncate, Sync or Close, with any
//     other operation, or within 5 ms, whichever comes first (so a file created
//     and written costs one commit, not two); a crash before that leaves no
//     file, never a torn one. After a crash the file opens to the state of the last commit: every
//     operation either wholly applied or not at all, never a torn write, never a
//     file that is neither its old nor its new content (one Write is atomic; a
//     whole-file replacement written to a temporary name and renamed, as
//     dir.Dir.WriteFile does, is atomic).
//   - Power loss or an OS crash: with SyncNormal (the default) the operations
//     committed after the last File.Sync or FS.Sync may be lost (whole operations,
//     in order); everything before it survives. With SyncFull every acknowledged
//     operation survives. SyncOff promises nothing past a process crash.
//   - File.Sync and FS.Sync commit what is pending and fdatasync the WAL: when
//     they return, everything committed so far (on every file) is on stable
//     storage.
//   - Close folds the WAL into the database file, so a closed scratch file is
//     complete on its own, ready to copy.
//   - Files unlinked while open when the process stops are reclaimed by the next
//     Open.
//
// # One writer
//
// Open takes an exclusive lock (flock) on the file for the life of the FS: a
// second Open, from any process, fails at once with ErrLocked instead of sharing
// a file whose in-memory cache would go stale. WithReadOnly opens without the
// lock, for inspection: it reads everything in one read transaction held until
// Close, so it sees the file as of its Open, consistently, even while a writer
// in another process goes on (whose WAL cannot be checkpointed past that point
// meanwhile). A file that is not a
// capfs scratch file is ErrForeign, one written by a newer capfs is
// ErrNewerSchema (older schemas are migrated forward, one transaction per
// version), a malformed one is ErrCorrupt, at Open or, for data pages, on the
// read that finds it (an io_error whose cause matches ErrCorrupt). Before
// reading any row, Open checks that the schema is capfs's own and holds
// nothing else: a table that is a view (a recursive one would never finish),
// a virtual table, a generated column, a trigger (which capfs's own writes
// would set off) or any other object is ErrSchema (wrapped in ErrCorrupt).
//
// # Snapshots
//
// FS.Snapshot writes a consistent point-in-time copy of the live file (VACUUM
// INTO, from a read transaction: writers go on), and Restore puts a snapshot in
// place of a closed scratch file, atomically (rename), with the old file's WAL
// folded in first so that nothing stale is replayed over the restored copy.
//
// # Interop
//
// OpenAgentFS serves an AgentFS database (Turso's agent filesystem, its SPEC's
// schema 0.4: fs_inode, fs_dentry, fs_data, fs_symlink, fs_config) as a
// read-only backend through the same read path, without copying it. It trusts
// nothing in the file first: its tables must be plain tables (ErrSchema
// otherwise), every file's chunks must hold exactly its declared size, and
// checking and loading must end within AgentFSOpenTimeout (ErrCorrupt
// otherwise). Import copies any backend (an AgentFS one included) into a
// scratch file, keeping hard links, modes and times, within a byte budget.
// Package sqlar exports a tree to a SQLite Archive and imports one.
//
// # Quotas
//
// WithQuota charges what the guest stores: file sizes (holes included), symlink
// targets, NodeCharge per inode and EntryCharge plus the name per entry. An
// operation that would pass it fails with quota_exceeded and changes nothing.
// WithMaxFileSize bounds one file. SQLite's own overhead (b-tree pages, free
// pages before a VACUUM, the WAL) is not charged.
//
// # Not guaranteed
//
// Access times; sharing one file between processes (ErrLocked by design); the
// metadata of a very large tree fitting in memory (it is all loaded); protection
// against another program writing the file behind capfs's back while it is
// open (the lock is advisory).
package sqlite
