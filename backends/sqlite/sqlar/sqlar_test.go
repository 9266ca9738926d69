package sqlar

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/sqlite"
	"github.com/capfs/capfs/dir"
)

var bg = context.Background()

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// tree builds a Dir on a scratch file: nested directories, a compressible and
// an incompressible file, an empty one, modes, and a symlink.
func tree(t *testing.T) (*dir.Dir, map[string][]byte) {
	f, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"))
	must(t, err)
	t.Cleanup(func() { f.Close() })
	d, _ := dir.New(f)
	noise := make([]byte, 70_000)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	files := map[string][]byte{
		"a.txt":          bytes.Repeat([]byte("compress me "), 10_000),
		"bin/noise":      noise,
		"bin/deep/empty": nil,
		"run.sh":         []byte("#!/bin/sh\necho hi\n"),
	}
	for p, b := range files {
		must(t, d.MkdirAll(bg, filepath.Dir(p)))
		must(t, d.WriteFile(bg, p, b, 0o644))
	}
	must(t, d.Chmod(bg, "run.sh", 0o755))
	must(t, d.Symlink(bg, "a.txt", "link"))
	return d, files
}

func TestExportImportRoundTrip(t *testing.T) {
	d, files := tree(t)
	arc := filepath.Join(t.TempDir(), "x.sqlar")
	st, err := Export(bg, d.FS(), arc, SymlinkRows)
	must(t, err)
	if st.Files != 4 || st.Symlinks != 1 || st.Dirs != 2 {
		t.Fatalf("export stats %+v", st)
	}
	// The big text is stored compressed.
	db, err := sql.Open("sqlite", arc)
	must(t, err)
	var sz, n int64
	must(t, db.QueryRow(`SELECT sz, length(data) FROM sqlar WHERE name = 'a.txt'`).Scan(&sz, &n))
	db.Close()
	if n >= sz {
		t.Fatalf("a.txt stored %d bytes for %d", n, sz)
	}
	out, _ := dir.New(memory.New())
	st, err = Import(bg, arc, out)
	must(t, err)
	if st.Files != 4 || st.Symlinks != 1 {
		t.Fatalf("import stats %+v", st)
	}
	for p, want := range files {
		got, err := out.ReadFile(bg, p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes, %v", p, len(got), err)
		}
	}
	if tg, err := out.Readlink(bg, "link"); err != nil || tg != "a.txt" {
		t.Fatalf("link: %q, %v", tg, err)
	}
	if info, _ := out.Stat(bg, "run.sh"); info.Mode().Perm() != 0o755 {
		t.Fatalf("run.sh mode %v", info.Mode())
	}
	if _, err := Export(bg, d.FS(), arc, SymlinkRows); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("export over an existing archive: %v", err)
	}
}

// TestSqlite3Extract: an archive exported with SkipSymlinks is extracted by
// `sqlite3 -Ax` to the same files.
func TestSqlite3Extract(t *testing.T) {
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Skip("sqlite3 is not installed (apt-get install sqlite3)")
	}
	d, files := tree(t)
	arc := filepath.Join(t.TempDir(), "x.sqlar")
	st, err := Export(bg, d.FS(), arc, SkipSymlinks)
	must(t, err)
	if st.SkippedSymlinks != 1 {
		t.Fatalf("stats %+v", st)
	}
	dest := t.TempDir()
	cmd := exec.Command("sqlite3", arc, "-Ax")
	cmd.Dir = dest
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sqlite3 -Ax: %v: %s", err, b)
	}
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(dest, p))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s extracted by sqlite3: %d bytes, %v", p, len(got), err)
		}
	}
	if info, err := os.Stat(filepath.Join(dest, "run.sh")); err != nil || info.Mode().Perm() != 0o755 {
		t.Fatalf("run.sh: %v, %v", info, err)
	}
}

// TestImportRefuses: a bad row anywhere changes nothing.
func TestImportRefuses(t *testing.T) {
	for name, rows := range map[string][]string{
		"climbs out":    {`('ok.txt', 33188, 0, 2, 'ok')`, `('../evil', 33188, 0, 4, 'evil')`},
		"absolute":      {`('ok.txt', 33188, 0, 2, 'ok')`, `('/etc/evil', 33188, 0, 4, 'evil')`},
		"device":        {`('ok.txt', 33188, 0, 2, 'ok')`, `('dev', 8630, 0, 0, NULL)`},
		"sz too small":  {`('ok.txt', 33188, 0, 2, 'ok')`, `('b', 33188, 0, 1, 'toolong')`},
		"huge sz":       {`('ok.txt', 33188, 0, 2, 'ok')`, `('b', 33188, 0, 1099511627776, 'x')`},
		"bad symlink":   {`('ok.txt', 33188, 0, 2, 'ok')`, `('l', 41471, 0, 3, 'abc')`},
		"unclean name":  {`('ok.txt', 33188, 0, 2, 'ok')`, `('a//b', 33188, 0, 2, 'ab')`},
		"dot component": {`('ok.txt', 33188, 0, 2, 'ok')`, `('a/./b', 33188, 0, 2, 'ab')`},
	} {
		t.Run(name, func(t *testing.T) {
			arc := filepath.Join(t.TempDir(), "bad.sqlar")
			db, err := sql.Open("sqlite", arc)
			must(t, err)
			_, err = db.Exec(schema)
			must(t, err)
			for _, r := range rows {
				_, err = db.Exec(`INSERT INTO sqlar VALUES ` + r)
				must(t, err)
			}
			db.Close()
			out, _ := dir.New(memory.New())
			if _, err := Import(bg, arc, out); !errors.Is(err, ErrBadArchive) {
				t.Fatalf("import: %v, want ErrBadArchive", err)
			}
			if ents, _ := out.ReadDir(bg, "."); len(ents) != 0 {
				t.Fatalf("a refused archive wrote %d entries", len(ents))
			}
		})
	}
}

// TestImportBomb: a row that inflates past its sz is refused.
func TestImportBomb(t *testing.T) {
	arc := filepath.Join(t.TempDir(), "bomb.sqlar")
	var z bytes.Buffer
	zw := zlibWriter(&z)
	zw.Write(make([]byte, 10<<20))
	zw.Close()
	db, err := sql.Open("sqlite", arc)
	must(t, err)
	_, err = db.Exec(schema)
	must(t, err)
	_, err = db.Exec(`INSERT INTO sqlar VALUES('bomb', 33188, 0, ?, ?)`, z.Len()+1, z.Bytes())
	must(t, err)
	db.Close()
	out, _ := dir.New(memory.New())
	if _, err := Import(bg, arc, out); !errors.Is(err, ErrBadArchive) {
		t.Fatalf("bomb: %v, want ErrBadArchive", err)
	}
}
