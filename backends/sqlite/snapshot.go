package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
)

// Snapshot writes a consistent point-in-time copy of the scratch file to dst
// (which must not exist): everything acknowledged before the call, nothing
// half-done. It runs VACUUM INTO in one read transaction on a connection of its
// own, so writers go on meanwhile; the copy is compact, written beside dst,
// synced and renamed into place, so dst is either absent or complete. A snapshot
// is itself a capfs scratch file: Open it, or Restore it over the original.
func (f *FS) Snapshot(ctx context.Context, dst string) error {
	st := f.st
	if st.closed.Load() {
		return errors.New("sqlite: snapshot: the scratch file is closed")
	}
	if st.w != nil {
		if err := st.w.flush(false); err != nil {
			return fmt.Errorf("sqlite: snapshot: %w", err)
		}
	}
	abs, err := filepath.Abs(dst)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(abs); err == nil {
		return fmt.Errorf("sqlite: snapshot: %w", os.ErrExist)
	}
	tmp := abs + ".tmp-snapshot"
	os.Remove(tmp)
	db, err := sql.Open("sqlite", dsn(st.path, false, st.cfg.sync))
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("sqlite: snapshot: %w", classify(err))
	}
	if err := syncFile(tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, abs); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("sqlite: snapshot: %w", pathFree(err))
	}
	return syncDir(filepath.Dir(abs))
}

// Restore replaces the scratch file dst with the snapshot snap, atomically: after
// a crash dst is either the old file or the snapshot. dst must not be open (it
// fails with ErrLocked if an FS holds it); snap must be a capfs scratch file
// (ErrForeign, ErrNewerSchema and ErrCorrupt otherwise: it is checked with
// PRAGMA quick_check first). The old file's WAL is folded into it before the
// swap, so no stale WAL is ever replayed over the restored copy. snap itself is
// left as it is.
func Restore(snap, dst string) error {
	if err := checkSnapshot(snap); err != nil {
		return err
	}
	abs, err := filepath.Abs(dst)
	if err != nil {
		return err
	}
	lf, err := lockForRestore(abs)
	if err != nil {
		return err
	}
	if lf != nil {
		defer lf.Close()
	}
	tmp := abs + ".tmp-restore"
	if err := copyFile(snap, tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, abs); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("sqlite: restore: %w", pathFree(err))
	}
	os.Remove(abs + "-wal")
	os.Remove(abs + "-shm")
	return syncDir(filepath.Dir(abs))
}

// checkSnapshot checks that snap is a capfs scratch file of a schema this
// capfs reads, and passes PRAGMA quick_check.
func checkSnapshot(snap string) error {
	if err := checkHeader(snap, true); err != nil {
		return err
	}
	sabs, err := filepath.Abs(snap)
	if err != nil {
		return err
	}
	sdb, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: sabs}).String()+"?mode=ro")
	if err != nil {
		return err
	}
	defer sdb.Close()
	if err := checkSchema(sdb); err != nil {
		return err
	}
	var qc string
	if err := sdb.QueryRow(`PRAGMA quick_check`).Scan(&qc); err != nil {
		return classify(err)
	}
	if qc != "ok" {
		return fmt.Errorf("%w: quick_check: %s", ErrCorrupt, qc)
	}
	return nil
}

// lockForRestore locks the existing file abs (ErrLocked when an FS holds
// it) and folds its WAL into it, and returns it open, to hold the lock
// across the swap; nil when there is no file.
func lockForRestore(abs string) (*os.File, error) {
	lf, err := os.OpenFile(abs, os.O_RDWR, 0)
	if err != nil {
		return nil, nil
	}
	if err := lockExclusive(lf); err != nil {
		lf.Close()
		return nil, ErrLocked
	}
	if _, err := os.Stat(abs + "-wal"); err != nil {
		return lf, nil
	}
	db, err := sql.Open("sqlite", dsn(abs, false, SyncFull))
	if err != nil {
		lf.Close()
		return nil, err
	}
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	db.Close()
	if err != nil {
		lf.Close()
		return nil, fmt.Errorf("sqlite: restore: folding the old WAL: %w", classify(err))
	}
	return lf, nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("sqlite: %w", pathFree(err))
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		return fmt.Errorf("sqlite: %w", pathFree(err))
	}
	return syncFile(to)
}

func syncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("sqlite: %w", pathFree(err))
	}
	defer f.Close()
	if err := datasync(f); err != nil {
		return fmt.Errorf("sqlite: sync: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer d.Close()
	d.Sync()
	return nil
}
