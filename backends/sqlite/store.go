package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/capfs/capfs/backends/sqlite/internal/sqlschema"
	"github.com/capfs/capfs/vfs"
)

// ApplicationID is the value of PRAGMA application_id in every capfs scratch
// file ("CAPF" in ASCII): a file with another application id is not ours.
const ApplicationID = 0x43415046

// SchemaVersion is the schema this package writes (PRAGMA user_version). Open
// migrates an older file forward and refuses a newer one with ErrNewerSchema.
const SchemaVersion = 1

// DefaultChunkSize is the size of the rows a file's data is stored in. A file up
// to this size is one row; a larger one is a run of rows of this size, so a file of
// any size streams through memory one chunk at a time.
const DefaultChunkSize = 256 << 10

// chunkBits is how many low bits of a chunk row's key hold the chunk index: the
// key is ino<<chunkBits | index, so a file's chunks are one contiguous key range
// of one b-tree (files up to 2^24 chunks, 4 TiB at the default chunk size).
const chunkBits = 24

// Errors Open returns, matched with errors.Is. They never carry the file's path
// beyond what the caller passed.
var (
	// ErrForeign: the file exists but is not a capfs scratch file (not SQLite at
	// all, or a SQLite database of another application).
	ErrForeign = errors.New("not a capfs scratch file")
	// ErrNewerSchema: the file was written by a newer capfs whose schema this
	// version does not know.
	ErrNewerSchema = errors.New("capfs scratch file has a newer schema")
	// ErrCorrupt: SQLite reported a malformed database (a corrupt page, a
	// truncated file) or the tables break capfs's invariants.
	ErrCorrupt = errors.New("capfs scratch file is corrupt")
	// ErrLocked: another process (or another FS in this one) has the file open.
	ErrLocked = errors.New("capfs scratch file is in use by another process")
)

// errWouldBlock: the lock file is locked by another holder (lockExclusive).
var errWouldBlock = errors.New("lock held elsewhere")

// Synchronous is the durability level of a commit (SQLite's PRAGMA synchronous,
// in WAL mode).
type Synchronous int

const (
	// SyncNormal (the default): a committed operation survives a crash of the
	// process; after a power loss or OS crash the last operations before it may
	// be lost (never torn), except those a File.Sync or FS.Sync covered.
	SyncNormal Synchronous = iota
	// SyncFull: every committed operation survives a power loss too (one
	// fdatasync of the WAL per group commit).
	SyncFull
	// SyncOff: no fdatasync at all, even for Sync; survives a process crash,
	// not a power loss. For throwaway scratch.
	SyncOff
)

func (s Synchronous) pragma() string {
	switch s {
	case SyncFull:
		return "FULL"
	case SyncOff:
		return "OFF"
	}
	return "NORMAL"
}

// Option configures Open.
type Option func(*config)

type config struct {
	quota     int64
	maxFile   int64
	sync      Synchronous
	clock     func() time.Time
	readOnly  bool
	chunkSize int64
	readers   int
	dataCache int64
}

// WithQuota limits what the file holds, as the guest sees it, to bytes: the
// sum of regular files' sizes (sparse regions included), symlink targets, and
// NodeCharge per inode and EntryCharge plus the name's length per directory
// entry. Operations that would exceed it fail with quota_exceeded and change
// nothing. bytes <= 0 means no limit.
func WithQuota(bytes int64) Option { return func(c *config) { c.quota = max(bytes, 0) } }

// WithMaxFileSize limits a single file's size; growing past it fails with
// file_too_large. bytes <= 0 means the format's limit only.
func WithMaxFileSize(bytes int64) Option { return func(c *config) { c.maxFile = max(bytes, 0) } }

// WithSynchronous sets the durability level (SyncNormal by default).
func WithSynchronous(s Synchronous) Option { return func(c *config) { c.sync = s } }

// WithClock sets the clock for modification times (time.Now by default).
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.clock = now
		}
	}
}

// WithReadOnly opens the file read-only: every mutation fails with read_only,
// and the file is not created, migrated or locked for writing (a writer in
// another process may still hold it; see Open).
func WithReadOnly() Option { return func(c *config) { c.readOnly = true } }

