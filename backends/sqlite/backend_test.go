package sqlite

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func reopen(t *testing.T, f *FS, name string, opts ...Option) *FS {
	t.Helper()
	must(t, f.Close())
	g, err := Open(name, opts...)
	must(t, err)
	t.Cleanup(func() { g.Close() })
	return g
}

// TestFSThroughDir runs testing/fstest over a Dir on the backend, with a file
// spanning several chunks, after a reopen.
func TestFSThroughDir(t *testing.T) {
	f, name := newFS(t, WithChunkSize(64<<10))
	d, _ := dir.New(f)
	big := make([]byte, 300_000)
	for i := range big {
		big[i] = byte(i * 7)
	}
	for p, body := range map[string][]byte{
		"hello.txt": []byte("hello\n"), "a/b/c.go": []byte("package c\n"), "a/readme.md": []byte("# a"),
		"x/y/z/deep.txt": []byte("deep"), "big.bin": big, "empty.txt": nil,
	} {
		if i := bytes.LastIndexByte([]byte(p), '/'); i > 0 {
			must(t, d.MkdirAll(bg, p[:i]))
		}
		must(t, d.WriteFile(bg, p, body, 0o644))
	}
	must(t, d.MkdirAll(bg, "empty/dir"))
	must(t, d.Symlink(bg, "a/readme.md", "readme-link"))
	f = reopen(t, f, name)
	d, _ = dir.New(f)
	if err := fstest.TestFS(d.FS(), "hello.txt", "a/b/c.go", "a/readme.md", "x/y/z/deep.txt", "big.bin", "empty/dir", "readme-link"); err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadFile(bg, "big.bin")
	must(t, err)
	if !bytes.Equal(got, big) {
		t.Fatal("big.bin changed across a reopen")
	}
}

// TestPersistence checks that every kind of state survives Close and Open: types,
// modes, times, hard links, symlinks, sparse files, renames and removals.
func TestPersistence(t *testing.T) {
	f, name := newFS(t, WithChunkSize(64<<10))
	must(t, f.Mkdir(bg, P("d"), 0o750))
	must(t, f.Mkdir(bg, P("d/e"), 0o700))
	must(t, vfstest.WriteFile(bg, f, P("d/a"), []byte("alpha")))
	must(t, f.Link(bg, P("d/a"), P("d/e/a2")))
	must(t, f.Symlink(bg, "../d/a", P("d/e/link")))
	must(t, f.Chmod(bg, P("d/a"), 0o755|fs.ModeSetuid))
	mt := time.Date(2001, 2, 3, 4, 5, 6, 789, time.UTC)
	must(t, f.Chtimes(bg, P("d/e"), time.Time{}, mt))
	fh, err := f.OpenFile(bg, P("sparse"), os.O_RDWR|os.O_CREATE, 0o600)
	must(t, err)
	_, err = fh.WriteAt([]byte("tail"), 200_000)
	must(t, err)
	must(t, fh.Close())
	must(t, vfstest.WriteFile(bg, f, P("gone"), []byte("x")))
	must(t, f.Rename(bg, P("gone"), P("moved"), 0))
	must(t, f.Remove(bg, P("moved")))
	want := snapshotTree(t, f)

	f = reopen(t, f, name)
	if got := snapshotTree(t, f); !slices.Equal(got, want) {
		t.Fatalf("after reopen:\n%v\nwant\n%v", got, want)
	}
	info, err := f.Stat(bg, P("d/e"))
	must(t, err)
	if !info.ModTime.Equal(mt) {
		t.Fatalf("mtime %v, want %v", info.ModTime, mt)
	}
	info, err = f.Stat(bg, P("d/a"))
	must(t, err)
	if info.Nlink != 2 || info.Mode != 0o755|fs.ModeSetuid {
		t.Fatalf("d/a: nlink %d mode %v", info.Nlink, info.Mode)
	}
	data, err := vfstest.ReadFile(bg, f, P("sparse"))
	must(t, err)
	if len(data) != 200_004 || string(data[200_000:]) != "tail" || bytes.Count(data[:200_000], []byte{0}) != 200_000 {
		t.Fatalf("sparse file: %d bytes", len(data))
	}
}

// snapshotTree describes every entry of f: path, mode, size, nlink, content or
// target.
func snapshotTree(t *testing.T, f vfs.Backend) []string {
	t.Helper()
	var out []string
	var walk func(p vfs.Path)
	walk = func(p vfs.Path) {
		ents, err := f.ReadDir(bg, p)
		must(t, err)
		for _, e := range ents {
			c, err := p.Child(e.Name)
			must(t, err)
			info, err := f.Lstat(bg, c)
			must(t, err)
			line := fmt.Sprintf("%s %v %d nlink=%d", c, info.Mode, info.Size, info.Nlink)
			switch {
			case e.Type.IsDir():
				out = append(out, line)
				walk(c)
				continue
			case e.Type&fs.ModeSymlink != 0:
				tg, err := f.Readlink(bg, c)
				must(t, err)
				line += " -> " + tg
			default:
				data, err := vfstest.ReadFile(bg, f, c)
				must(t, err)
				line += fmt.Sprintf(" %x", data[:min(len(data), 16)])
			}
			out = append(out, line)
		}
	}
	walk(vfs.Root)
	return out
}

