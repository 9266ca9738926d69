package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Group commit bounds: a batch commits when no operation is in flight, or once it
// holds maxBatch operations or is maxBatchAge old, whichever comes first.
const (
	maxBatch    = 256
	maxBatchAge = 5 * time.Millisecond
)

// writer owns the one write connection and its prepared statements, and runs
// group commit: every mutating operation executes its statements inside the
// open transaction, within a savepoint of its own (so a failed operation rolls
// back alone), and the last operation in flight commits the batch; each then
// returns once its batch is committed.
type writer struct {
	maxAge time.Duration // a batch this old commits (maxBatchAge; tests raise it)
	db     *sql.DB
	conn   *sql.Conn
	wal    *os.File // the WAL file, for Sync's fdatasync

	mu       sync.Mutex // guards conn, inTx, cur, err
	inTx     bool
	cur      *batch
	err      error // a failed commit: every later operation fails with it
	inflight atomic.Int64
	timer    *time.Timer // commits a batch deferred operations left open

	execSeq   atomic.Uint64 // operations executed
	committed atomic.Uint64 // operations committed (execSeq at the last commit)
	commits   atomic.Uint64 // transactions committed

	insInode, insDentry, delDentry, setDentry, delInode, delChunks,
	setMtime, setSize, setNlink, setMode, putChunk, getChunk, rangeChunk,
	trimChunk, begin, commit, rollback, save, release, rollbackTo *sql.Stmt
}

// batch is one transaction of the group commit.
type batch struct {
	done  chan struct{}
	err   error
	ops   int
	start time.Time
}

func openWriter(abs string, cfg config) (*writer, error) {
	db, err := sql.Open("sqlite", dsn(abs, false, cfg.sync))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(context.Background())
	if err != nil {
		db.Close()
		return nil, classify(err)
	}
	w := &writer{db: db, conn: conn, maxAge: maxBatchAge}
	return w, nil
}

// prepare prepares the statements; it runs after the schema exists.
func (w *writer) prepare() error {
	ctx := context.Background()
	for _, s := range []struct {
		p   **sql.Stmt
		sql string
	}{
		{&w.insInode, `INSERT INTO inode(ino, mode, nlink, size, mtime, mtime_ns, target) VALUES(?, ?, ?, ?, ?, ?, ?)`},
		{&w.insDentry, `INSERT INTO dentry(parent, name, ino) VALUES(?, ?, ?)`},
		{&w.delDentry, `DELETE FROM dentry WHERE parent = ? AND name = ?`},
		{&w.setDentry, `UPDATE dentry SET ino = ? WHERE parent = ? AND name = ?`},
		{&w.delInode, `DELETE FROM inode WHERE ino = ?`},
		{&w.delChunks, `DELETE FROM chunk WHERE id BETWEEN ? AND ?`},
		{&w.setMtime, `UPDATE inode SET mtime = ?, mtime_ns = ? WHERE ino = ?`},
		{&w.setSize, `UPDATE inode SET size = ?, mtime = ?, mtime_ns = ? WHERE ino = ?`},
		{&w.setNlink, `UPDATE inode SET nlink = ? WHERE ino = ?`},
		{&w.setMode, `UPDATE inode SET mode = ? WHERE ino = ?`},
		{&w.putChunk, `INSERT OR REPLACE INTO chunk(id, data) VALUES(?, ?)`},
		{&w.getChunk, `SELECT data FROM chunk WHERE id = ?`},
		{&w.rangeChunk, `SELECT id, data FROM chunk WHERE id BETWEEN ? AND ? ORDER BY id`},
		{&w.trimChunk, `UPDATE chunk SET data = substr(data, 1, ?) WHERE id = ? AND length(data) > ?`},
		{&w.begin, `BEGIN`},
		{&w.commit, `COMMIT`},
		{&w.rollback, `ROLLBACK`},
		{&w.save, `SAVEPOINT op`},
		{&w.release, `RELEASE op`},
		{&w.rollbackTo, `ROLLBACK TO op`},
	} {
		st, err := w.conn.PrepareContext(ctx, s.sql)
		if err != nil {
			return classify(err)
		}
		*s.p = st
	}
	return nil
}

// x executes a prepared statement.
func (w *writer) x(s *sql.Stmt, args ...any) error {
	_, err := s.Exec(args...)
	return err
}

// enter counts an operation in flight; every enter is matched by one leave.
func (w *writer) enter() { w.inflight.Add(1) }

// exec runs fn's statements as one operation of the current batch (opening one
// if none is open), atomically: if fn fails, its statements are rolled back and
// the batch goes on without them. It returns the batch to wait on.
func (w *writer) exec(fn func() error) (*batch, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return nil, w.err
	}
	if !w.inTx {
		if err := w.x(w.begin); err != nil {
			return nil, err
		}
		w.inTx = true
		w.cur = &batch{done: make(chan struct{}), start: time.Now()}
	}
	if err := w.x(w.save); err != nil {
		return nil, err
	}
	if err := fn(); err != nil {
		if rerr := w.x(w.rollbackTo); rerr != nil {
			w.failLocked(rerr)
		}
		w.x(w.release)
		return nil, err
	}
	if err := w.x(w.release); err != nil {
		w.failLocked(err)
		return nil, err
	}
	w.cur.ops++
	w.execSeq.Add(1)
	return w.cur, nil
}

