// Package sqlitetest generates the hostile SQLite files the SQLite readers
// (AgentFS databases, capfs scratch files, SQLite Archives) are tested
// against: every case is a few SQL statements applied by code to a valid
// base (no binary fixtures), with the outcome opening it must have. Tests of
// other packages (the CLI) can run the same corpus.
package sqlitetest

import (
	"database/sql"
	"fmt"
	"net/url"
	"slices"
	"strings"

	_ "modernc.org/sqlite" // the driver
)

// Want is what opening a case must do.
type Want string

// The outcomes.
const (
	Opens   Want = "opens"   // a valid file: it opens and reads as the base
	Schema  Want = "schema"  // refused: a table is not a plain table of the expected shape
	Corrupt Want = "corrupt" // refused: the rows break the format's rules
	Foreign Want = "foreign" // refused: not a file of this format at all
	Version Want = "version" // refused: another schema version of the format
)

// Case is one hostile (or valid) file: SQL run on the base, and the outcome.
type Case struct {
	Name string
	SQL  string
	Want Want
}

// Apply runs c's SQL on the SQLite file at path (the base, already written).
func Apply(path, stmts string) error {
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path}).String())
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec(stmts); err != nil {
		return fmt.Errorf("sqlitetest: %w", err)
	}
	return db.Close()
}

// infinite is a recursive common table expression with no end: a query
// reading a view made of it never finishes and its memory grows.
const infinite = `WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)`

// AgentFSBase is the SQL of a valid AgentFS 0.4 database (the tables
// agentfs-sdk 0.6.4 creates) holding d/ (0755), d/hello.txt ("hello
// agentfs\n"), d/e/big.bin (10000 bytes in three chunks of 4096), empty and
// link -> d/hello.txt.
const AgentFSBase = `
CREATE TABLE fs_config (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE fs_inode (ino INTEGER PRIMARY KEY AUTOINCREMENT, mode INTEGER NOT NULL, nlink INTEGER NOT NULL DEFAULT 0, uid INTEGER NOT NULL DEFAULT 0, gid INTEGER NOT NULL DEFAULT 0, size INTEGER NOT NULL DEFAULT 0, atime INTEGER NOT NULL, mtime INTEGER NOT NULL, ctime INTEGER NOT NULL, rdev INTEGER NOT NULL DEFAULT 0, atime_nsec INTEGER NOT NULL DEFAULT 0, mtime_nsec INTEGER NOT NULL DEFAULT 0, ctime_nsec INTEGER NOT NULL DEFAULT 0);
CREATE TABLE fs_dentry (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, parent_ino INTEGER NOT NULL, ino INTEGER NOT NULL, UNIQUE (parent_ino, name));
CREATE INDEX idx_fs_dentry_parent ON fs_dentry (parent_ino, name);
CREATE TABLE fs_data (ino INTEGER NOT NULL, chunk_index INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (ino, chunk_index));
CREATE TABLE fs_symlink (ino INTEGER PRIMARY KEY, target TEXT NOT NULL);
CREATE TABLE kv_store (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO fs_config VALUES ('chunk_size', '4096'), ('schema_version', '0.4');
INSERT INTO fs_inode (ino, mode, nlink, size, atime, mtime, ctime) VALUES
	(1, 16877, 1, 0, 1795620727, 1795620727, 1795620727),
	(2, 16877, 1, 0, 1795620727, 1795620727, 1795620727),
	(3, 16877, 1, 0, 1795620727, 1795620727, 1795620727),
	(4, 33188, 1, 14, 1795620727, 1795620727, 1795620727),
	(5, 33188, 1, 10000, 1795620727, 1795620727, 1795620727),
	(6, 33188, 1, 0, 1795620727, 1795620727, 1795620727),
	(7, 41471, 1, 11, 1795620727, 1795620727, 1795620727);
INSERT INTO fs_dentry (name, parent_ino, ino) VALUES
	('d', 1, 2), ('e', 2, 3), ('hello.txt', 2, 4), ('big.bin', 3, 5), ('empty', 1, 6), ('link', 1, 7);
INSERT INTO fs_data VALUES (4, 0, CAST('hello agentfs' || char(10) AS BLOB)),
	(5, 0, zeroblob(4096)), (5, 1, zeroblob(4096)), (5, 2, zeroblob(1808));
INSERT INTO fs_symlink VALUES (7, 'd/hello.txt');
`

// AgentFSInodeColumns lists fs_inode's columns, for views that mimic it.
const agentInodeCols = `ino, mode, nlink, uid, gid, size, atime, mtime, ctime, rdev, atime_nsec, mtime_nsec, ctime_nsec`