// TestRandomIO compares random WriteAt, Truncate and ReadAt across chunk
// boundaries with a byte slice, then again after a reopen.
func TestRandomIO(t *testing.T) {
	const cs = 64 << 10
	f, name := newFS(t, WithChunkSize(cs))
	r := rand.New(rand.NewPCG(1, 2))
	var model []byte
	h, err := f.OpenFile(bg, P("f"), os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	for i := range 300 {
		switch r.IntN(6) {
		case 0:
			size := r.Int64N(5 * cs)
			must(t, h.Truncate(size))
			if size < int64(len(model)) {
				model = model[:size]
			} else {
				model = append(model, make([]byte, size-int64(len(model)))...)
			}
		case 1, 2, 3:
			off := r.Int64N(5 * cs)
			b := make([]byte, r.IntN(2*cs))
			for j := range b {
				b[j] = byte(i + j)
			}
			_, err := h.WriteAt(b, off)
			must(t, err)
			if end := off + int64(len(b)); end > int64(len(model)) {
				model = append(model, make([]byte, end-int64(len(model)))...)
			}
			copy(model[off:], b)
		default:
			off := r.Int64N(5 * cs)
			b := make([]byte, r.IntN(2*cs))
			n, err := h.ReadAt(b, off)
			var want []byte
			if off < int64(len(model)) {
				want = model[off:min(int64(len(model)), off+int64(len(b)))]
			}
			if n != len(want) || !bytes.Equal(b[:n], want) || (n < len(b) && err != io.EOF) {
				t.Fatalf("step %d: ReadAt(%d, %d) = %d, %v; want %d bytes", i, len(b), off, n, err, len(want))
			}
		}
	}
	must(t, h.Close())
	f = reopen(t, f, name)
	got, err := vfstest.ReadFile(bg, f, P("f"))
	must(t, err)
	if !bytes.Equal(got, model) {
		t.Fatalf("after reopen: %d bytes, want %d", len(got), len(model))
	}
	// No chunk row holds a byte past the size, and none past the last chunk.
	db, err := sql.Open("sqlite", name)
	must(t, err)
	defer db.Close()
	var n, maxEnd int64
	must(t, db.QueryRow(`SELECT count(*), coalesce(max((id & 16777215) * ? + length(data)), 0) FROM chunk`, cs).Scan(&n, &maxEnd))
	if maxEnd > int64(len(model)) {
		t.Fatalf("a chunk row reaches byte %d of a %d-byte file", maxEnd, len(model))
	}
}

// TestUnlinkedOpenFile: a removed file keeps working through its handle, and its
// inode goes with the last Close, or at the next Open if the process stopped
// first.
func TestUnlinkedOpenFile(t *testing.T) {
	f, name := newFS(t)
	must(t, vfstest.WriteFile(bg, f, P("a"), []byte("data")))
	h, err := f.OpenFile(bg, P("a"), os.O_RDWR, 0)
	must(t, err)
	must(t, f.Remove(bg, P("a")))
	_, err = h.WriteAt([]byte("DATA!"), 0)
	must(t, err)
	b := make([]byte, 5)
	_, err = h.ReadAt(b, 0)
	must(t, err)
	if string(b) != "DATA!" {
		t.Fatalf("read %q", b)
	}
	if n := countRows(t, name, "inode"); n != 2 {
		t.Fatalf("%d inode rows while the unlinked file is open, want 2", n)
	}
	// The FS closes with the handle still open: the next Open reclaims it.
	must(t, f.Close())
	g, err := Open(name)
	must(t, err)
	defer g.Close()
	if n := countRows(t, name, "inode"); n != 1 {
		t.Fatalf("%d inode rows after reopen, want 1 (the root)", n)
	}
	if n := countRows(t, name, "chunk"); n != 0 {
		t.Fatalf("%d chunk rows after reopen, want 0", n)
	}
	// And with Close in one session.
	must(t, vfstest.WriteFile(bg, g, P("b"), []byte("data")))
	h, err = g.OpenFile(bg, P("b"), os.O_RDONLY, 0)
	must(t, err)
	must(t, g.Remove(bg, P("b")))
	must(t, h.Close())
	must(t, g.Sync())
	if n := countRows(t, name, "chunk"); n != 0 {
		t.Fatalf("%d chunk rows after the last Close, want 0", n)
	}
}

func countRows(t *testing.T, name, table string) int {
	t.Helper()
	db, err := sql.Open("sqlite", name+"?_pragma=query_only(1)")
	must(t, err)
	defer db.Close()
	var n int
	must(t, db.QueryRow(`SELECT count(*) FROM `+table).Scan(&n))
	return n
}

func TestQuota(t *testing.T) {
	f, name := newFS(t, WithQuota(10_000))
	must(t, vfstest.WriteFile(bg, f, P("a"), make([]byte, 5000)))
	err := vfstest.WriteFile(bg, f, P("b"), make([]byte, 5000))
	if vfs.CodeOf(err) != vfs.CodeQuota {
		t.Fatalf("second 5000-byte file: %v, want quota_exceeded", err)
	}
	used := f.Usage()
	if used > 10_000 {
		t.Fatalf("usage %d over the quota", used)
	}
	// Nothing of the refused write is stored, and the charge survives a reopen.
	info, err := f.Stat(bg, P("b"))
	must(t, err)
	if info.Size != 0 {
		t.Fatalf("b holds %d bytes after a refused write", info.Size)
	}
	f = reopen(t, f, name, WithQuota(10_000))
	if f.Usage() != used {
		t.Fatalf("usage %d after reopen, was %d", f.Usage(), used)
	}
	must(t, f.Remove(bg, P("a")))
	must(t, vfstest.WriteFile(bg, f, P("b"), make([]byte, 5000)))
}

// TestOpenErrors: every way a file can be wrong gets its typed error.
func TestOpenErrors(t *testing.T) {
	tmp := t.TempDir()
	text := filepath.Join(tmp, "text")
	must(t, os.WriteFile(text, []byte("just some text, long enough to be a header"), 0o600))
	if _, err := Open(text); !errors.Is(err, ErrForeign) {
		t.Fatalf("text file: %v, want ErrForeign", err)
	}
	other := filepath.Join(tmp, "other.db")
	db, err := sql.Open("sqlite", other)
	must(t, err)
	_, err = db.Exec(`CREATE TABLE t(x)`)
	must(t, err)
	db.Close()
	if _, err := Open(other); !errors.Is(err, ErrForeign) {
		t.Fatalf("another application's database: %v, want ErrForeign", err)
	}

	f, name := newFS(t)
	must(t, vfstest.WriteFile(bg, f, P("a"), bytes.Repeat([]byte("x"), 100_000)))
	if _, err := Open(name); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	must(t, f.Close())

	newer := filepath.Join(tmp, "newer.db")
	cp(t, name, newer)
	db, err = sql.Open("sqlite", newer)
	must(t, err)
	_, err = db.Exec(`PRAGMA user_version = 99`)
	must(t, err)
	db.Close()
	if _, err := Open(newer); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("newer schema: %v, want ErrNewerSchema", err)
	}

	// Garbage over every page but the first.
	corrupt := filepath.Join(tmp, "corrupt.db")
	cp(t, name, corrupt)
	raw, err := os.ReadFile(corrupt)
	must(t, err)
	for i := 8192; i < len(raw); i++ {
		raw[i] = byte(i*31 + 7)
	}
	must(t, os.WriteFile(corrupt, raw, 0o600))
	g, err := Open(corrupt)
	if err == nil {
		// The metadata may have survived; the data cannot have.
		_, err = vfstest.ReadFile(bg, g, P("a"))
		g.Close()
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("reading a corrupt file: %v, want ErrCorrupt", err)
		}
	} else if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt file: %v, want ErrCorrupt", err)
	}
}

