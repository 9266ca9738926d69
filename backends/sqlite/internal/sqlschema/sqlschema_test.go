package sqlschema

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

func db(t *testing.T, stmts string) *sql.DB {
	t.Helper()
	d, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.Exec(stmts); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestCheck pins each rule: a plain table passes in both modes; a view,
// virtual table, generated column, trigger, missing column or different SQL
// fails; other objects fail only in Exclusive mode.
func TestCheck(t *testing.T) {
	want := []Table{{Name: "t", Columns: []string{"a", "B"}}}
	exact := []Table{{Name: "t", Columns: []string{"a"}, SQL: "CREATE TABLE t(a, b)"}}
	for _, c := range []struct {
		name, sql         string
		want              []Table
		shared, exclusive bool // passes
	}{
		{"plain", `CREATE TABLE t(a, b)`, want, true, true},
		{"plain, exact SQL", `CREATE TABLE IF NOT EXISTS t(a, b)`, exact, true, true},
		{"other SQL", `CREATE TABLE t(a, b CHECK (b > 0))`, exact, false, false},
		{"upper-case name", `CREATE TABLE T(A, b)`, want, true, true},
		{"view", `CREATE VIEW t(a, b) AS SELECT 1, 2`, want, false, false},
		{"virtual", `CREATE VIRTUAL TABLE t USING fts5(a, b)`, want, false, false},
		{"generated", `CREATE TABLE t(a, b AS (a + 1))`, want, false, false},
		{"trigger", `CREATE TABLE t(a, b); CREATE TRIGGER x AFTER INSERT ON t BEGIN SELECT 1; END`, want, false, false},
		{"missing column", `CREATE TABLE t(a)`, want, false, false},
		{"absent", `CREATE TABLE u(a, b)`, want, false, false},
		{"another view", `CREATE TABLE t(a, b); CREATE VIEW v AS SELECT 1`, want, true, false},
		{"another table", `CREATE TABLE t(a, b); CREATE TABLE u(c)`, want, true, false},
		{"an index", `CREATE TABLE t(a, b); CREATE INDEX i ON t(a)`, want, true, false},
		{"an automatic index", `CREATE TABLE t(a PRIMARY KEY, b) WITHOUT ROWID`, want, true, true},
		{"SQLite's own tables", `CREATE TABLE t(a INTEGER PRIMARY KEY AUTOINCREMENT, b); INSERT INTO t(b) VALUES (1); ANALYZE`, want, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := db(t, c.sql)
			for _, m := range []struct {
				mode Mode
				ok   bool
			}{{Shared, c.shared}, {Exclusive, c.exclusive}} {
				err := Check(context.Background(), d, c.want, m.mode)
				if (err == nil) != m.ok || (err != nil && !errors.Is(err, ErrShape)) {
					t.Errorf("mode %d: %v, want passes %v", m.mode, err, m.ok)
				}
			}
		})
	}
}