// WithChunkSize sets the chunk size of a file Open creates (64 KiB to 4 MiB;
// DefaultChunkSize otherwise). An existing file keeps the size it was created
// with.
func WithChunkSize(n int) Option {
	return func(c *config) {
		if n >= 64<<10 && n <= 4<<20 {
			c.chunkSize = int64(n)
		}
	}
}

// Quota charges besides file data and symlink targets (see WithQuota).
const (
	NodeCharge  = 128
	EntryCharge = 64
)

// store is what an FS and every FS its Sub returns share.
//
// Locking: mu guards the tree (every directory's children, parent, name, gone).
// Each node's mu guards its metadata and serializes its data writes. writer.mu
// guards the write connection. The order is store.mu, node.mu, writer.mu.
type store struct {
	mu    sync.RWMutex
	root  *node
	cfg   config
	chunk int64

	w       *writer // nil when read-only
	rdb     *sql.DB
	q       queryer    // rdb, or for a read-only store the transaction pinning its snapshot
	snap    *sql.Tx    // that transaction (nil when writable)
	rdChunk *sql.Stmt  // id, data of a key range, on the reader pool
	cache   *dataCache // nil when off

	nextIno atomic.Int64
	used    atomic.Int64

	path   string   // absolute host path of the file
	lock   *os.File // flock held for the life of the store (nil when read-only)
	closed atomic.Bool
	// failed is set when a commit failed after its changes reached the
	// in-memory tree: the tree is then ahead of the file, and every later call
	// fails with io_error until the file is reopened.
	failed atomic.Bool
}

func (s *store) now() time.Time { return s.cfg.clock().Round(0) }

// Open opens (creating if missing) the capfs scratch file name and returns its
// root. The file is held exclusively by this FS until Close: a second Open of
// the same file, from this process or another, fails with ErrLocked. A file that
// is not a capfs scratch file fails with ErrForeign, one from a newer capfs with
// ErrNewerSchema, a malformed one with ErrCorrupt.
//
// Open reads every inode's metadata and every directory entry into memory (about
// 200 bytes per entry) so that lookups, Stat and ReadDir never touch SQLite;
// file data stays in the file.
func Open(name string, opts ...Option) (*FS, error) {
	cfg := config{clock: time.Now, chunkSize: DefaultChunkSize, readers: 4, dataCache: DefaultDataCache}
	for _, o := range opts {
		o(&cfg)
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	if err := checkHeader(abs, cfg.readOnly); err != nil {
		return nil, err
	}
	st := &store{cfg: cfg, path: abs, cache: newDataCache(cfg.dataCache)}
	ok := false
	defer func() {
		if !ok {
			st.closeAll()
		}
	}()
	if !cfg.readOnly {
		if err := st.openWritable(); err != nil {
			return nil, err
		}
	}
	if err := st.openReaders(); err != nil {
		return nil, err
	}
	if err := st.load(); err != nil {
		return nil, err
	}
	ok = true
	return &FS{st: st, root: st.root, origin: st.root}, nil
}

// openWritable locks the file (ErrLocked when another FS holds it), opens
// the write connection, creates or checks the schema and opens the WAL.
func (s *store) openWritable() error {
	abs, cfg := s.path, s.cfg
	lf, err := lockScratch(abs)
	if err != nil {
		return err
	}
	s.lock = lf
	w, err := openWriter(abs, cfg)
	if err != nil {
		return err
	}
	s.w = w
	if err := s.initSchema(); err != nil {
		return err
	}
	if err := w.prepare(); err != nil {
		return err
	}
	if w.wal, err = os.OpenFile(abs+"-wal", os.O_RDONLY|os.O_CREATE, 0o600); err != nil {
		return fmt.Errorf("sqlite: open the WAL: %w", pathFree(err))
	}
	return nil
}

// lockScratch opens (creating) the file abs and locks it exclusively,
// without waiting: ErrLocked when another FS holds it.
func lockScratch(abs string) (*os.File, error) {
	lf, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", pathFree(err))
	}
	if err := lockExclusive(lf); err != nil {
		lf.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("sqlite: lock: %w", err)
	}
	return lf, nil
}