func cp(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	must(t, err)
	must(t, os.WriteFile(to, b, 0o600))
}

// TestConcurrentGroupCommit writes from many goroutines (their operations share
// commits), then checks after a reopen that every acknowledged file is there.
func TestConcurrentGroupCommit(t *testing.T) {
	f, name := newFS(t)
	const workers, files = 8, 60
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := P(fmt.Sprintf("w%d", w))
			if err := f.Mkdir(bg, d, 0o755); err != nil {
				t.Error(err)
				return
			}
			for i := range files {
				p, _ := d.Child(fmt.Sprintf("f%d", i))
				if err := vfstest.WriteFile(bg, f, p, []byte(p.String())); err != nil {
					t.Error(err)
					return
				}
				if i%7 == 0 {
					q, _ := d.Child(fmt.Sprintf("r%d", i))
					if err := f.Rename(bg, p, q, 0); err != nil {
						t.Error(err)
						return
					}
					if err := f.Rename(bg, q, p, 0); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	f = reopen(t, f, name)
	for w := range workers {
		for i := range files {
			p := P(fmt.Sprintf("w%d/f%d", w, i))
			got, err := vfstest.ReadFile(bg, f, p)
			if err != nil || string(got) != p.String() {
				t.Fatalf("%s: %q, %v", p, got, err)
			}
		}
	}
}
