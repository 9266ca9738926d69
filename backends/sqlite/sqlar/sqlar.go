// Package sqlar exports a directory tree to a SQLite Archive (the sqlar format
// of the sqlite3 shell's -A command: one table, one row per entry) and imports
// one into a dir.Dir (any [Target]).
//
// # Format
//
// Table sqlar(name TEXT PRIMARY KEY, mode INT, mtime INT, sz INT, data BLOB):
// name is the slash-separated path, mode the POSIX st_mode (type and permission
// bits), mtime Unix seconds. A regular file's row holds sz (its size) and data,
// compressed with zlib when that makes it smaller (then length(data) < sz),
// else stored as is. A directory has sz 0 and no data. A symlink has sz -1 and
// its target text as data: the convention of SQLite's fileio extension, which
// capfs writes and reads, but which `sqlite3 -Ax` does not extract (3.40
// prints "SQL error: error in uncompress()" for such a row and creates no
// link). Export therefore takes a SymlinkMode: SymlinkRows (faithful; capfs's
// Import restores the links) or SkipSymlinks, for an archive meant for
// `sqlite3 -Ax`, which leaves them out and counts them in Stats.
//
// # Guarantees
//
//   - Export writes the archive beside its destination and renames it into
//     place once complete: the destination is absent or a whole archive.
//   - Import plans before it acts: every name is parsed (vfs.ParseGuest) and
//     every row checked (type, size, sz against data) before anything is
//     written; an archive with a name that climbs out, an absolute name, a
//     duplicate, an unknown type or a malformed row changes nothing. It then
//     writes through the Dir, so the Dir's policy, quotas and symlink rules
//     (escaping targets refused) apply to every entry. A compressed row is
//     inflated with a bound (its sz): a zip bomb gets no further than sz bytes.
//   - The archive is checked before any row is read: sqlar must be a plain
//     table (a view, recursive or not, a virtual table, a generated column or
//     a trigger on it is refused), and its files may add up to MaxTotalSize.
//
// # Not guaranteed
//
// sqlar holds a file in one row: Export and Import hold each file (once
// compressed and once not) in memory. Hard links become separate files; owners,
// access times and sub-second times are not kept.
package sqlar

import (
	"bytes"
	"compress/zlib"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"

	_ "modernc.org/sqlite" // the driver

	"github.com/capfs/capfs/backends/sqlite/internal/sqlschema"
	"github.com/capfs/capfs/vfs"
)

// SymlinkMode says how Export stores symlinks.
type SymlinkMode int

const (
	// SymlinkRows stores a symlink as a row with sz -1 and its target as data.
	SymlinkRows SymlinkMode = iota
	// SkipSymlinks leaves symlinks out (counted in Stats.SkippedSymlinks), so
	// that `sqlite3 -Ax` extracts the archive.
	SkipSymlinks
)

// Stats counts what Export or Import handled.
type Stats struct {
	Files, Dirs, Symlinks, SkippedSymlinks, Skipped int
	Bytes                                           int64 // file bytes, uncompressed
}

const (
	sIFMT  = 0o170000
	sIFDIR = 0o040000
	sIFREG = 0o100000
	sIFLNK = 0o120000
)

const schema = `CREATE TABLE sqlar(name TEXT PRIMARY KEY, mode INT, mtime INT, sz INT, data BLOB)`

