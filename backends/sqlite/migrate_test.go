package sqlite

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/capfs/capfs/vfs/vfstest"
)

// TestMigration: a file of version 1 opens under a capfs whose schema is 2 (a
// test migration adding a column), is migrated in place, keeps its tree, and is
// then refused by the older capfs with ErrNewerSchema.
func TestMigration(t *testing.T) {
	f, name := newFS(t)
	must(t, vfstest.WriteFile(bg, f, P("kept"), []byte("v1 data")))
	must(t, f.Close())

	migrations[1] = `ALTER TABLE inode ADD COLUMN xattrs BLOB;`
	schemaVersion = 2
	defer func() { delete(migrations, 1); schemaVersion = SchemaVersion }()
	g, err := Open(name)
	must(t, err)
	got, err := vfstest.ReadFile(bg, g, P("kept"))
	if err != nil || string(got) != "v1 data" {
		t.Fatalf("after migration: %q, %v", got, err)
	}
	must(t, vfstest.WriteFile(bg, g, P("new"), []byte("v2 data")))
	must(t, g.Close())
	db, err := sql.Open("sqlite", name)
	must(t, err)
	var ver int
	must(t, db.QueryRow(`PRAGMA user_version`).Scan(&ver))
	_, colErr := db.Exec(`SELECT xattrs FROM inode`)
	db.Close()
	if ver != 2 || colErr != nil {
		t.Fatalf("user_version %d, column: %v", ver, colErr)
	}
	// A new file is created at 1 and migrated too.
	h, hname := newFS(t)
	must(t, h.Close())
	db, _ = sql.Open("sqlite", hname)
	db.QueryRow(`PRAGMA user_version`).Scan(&ver)
	db.Close()
	if ver != 2 {
		t.Fatalf("new file at version %d, want 2", ver)
	}

	schemaVersion = SchemaVersion
	if _, err := Open(name); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("older capfs on a migrated file: %v, want ErrNewerSchema", err)
	}
}