// AgentFS returns the AgentFS cases, each applied to AgentFSBase.
func AgentFS() []Case {
	return slices.Clone([]Case{
		{"valid", ``, Opens},
		{"unrelated view and trigger elsewhere", `CREATE VIEW other AS ` + infinite + ` SELECT n FROM r;
			CREATE TRIGGER kv AFTER INSERT ON kv_store BEGIN DELETE FROM kv_store; END;`, Opens},
		{"fs_inode a recursive view", `DROP TABLE fs_inode; CREATE VIEW fs_inode(` + agentInodeCols + `) AS ` + infinite +
			` SELECT n, CASE n WHEN 1 THEN 16877 ELSE 33188 END, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 FROM r;`, Schema},
		{"fs_dentry a recursive view", `DROP TABLE fs_dentry; CREATE VIEW fs_dentry(id, name, parent_ino, ino) AS ` + infinite +
			` SELECT n, 'f' || n, 1, 4 FROM r;`, Schema},
		{"fs_data a recursive view", `DROP TABLE fs_data; CREATE VIEW fs_data(ino, chunk_index, data) AS ` + infinite +
			` SELECT 5, n - 1, zeroblob(4096) FROM r;`, Schema},
		{"fs_symlink a plain view", `DROP TABLE fs_symlink; CREATE VIEW fs_symlink(ino, target) AS SELECT 7, 'd/hello.txt';`, Schema},
		{"an upper-case view", `DROP TABLE fs_symlink; CREATE VIEW FS_SYMLINK(ino, target) AS SELECT 7, 'd/hello.txt';`, Schema},
		{"a table whose SQL is a query", `PRAGMA writable_schema = ON;
			UPDATE sqlite_schema SET sql = 'CREATE TABLE fs_symlink AS ` + strings.ReplaceAll(infinite, "'", "''") + ` SELECT n AS ino, ''x'' AS target FROM r' WHERE name = 'fs_symlink';
			PRAGMA writable_schema = OFF;`, Corrupt},
		{"fs_config a view", `DROP TABLE fs_config; CREATE VIEW fs_config(key, value) AS VALUES ('chunk_size', '4096'), ('schema_version', '0.4');`, Schema},
		{"fs_symlink a virtual table", `DROP TABLE fs_symlink; CREATE VIRTUAL TABLE fs_symlink USING fts5(ino, target);
			INSERT INTO fs_symlink VALUES (7, 'd/hello.txt');`, Schema},
		{"generated column", `DROP TABLE fs_symlink; CREATE TABLE fs_symlink (ino INTEGER PRIMARY KEY, t TEXT, target TEXT AS (t || hex(zeroblob(1000))));
			INSERT INTO fs_symlink (ino, t) VALUES (7, 'd/hello.txt');`, Schema},
		{"trigger on fs_inode", `CREATE TRIGGER grow AFTER UPDATE ON fs_inode BEGIN INSERT INTO kv_store VALUES (hex(randomblob(8)), 'x'); END;`, Schema},
		{"missing column", `DROP TABLE fs_dentry; CREATE TABLE fs_dentry (id INTEGER PRIMARY KEY, name TEXT, ino INTEGER);`, Schema},
		{"petabyte file", `UPDATE fs_inode SET size = 1125899906842624 WHERE ino = 5;`, Corrupt},
		{"declared size below the data", `UPDATE fs_inode SET size = 100 WHERE ino = 5;`, Corrupt},
		{"data and no size", `UPDATE fs_inode SET size = 0 WHERE ino = 4;`, Corrupt},
		{"missing middle chunk", `DELETE FROM fs_data WHERE ino = 5 AND chunk_index = 1; UPDATE fs_inode SET size = 5904 WHERE ino = 5;`, Corrupt},
		{"chunks from 1", `UPDATE fs_data SET chunk_index = chunk_index + 3 WHERE ino = 5;`, Corrupt},
		{"short middle chunk", `UPDATE fs_data SET data = zeroblob(100) WHERE ino = 5 AND chunk_index = 0; UPDATE fs_inode SET size = 6004 WHERE ino = 5;`, Corrupt},
		{"chunk over the chunk size", `UPDATE fs_data SET data = zeroblob(8192) WHERE ino = 5 AND chunk_index = 2; UPDATE fs_inode SET size = 16384 WHERE ino = 5;`, Corrupt},
		{"text chunk", `UPDATE fs_data SET data = CAST(data AS TEXT) || '` + "éé" + `' WHERE ino = 4; UPDATE fs_inode SET size = 16 WHERE ino = 4;`, Corrupt},
		{"huge chunk size", `UPDATE fs_config SET value = '1099511627776' WHERE key = 'chunk_size';`, Corrupt},
		{"duplicate entry", `DROP TABLE fs_dentry; CREATE TABLE fs_dentry (id INTEGER PRIMARY KEY, name TEXT, parent_ino INTEGER, ino INTEGER);
			INSERT INTO fs_dentry (name, parent_ino, ino) VALUES ('d', 1, 2), ('e', 2, 3), ('hello.txt', 2, 4), ('big.bin', 3, 5), ('empty', 1, 6), ('empty', 1, 7);`, Corrupt},
		{"directory cycle", `UPDATE fs_dentry SET parent_ino = 3 WHERE name = 'd';`, Corrupt},
		{"entry climbing out", `UPDATE fs_dentry SET name = '..' WHERE name = 'empty';`, Corrupt},
		{"no root", `DELETE FROM fs_inode WHERE ino = 1;`, Corrupt},
		{"another version", `UPDATE fs_config SET value = '0.5' WHERE key = 'schema_version';`, Version},
		{"not agentfs", `DROP TABLE fs_config;`, Foreign},
	})
}