// openReaders opens the reader pool (for a read-only store, pinned to one
// snapshot whose schema it checks), reads the chunk size and prepares the
// chunk query.
func (s *store) openReaders() error {
	cfg := s.cfg
	rdb, err := sql.Open("sqlite", dsn(s.path, true, cfg.sync))
	if err != nil {
		return err
	}
	rdb.SetMaxOpenConns(cfg.readers)
	rdb.SetMaxIdleConns(cfg.readers)
	s.rdb, s.q = rdb, rdb
	if cfg.readOnly {
		if err := s.pinSnapshot(); err != nil {
			return err
		}
		if err := checkSchema(s.q); err != nil {
			return err
		}
		if err := checkTables(context.Background(), s.snap, scratchTablesAt(schemaVersion), sqlschema.Exclusive); err != nil {
			return err
		}
	}
	if err := s.readChunkSize(); err != nil {
		return err
	}
	if s.rdChunk, err = s.q.Prepare(`SELECT id, data FROM chunk WHERE id BETWEEN ? AND ? ORDER BY id`); err != nil {
		return classify(err)
	}
	return nil
}

// dsn is the driver's name for file abs: a file: URI, so no character of the
// path is taken for a parameter.
func dsn(abs string, reader bool, s Synchronous) string {
	u := url.URL{Scheme: "file", Path: abs}
	q := "?_pragma=busy_timeout(10000)&_pragma=synchronous(" + s.pragma() + ")"
	if reader {
		q += "&_pragma=query_only(1)&_pragma=cache_size(-8000)"
	} else {
		q += "&_pragma=cache_size(-32000)&_pragma=temp_store(MEMORY)&_pragma=journal_size_limit(67108864)" + writerPragmas
	}
	return u.String() + q
}

// checkHeader refuses, before SQLite sees it, a non-empty file that is not a
// SQLite database at all.
func checkHeader(abs string, readOnly bool) error {
	f, err := os.Open(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !readOnly {
			return nil
		}
		return fmt.Errorf("sqlite: open: %w", pathFree(err))
	}
	defer f.Close()
	var hdr [16]byte
	n, err := io.ReadFull(f, hdr[:])
	if n == 0 && !readOnly {
		return nil // empty: a new file
	}
	if err != nil || string(hdr[:]) != "SQLite format 3\x00" {
		return ErrForeign
	}
	return nil
}

// pathFree keeps only the errno or sentinel of a host error.
func pathFree(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	for _, s := range []error{fs.ErrNotExist, fs.ErrPermission, fs.ErrExist} {
		if errors.Is(err, s) {
			return s
		}
	}
	return errors.New("i/o error")
}

// classify maps SQLite's errors to the typed ones.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if se, ok := errors.AsType[*sqlite.Error](err); ok {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return fmt.Errorf("%w: %s", ErrCorrupt, sqliteCode(se.Code()))
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return ErrLocked
		}
		return fmt.Errorf("sqlite: %s", sqliteCode(se.Code()))
	}
	return err
}

func sqliteCode(code int) string {
	if s, ok := sqlite.ErrorCodeString[code]; ok {
		return s
	}
	return "SQLite error " + strconv.Itoa(code)
}

const schemaV1 = `
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS inode(
	ino   INTEGER PRIMARY KEY,
	mode  INTEGER NOT NULL,  -- POSIX st_mode: type and permission bits
	nlink INTEGER NOT NULL,  -- names of a file or symlink (0: open but unlinked)
	size  INTEGER NOT NULL,  -- bytes of a file, target length of a symlink
	mtime INTEGER NOT NULL,  -- seconds since the epoch
	mtime_ns INTEGER NOT NULL,
	target TEXT              -- symlink target
);
CREATE TABLE IF NOT EXISTS dentry(
	parent INTEGER NOT NULL,
	name   TEXT NOT NULL,
	ino    INTEGER NOT NULL,
	PRIMARY KEY(parent, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS chunk(
	id   INTEGER PRIMARY KEY, -- ino<<24 | chunk index
	data BLOB NOT NULL        -- at most chunk_size bytes; missing or short rows read as zeros
);
`

