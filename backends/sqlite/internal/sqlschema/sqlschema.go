// Package sqlschema checks, before a reader trusts a SQLite file that came
// from outside, that its tables are the plain tables the reader expects: not
// views (which a query would run, recursive ones forever), not virtual tables
// (whose module runs code), without generated columns (computed on every read)
// and without triggers.
package sqlschema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// ErrShape is the cause of every refusal: the file's schema is not the one
// the reader expects.
var ErrShape = errors.New("unexpected database schema")

// MaxObjects bounds the schema objects Check reads: a file with more is
// refused.
const MaxObjects = 10_000

// Table is what a reader expects of one table: its name and the columns it
// reads.
type Table struct {
	Name    string
	Columns []string
	// SQL, if set, is the exact CREATE TABLE statement SQLite must have
	// recorded for the table: no CHECK constraint, default or other
	// expression of anyone else's, which a write would evaluate.
	SQL string
}

// Queryer is what Check needs of a *sql.DB, *sql.Conn or *sql.Tx.
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Mode says what Check allows beside the expected tables.
type Mode int

const (
	// Shared allows other objects (another application's tables, views and
	// triggers) so long as none is on an expected table.
	Shared Mode = iota
	// Exclusive allows nothing but the expected tables, their automatic
	// indexes and SQLite's own tables: no view, trigger or index anywhere.
	Exclusive
)

type object struct{ typ, name, tbl, sql string }

// Check verifies that each table of want is an ordinary table (type "table",
// created by CREATE TABLE) with at least its columns, none of them generated
// or hidden, and that no trigger is defined on it; in Exclusive mode, that
// the schema holds nothing else. A refusal wraps ErrShape and names the
// object; a failure of SQLite itself is returned as it is.
func Check(ctx context.Context, q Queryer, want []Table, mode Mode) error {
	objs, err := objects(ctx, q)
	if err != nil {
		return err
	}
	for _, t := range want {
		if err := checkTable(ctx, q, objs, t); err != nil {
			return err
		}
	}
	if mode == Exclusive {
		return onlyThese(objs, want)
	}
	return nil
}

func objects(ctx context.Context, q Queryer) ([]object, error) {
	rows, err := q.QueryContext(ctx, `SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var objs []object
	for rows.Next() {
		var o object
		if err := rows.Scan(&o.typ, &o.name, &o.tbl, &o.sql); err != nil {
			return nil, err
		}
		if len(objs) == MaxObjects {
			return nil, fmt.Errorf("%w: more than %d schema objects", ErrShape, MaxObjects)
		}
		objs = append(objs, o)
	}
	return objs, rows.Err()
}

func checkTable(ctx context.Context, q Queryer, objs []object, t Table) error {
	found := false
	for _, o := range objs {
		switch {
		case o.typ == "trigger" && strings.EqualFold(o.tbl, t.Name):
			return fmt.Errorf("%w: trigger %q on table %s", ErrShape, o.name, t.Name)
		case !strings.EqualFold(o.name, t.Name):
		case o.typ != "table":
			return fmt.Errorf("%w: %s is a %s, not a table", ErrShape, t.Name, o.typ)
		case !hasPrefixFold(strings.TrimSpace(o.sql), "CREATE TABLE"):
			return fmt.Errorf("%w: %s is not an ordinary table", ErrShape, t.Name)
		case t.SQL != "" && o.sql != t.SQL:
			return fmt.Errorf("%w: table %s is not as it was created", ErrShape, t.Name)
		default:
			found = true
		}
	}
	if !found {
		return fmt.Errorf("%w: no table %s", ErrShape, t.Name)
	}
	return checkColumns(ctx, q, t)
}

// checkColumns reads the table's columns, hidden and generated ones
// included (table_xinfo), and refuses any of those or a missing column.
func checkColumns(ctx context.Context, q Queryer, t Table) error {
	rows, err := q.QueryContext(ctx, `SELECT name, hidden FROM pragma_table_xinfo(?)`, t.Name)
	if err != nil {
		return err
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var name string
		var hidden int64
		if err := rows.Scan(&name, &hidden); err != nil {
			return err
		}
		if hidden != 0 {
			return fmt.Errorf("%w: column %s.%s is generated or hidden", ErrShape, t.Name, name)
		}
		have[strings.ToLower(name)] = true
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, c := range t.Columns {
		if !have[strings.ToLower(c)] {
			return fmt.Errorf("%w: table %s has no column %s", ErrShape, t.Name, c)
		}
	}
	return nil
}

// onlyThese refuses any object but want's tables, their automatic indexes
// (no SQL of their own) and SQLite's internal tables.
func onlyThese(objs []object, want []Table) error {
	wanted := func(name string) bool {
		for _, t := range want {
			if strings.EqualFold(t.Name, name) {
				return true
			}
		}
		return false
	}
	for _, o := range objs {
		switch {
		case o.typ == "table" && (wanted(o.name) || hasPrefixFold(o.name, "sqlite_")):
		case o.typ == "index" && o.sql == "" && wanted(o.tbl):
		default:
			return fmt.Errorf("%w: unexpected %s %q", ErrShape, o.typ, o.name)
		}
	}
	return nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