// leave ends an operation begun with enter: the last one in flight (or one that
// finds the batch full or old) commits. It then waits for b, the batch its
// statements went into (nil if it executed none), and returns its outcome.
func (w *writer) leave(b *batch) error {
	w.mu.Lock()
	left := w.inflight.Add(-1)
	if w.inTx && (left == 0 || w.cur.ops >= maxBatch || time.Since(w.cur.start) >= w.maxAge) {
		w.commitLocked()
	}
	w.mu.Unlock()
	if b == nil {
		return nil
	}
	<-b.done
	return b.err
}

// leaveDeferred is leave for an operation that need not be durable when it
// returns (a file's creation by OpenFile): it does not wait for b, and when it
// is the last in flight it leaves the batch open for the handle's first Write
// or its Close to commit (see waitFor), arming a timer that commits it after
// maxBatchAge if nothing else does.
func (w *writer) leaveDeferred(b *batch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	left := w.inflight.Add(-1)
	if !w.inTx {
		return
	}
	if left == 0 && w.cur.ops < maxBatch && time.Since(w.cur.start) < w.maxAge {
		if w.timer == nil {
			w.timer = time.AfterFunc(w.maxAge, w.timeout)
		} else {
			w.timer.Reset(w.maxAge)
		}
		return
	}
	if left == 0 || w.cur.ops >= maxBatch || time.Since(w.cur.start) >= w.maxAge {
		w.commitLocked()
	}
}

// timeout commits a batch that deferred operations left open.
func (w *writer) timeout() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inTx && w.inflight.Load() == 0 {
		w.commitLocked()
	}
}

// waitFor commits b if it is still open and no operation is in flight (one
// in flight will commit it), and waits for it.
func (w *writer) waitFor(b *batch) error {
	if b == nil {
		return nil
	}
	w.mu.Lock()
	if w.cur == b && w.inflight.Load() == 0 {
		w.commitLocked()
	}
	w.mu.Unlock()
	<-b.done
	return b.err
}

// commitLocked commits the open batch. A failed commit rolls it back and fails
// the writer: the in-memory tree already holds the batch's changes. The caller
// holds mu.
func (w *writer) commitLocked() {
	b := w.cur
	err := w.x(w.commit)
	w.inTx, w.cur = false, nil
	if err != nil {
		w.x(w.rollback)
		w.failLocked(err)
		b.err = w.err
	} else {
		w.committed.Store(w.execSeq.Load())
		w.commits.Add(1)
	}
	close(b.done)
}

func (w *writer) failLocked(err error) {
	if w.err == nil {
		w.err = errors.Join(errFailed, classify(err))
	}
}

var errFailed = errors.New("a commit failed; reopen the file")

// flush commits the open batch now and, if durable, syncs the WAL to stable
// storage, so everything committed survives a power loss whatever the
// synchronous setting.
func (w *writer) flush(durable bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inTx {
		b := w.cur
		w.commitLocked()
		if b.err != nil {
			return b.err
		}
	}
	if w.err != nil {
		return w.err
	}
	if durable && w.wal != nil {
		// Every committed transaction is in the WAL or, checkpointed, in the
		// database file, which the checkpoint synced: one fdatasync of the WAL
		// makes all of them durable.
		if err := datasync(w.wal); err != nil {
			return err
		}
	}
	return nil
}

// readRange reads chunk rows through the write connection, which sees the open
// batch's uncommitted rows.
func (w *writer) readRange(lo, hi int64, fn func(id int64, data []byte)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return scanChunks(w.rangeChunk, lo, hi, fn)
}

func scanChunks(s *sql.Stmt, lo, hi int64, fn func(id int64, data []byte)) error {
	rows, err := s.Query(lo, hi)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var data sql.RawBytes
		if err := rows.Scan(&id, &data); err != nil {
			return err
		}
		fn(id, data)
	}
	return rows.Err()
}

func (w *writer) close() error {
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.inTx {
		w.commitLocked()
	}
	err := w.err
	if err == nil {
		// Fold the WAL into the file, so the file alone is the whole tree
		// (copyable, and what a snapshot or another tool sees). A reader in
		// another process (a read-only view) may hold part of the WAL: then
		// it stays, as valid as ever, for the next open to fold in.
		ctx := context.Background()
		w.conn.ExecContext(ctx, `PRAGMA busy_timeout=100`)
		var busy, logged, done int64
		if cerr := w.conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logged, &done); cerr != nil && !errors.Is(classify(cerr), ErrLocked) {
			err = classify(cerr)
		}
	}
	w.mu.Unlock()
	if w.wal != nil {
		w.wal.Close()
	}
	if cerr := w.conn.Close(); err == nil {
		err = cerr
	}
	if cerr := w.db.Close(); err == nil {
		err = cerr
	}
	return err
}