// Export writes the tree of fsys (a Dir's FS view, or any fs.FS; symlinks are
// read with fs.ReadLink where fsys supports it) to a new archive at archive,
// which must not exist. Special files are skipped and counted.
func Export(ctx context.Context, fsys fs.FS, archive string, links SymlinkMode) (Stats, error) {
	var st Stats
	abs, err := filepath.Abs(archive)
	if err != nil {
		return st, err
	}
	if _, err := os.Lstat(abs); err == nil {
		return st, fmt.Errorf("sqlar: %s: %w", archive, fs.ErrExist)
	}
	tmp := abs + ".tmp-sqlar"
	os.Remove(tmp)
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: tmp}).String())
	if err != nil {
		return st, err
	}
	ok := false
	defer func() {
		db.Close()
		if !ok {
			os.Remove(tmp)
		}
	}()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return st, err
	}
	defer tx.Rollback()
	if _, err := tx.Exec(schema); err != nil {
		return st, err
	}
	ins, err := tx.Prepare(`INSERT INTO sqlar(name, mode, mtime, sz, data) VALUES(?, ?, ?, ?, ?)`)
	if err != nil {
		return st, err
	}
	var zbuf bytes.Buffer
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := int64(vfs.UnixMode(info.Mode()))
		mt := info.ModTime().Unix()
		switch t := info.Mode().Type(); {
		case t == fs.ModeDir:
			st.Dirs++
			_, err = ins.Exec(p, mode, mt, 0, nil)
		case t == fs.ModeSymlink:
			if links == SkipSymlinks {
				st.SkippedSymlinks++
				return nil
			}
			target, rerr := fs.ReadLink(fsys, p)
			if rerr != nil {
				return rerr
			}
			st.Symlinks++
			_, err = ins.Exec(p, mode, mt, -1, []byte(target))
		case t == 0:
			data, rerr := fs.ReadFile(fsys, p)
			if rerr != nil {
				return rerr
			}
			blob := data
			zbuf.Reset()
			zw := zlib.NewWriter(&zbuf)
			zw.Write(data)
			zw.Close()
			if zbuf.Len() < len(data) {
				blob = zbuf.Bytes()
			}
			st.Files++
			st.Bytes += int64(len(data))
			_, err = ins.Exec(p, mode, mt, len(data), blob)
		default:
			st.Skipped++
		}
		return err
	})
	if err != nil {
		return st, fmt.Errorf("sqlar: export: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return st, err
	}
	if err := db.Close(); err != nil {
		return st, err
	}
	if err := os.Rename(tmp, abs); err != nil {
		return st, err
	}
	ok = true
	return st, nil
}

// entry is one planned row.
type entry struct {
	name  string
	p     vfs.Path
	mode  int64
	mtime int64
	sz    int64
	dlen  int64
}

// MaxFileSize is the largest file Import extracts (a row's sz): sqlar holds a
// file in one row, inflated in memory.
const MaxFileSize = 1 << 30

// MaxTotalSize is the most file data Import extracts from one archive (the
// sum of its rows' sz), checked before anything is written.
const MaxTotalSize = 4 << 30

// sqlarTable is the table Import reads: a plain table (not a view, which a
// query would run, nor a virtual table) without generated columns or
// triggers.
var sqlarTable = []sqlschema.Table{{Name: "sqlar", Columns: []string{"name", "mode", "mtime", "sz", "data"}}}

// ErrBadArchive is returned, wrapped with the row's name, for an archive
// Import refuses.
var ErrBadArchive = errors.New("invalid sqlar archive")

// Target is where Import writes: a *dir.Dir satisfies it, so every entry
// is decided by the Dir's policy and quotas and audited as the Dir's calls
// are. Paths are slash-separated and relative to the target's root.
type Target interface {
	MkdirAll(ctx context.Context, path string) error
	// WriteFile replaces path atomically with data.
	WriteFile(ctx context.Context, path string, data []byte, perm fs.FileMode) error
	Symlink(ctx context.Context, target, link string) error
	Chmod(ctx context.Context, path string, mode fs.FileMode) error
	Chtimes(ctx context.Context, path string, atime, mtime time.Time) error
}