// Scratch returns the capfs scratch file cases, each applied to a new,
// closed scratch file (which the caller makes with the package under test).
func Scratch() []Case {
	return slices.Clone([]Case{
		{"valid", ``, Opens},
		{"inode a recursive view", `DROP TABLE inode; CREATE VIEW inode(ino, mode, nlink, size, mtime, mtime_ns, target) AS ` + infinite +
			` SELECT n, 16877, 2, 0, 0, 0, NULL FROM r;`, Schema},
		{"meta a view", `DROP TABLE meta; CREATE VIEW meta(key, value) AS VALUES ('chunk_size', 262144);`, Schema},
		{"chunk a recursive view", `DROP TABLE chunk; CREATE VIEW chunk(id, data) AS ` + infinite + ` SELECT n, zeroblob(262144) FROM r;`, Schema},
		{"trigger on dentry", `CREATE TRIGGER t AFTER INSERT ON dentry BEGIN INSERT INTO chunk(data) SELECT zeroblob(1048576) FROM (` + infinite + ` SELECT n FROM r LIMIT 1000); END;`, Schema},
		{"trigger elsewhere", `CREATE TABLE x(a); CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT 1; END;`, Schema},
		{"expression index", `CREATE INDEX ix ON chunk(length(zeroblob(1048576)) + id);`, Schema},
		{"unrelated view", `CREATE VIEW v AS SELECT 1;`, Schema},
		{"generated column", `DROP TABLE dentry; CREATE TABLE dentry(parent INTEGER NOT NULL, name TEXT NOT NULL, i INTEGER, ino INTEGER AS (i + 0), PRIMARY KEY(parent, name)) WITHOUT ROWID;`, Schema},
		{"missing column", `DROP TABLE inode; CREATE TABLE inode(ino INTEGER PRIMARY KEY, mode INTEGER);`, Schema},
		{"check constraint on chunk", `DROP TABLE chunk; CREATE TABLE chunk(id INTEGER PRIMARY KEY, data BLOB NOT NULL CHECK (length(zeroblob(100000000)) > 0));`, Schema},
		{"default expression on inode", `DROP TABLE inode; CREATE TABLE inode(ino INTEGER PRIMARY KEY, mode INTEGER NOT NULL, nlink INTEGER NOT NULL,
			size INTEGER NOT NULL, mtime INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, target TEXT DEFAULT (hex(zeroblob(100000000))));
			INSERT INTO inode VALUES(1, 16877, 2, 0, 0, 0, NULL);`, Schema},
	})
}

// SqlarBase is the SQL of a valid SQLite Archive: a/ and a/f.txt ("hello").
const SqlarBase = `
CREATE TABLE sqlar(name TEXT PRIMARY KEY, mode INT, mtime INT, sz INT, data BLOB);
INSERT INTO sqlar VALUES ('a', 16877, 1700000000, 0, NULL), ('a/f.txt', 33188, 1700000000, 5, CAST('hello' AS BLOB));
`

// Sqlar returns the SQLite Archive cases, each applied to SqlarBase.
func Sqlar() []Case {
	return slices.Clone([]Case{
		{"valid", ``, Opens},
		{"sqlar a recursive view", `DROP TABLE sqlar; CREATE VIEW sqlar(name, mode, mtime, sz, data) AS ` + infinite +
			` SELECT 'f' || n, 33188, 0, 1, x'41' FROM r;`, Schema},
		{"sqlar a virtual table", `DROP TABLE sqlar; CREATE VIRTUAL TABLE sqlar USING fts5(name, mode, mtime, sz, data);`, Schema},
		{"generated data", `DROP TABLE sqlar; CREATE TABLE sqlar(name TEXT PRIMARY KEY, mode INT, mtime INT, sz INT, d BLOB, data BLOB AS (zeroblob(sz)));
			INSERT INTO sqlar(name, mode, mtime, sz) VALUES ('big', 33188, 0, 1000000);`, Schema},
		{"trigger on sqlar", `CREATE TRIGGER t AFTER INSERT ON sqlar BEGIN SELECT 1; END;`, Schema},
		{"size below the data", `UPDATE sqlar SET sz = 4 WHERE name = 'a/f.txt';`, Corrupt},
		{"text longer in bytes than in characters", `INSERT INTO sqlar VALUES ('t', 33188, 0, 4, '` + "éééé" + `');`, Corrupt},
		{"more than the total budget", `INSERT INTO sqlar SELECT 'f' || n, 33188, 0, 1073741824, x'' FROM (` + infinite + ` SELECT n FROM r LIMIT 5);`, Corrupt},
	})
}