// scratchTables are the tables of schemaV1 and the columns capfs reads. A
// scratch file holds nothing else (sqlschema.Exclusive): no view, trigger or
// index of anyone else's, which capfs's own writes could set off. A
// migration that adds an object adds it here.
var scratchTables = []sqlschema.Table{
	{Name: "meta", Columns: []string{"key", "value"}},
	{Name: "inode", Columns: []string{"ino", "mode", "nlink", "size", "mtime", "mtime_ns", "target"}},
	{Name: "dentry", Columns: []string{"parent", "name", "ino"}},
	{Name: "chunk", Columns: []string{"id", "data"}},
}

// scratchTablesAt is scratchTables for a file of schema version ver: at
// version 1 each table's recorded SQL must be schemaV1's own, so that no
// CHECK constraint or default of anyone else's runs on capfs's writes. (A
// migration that changes a table gives its version's SQL here.)
func scratchTablesAt(ver int64) []sqlschema.Table {
	if ver != 1 {
		return scratchTables
	}
	stmts := createStatements(schemaV1)
	out := slices.Clone(scratchTables)
	for i := range out {
		out[i].SQL = stmts[out[i].Name]
	}
	return out
}

// createStatements maps each table of schema (CREATE TABLE IF NOT EXISTS
// statements) to the SQL SQLite records for it.
func createStatements(schema string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(schema, "CREATE TABLE IF NOT EXISTS ")[1:] {
		stmt := strings.TrimRight(strings.TrimSpace(part), ";")
		name, _, _ := strings.Cut(stmt, "(")
		out[name] = "CREATE TABLE " + stmt
	}
	return out
}

// initSchema creates the tables of a new file, migrates an old one, and
// refuses a foreign or newer one. It runs on the write connection.
func (s *store) initSchema() error {
	c := s.w.conn
	ctx := context.Background()
	var appID, ver int64
	if err := c.QueryRowContext(ctx, `PRAGMA application_id`).Scan(&appID); err != nil {
		return classify(err)
	}
	if err := c.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&ver); err != nil {
		return classify(err)
	}
	var tables int64
	if err := c.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&tables); err != nil {
		return classify(err)
	}
	switch {
	case appID == 0 && tables == 0:
		// New file.
		stmts := `PRAGMA page_size=` + strconv.Itoa(newPageSize) + `; PRAGMA journal_mode=WAL; PRAGMA application_id=` + strconv.Itoa(ApplicationID) + `;
BEGIN;` + schemaV1 + `
INSERT INTO meta VALUES('chunk_size', ` + strconv.FormatInt(s.cfg.chunkSize, 10) + `);
INSERT INTO inode VALUES(1, ` + strconv.Itoa(0o040755) + `, 2, 0, ` + strconv.FormatInt(s.now().Unix(), 10) + `, ` + strconv.Itoa(s.now().Nanosecond()) + `, NULL);
PRAGMA user_version=1;
COMMIT;`
		if _, err := c.ExecContext(ctx, stmts); err != nil {
			return classify(err)
		}
		ver = 1
	case appID != ApplicationID:
		return ErrForeign
	case ver > schemaVersion:
		return fmt.Errorf("%w: version %d, this capfs knows up to %d", ErrNewerSchema, ver, schemaVersion)
	case ver < 1:
		return fmt.Errorf("%w: schema version %d", ErrCorrupt, ver)
	}
	if err := checkTables(ctx, c, scratchTablesAt(ver), sqlschema.Exclusive); err != nil {
		return err
	}
	// Forward migrations, one version at a time, each in one transaction
	// (migrations[v] takes v to v+1).
	for v := ver; v < schemaVersion; v++ {
		if _, err := c.ExecContext(ctx, "BEGIN;"+migrations[v]+"PRAGMA user_version="+strconv.FormatInt(v+1, 10)+";COMMIT;"); err != nil {
			return classify(err)
		}
	}
	if _, err := c.ExecContext(ctx, `PRAGMA journal_mode=WAL`); err != nil {
		return classify(err)
	}
	return nil
}