// Import extracts archive into d: directories, files (with their permission
// bits and modification times) and symlink rows (sz -1). It plans first and
// changes nothing if any row is invalid (see the package doc). Existing files
// are replaced (atomically, by d.WriteFile); existing directories are kept.
func Import(ctx context.Context, archive string, d Target) (Stats, error) {
	var st Stats
	abs, err := filepath.Abs(archive)
	if err != nil {
		return st, err
	}
	if _, err := os.Stat(abs); err != nil {
		return st, fmt.Errorf("sqlar: %s: %w", archive, fs.ErrNotExist)
	}
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: abs}).String()+"?mode=ro")
	if err != nil {
		return st, err
	}
	defer db.Close()
	if err := sqlschema.Check(ctx, db, sqlarTable, sqlschema.Shared); err != nil {
		return st, fmt.Errorf("sqlar: %w: %w", ErrBadArchive, err)
	}
	// Bytes, not characters: length() of a text value counts characters.
	rows, err := db.QueryContext(ctx, `SELECT name, mode, mtime, sz,
		CASE typeof(data) WHEN 'blob' THEN length(data) WHEN 'null' THEN 0 ELSE length(CAST(data AS BLOB)) END FROM sqlar`)
	if err != nil {
		return st, fmt.Errorf("sqlar: %w: %v", ErrBadArchive, err)
	}
	var plan []entry
	var total int64
	seen := map[string]bool{}
	for rows.Next() {
		var e entry
		var mode, mtime, sz *int64
		if err := rows.Scan(&e.name, &mode, &mtime, &sz, &e.dlen); err != nil {
			rows.Close()
			return st, fmt.Errorf("sqlar: %w: %v", ErrBadArchive, err)
		}
		bad := func(why string) error { return fmt.Errorf("sqlar: %w: %q: %s", ErrBadArchive, e.name, why) }
		if mode == nil || sz == nil {
			rows.Close()
			return st, bad("no mode or size")
		}
		e.mode, e.sz = *mode, *sz
		if mtime != nil {
			e.mtime = *mtime
		}
		if e.name == "" || e.name[0] == '/' || path.Clean(e.name) != e.name {
			rows.Close()
			return st, bad("not a clean relative name")
		}
		p, err := vfs.ParseGuest(e.name)
		if err != nil || p.IsRoot() {
			rows.Close()
			return st, bad("not a valid name")
		}
		e.p = p
		if seen[p.String()] {
			rows.Close()
			return st, bad("duplicate")
		}
		seen[p.String()] = true
		switch e.mode & sIFMT {
		case sIFDIR:
		case sIFLNK:
			if e.sz != -1 || e.dlen == 0 {
				rows.Close()
				return st, bad("a symlink row needs sz -1 and a target")
			}
		case sIFREG, 0:
			if e.sz < 0 || e.dlen > e.sz {
				rows.Close()
				return st, bad("size does not match the data")
			}
			if e.sz > MaxFileSize {
				rows.Close()
				return st, bad("larger than MaxFileSize")
			}
			if total += e.sz; total > MaxTotalSize {
				rows.Close()
				return st, bad("the archive's files add up to more than MaxTotalSize")
			}
		default:
			rows.Close()
			return st, bad("unsupported file type")
		}
		plan = append(plan, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("sqlar: %w: %v", ErrBadArchive, err)
	}
	// Parents before children.
	sort.Slice(plan, func(i, j int) bool {
		return plan[i].p.Depth() < plan[j].p.Depth() || (plan[i].p.Depth() == plan[j].p.Depth() && plan[i].name < plan[j].name)
	})
	get, err := db.PrepareContext(ctx, `SELECT data FROM sqlar WHERE name = ?`)
	if err != nil {
		return st, err
	}
	defer get.Close()
	var dirs []entry
	for _, e := range plan {
		name := e.p.String()
		perm := fs.FileMode(e.mode & 0o777)
		switch e.mode & sIFMT {
		case sIFDIR:
			if err := d.MkdirAll(ctx, name); err != nil {
				return st, err
			}
			dirs = append(dirs, e)
			st.Dirs++
			continue
		case sIFLNK:
			var target []byte
			if err := get.QueryRowContext(ctx, e.name).Scan(&target); err != nil {
				return st, err
			}
			if err := d.MkdirAll(ctx, e.p.Dir().String()); err != nil {
				return st, err
			}
			if err := d.Symlink(ctx, string(target), name); err != nil {
				return st, err
			}
			st.Symlinks++
			continue
		}
		var blob []byte
		if err := get.QueryRowContext(ctx, e.name).Scan(&blob); err != nil {
			return st, err
		}
		data := blob
		if int64(len(blob)) > e.sz {
			return st, fmt.Errorf("sqlar: %w: %q: holds more than its %d bytes", ErrBadArchive, e.name, e.sz)
		}
		if int64(len(blob)) < e.sz {
			zr, err := zlib.NewReader(bytes.NewReader(blob))
			if err != nil {
				return st, fmt.Errorf("sqlar: %w: %q: %v", ErrBadArchive, e.name, err)
			}
			data, err = io.ReadAll(io.LimitReader(zr, e.sz+1))
			if err != nil || int64(len(data)) != e.sz {
				return st, fmt.Errorf("sqlar: %w: %q: inflates to other than its %d bytes", ErrBadArchive, e.name, e.sz)
			}
		}
		if err := d.MkdirAll(ctx, e.p.Dir().String()); err != nil {
			return st, err
		}
		if err := d.WriteFile(ctx, name, data, perm); err != nil {
			return st, err
		}
		if err := d.Chmod(ctx, name, perm); err != nil {
			return st, err
		}
		if err := d.Chtimes(ctx, name, time.Time{}, time.Unix(e.mtime, 0)); err != nil {
			return st, err
		}
		st.Files++
		st.Bytes += e.sz
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		e := dirs[i]
		if err := d.Chmod(ctx, e.p.String(), fs.FileMode(e.mode&0o777)); err != nil {
			return st, err
		}
		if err := d.Chtimes(ctx, e.p.String(), time.Time{}, time.Unix(e.mtime, 0)); err != nil {
			return st, err
		}
	}
	return st, nil
}