// newPageSize is the page size of a new file. TestTune measured 4 KiB at a
// fifth less CPU per small file than 8 KiB (220 against 272 µs per file created,
// read, renamed and removed) and a third more per MiB of large files (9.8
// against 7.2 ms); agent scratch is mostly small files (bench/RESULTS.md).
var newPageSize = 4096

// writerPragmas are extra pragmas of the write connection (tune_test.go).
var writerPragmas = ""

// migrations[v] is the SQL taking schema version v to v+1. A new file is
// created at version 1 and migrated forward like any other, so every
// migration runs on every path.
var migrations = map[int64]string{}

// schemaVersion is SchemaVersion; a variable so that the tests can add a
// migration.
var schemaVersion int64 = SchemaVersion

// queryer is what reading needs of a *sql.DB or a *sql.Tx.
type queryer interface {
	Query(query string, args ...any) (*sql.Rows, error)
	QueryRow(query string, args ...any) *sql.Row
	Prepare(query string) (*sql.Stmt, error)
}

// pinSnapshot opens the read transaction a read-only store reads everything
// through, on one connection: metadata and data then come from one point in
// time however a writer elsewhere changes the file (whose WAL cannot be
// checkpointed past that point meanwhile).
func (s *store) pinSnapshot() error {
	s.rdb.SetMaxOpenConns(1)
	tx, err := s.rdb.BeginTx(context.Background(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return classify(err)
	}
	var n int64
	if err := tx.QueryRow(`SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
		tx.Rollback()
		return classify(err)
	}
	s.snap, s.q = tx, tx
	return nil
}

// checkSchema is initSchema's refusals for a read-only open.
func checkSchema(db queryer) error {
	var appID, ver int64
	if err := db.QueryRow(`PRAGMA application_id`).Scan(&appID); err != nil {
		return classify(err)
	}
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&ver); err != nil {
		return classify(err)
	}
	switch {
	case appID != ApplicationID:
		return ErrForeign
	case ver > schemaVersion:
		return fmt.Errorf("%w: version %d, this capfs knows up to %d", ErrNewerSchema, ver, schemaVersion)
	case ver < schemaVersion:
		return fmt.Errorf("sqlite: schema version %d needs a migration: open the file read-write once", ver)
	}
	return nil
}

func (s *store) readChunkSize() error {
	var cs int64
	if err := s.q.QueryRow(`SELECT value FROM meta WHERE key='chunk_size'`).Scan(&cs); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: no chunk size", ErrCorrupt)
		}
		return classify(err)
	}
	if cs < 4096 || cs > 64<<20 {
		return fmt.Errorf("%w: chunk size %d", ErrCorrupt, cs)
	}
	s.chunk = cs
	return nil
}

// closeAll releases the connections and the lock, the lock last (it guards the
// file while SQLite may still write to it).
func (s *store) closeAll() error {
	var first error
	keep := func(err error) {
		if first == nil && err != nil {
			first = err
		}
	}
	if s.rdChunk != nil {
		keep(s.rdChunk.Close())
	}
	if s.snap != nil {
		s.snap.Rollback()
	}
	if s.rdb != nil {
		keep(s.rdb.Close())
	}
	if s.w != nil {
		keep(s.w.close())
	}
	if s.lock != nil {
		keep(s.lock.Close())
	}
	return first
}

// storageError is the vfs error for a failed SQLite call during op on p.
func storageError(op string, p vfs.Path, err error) error {
	if ve, ok := errors.AsType[*vfs.Error](err); ok {
		return vfs.Readdress(ve, op, p.String(), "")
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
	}
	err = classify(err)
	code := vfs.CodeIO
	if se, ok := errors.AsType[*sqlite.Error](err); ok && se.Code()&0xff == sqlite3.SQLITE_FULL {
		code = vfs.CodeQuota
	}
	return &vfs.Error{Code: code, Op: op, Path: p.String(), Err: err}
}
