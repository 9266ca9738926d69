package memory

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/vfs"
)

func TestFeatures(t *testing.T) {
	f := New().Features()
	want := vfs.Features{Symlinks: true, HardLinks: true, Chmod: true, Chtimes: true}
	if f != want {
		t.Fatalf("Features() = %+v, want %+v", f, want)
	}
}

func TestRootInfo(t *testing.T) {
	m := New()
	i, err := m.Stat(bg, vfs.Root)
	must(t, err)
	if i.Name != "." || !i.Mode.IsDir() || i.Mode.Perm() != 0o755 || i.Nlink != 2 || i.ID == 0 {
		t.Fatalf("root info %+v", i)
	}
}

func TestWriteReadStat(t *testing.T) {
	m := New(WithClock(fakeClock()))
	mkdirs(t, m, "d")
	writeFile(t, m, "d/f", "hello")
	if got := readFile(t, m, "d/f"); got != "hello" {
		t.Fatalf("read %q", got)
	}
	i, err := m.Stat(bg, P("d/f"))
	must(t, err)
	if i.Name != "f" || i.Size != 5 || i.Mode != 0o644 || i.Nlink != 1 || i.ModTime.IsZero() {
		t.Fatalf("info %+v", i)
	}
	if u := dataUsage(m); u != 5 {
		t.Fatalf("data usage %d", u)
	}
	_, err = m.Stat(bg, P("d/missing"))
	wantCode(t, err, vfs.CodeNotFound)
	_, err = m.Stat(bg, P("missing/f"))
	wantCode(t, err, vfs.CodeNotFound)
	_, err = m.Stat(bg, P("d/f/x"))
	wantCode(t, err, vfs.CodeNotDir)
	_, err = m.Stat(bg, P("d/f/"))
	wantCode(t, err, vfs.CodeNotDir)
	if !errors.Is(err, fs.ErrInvalid) {
		t.Fatalf("not_a_directory should match fs.ErrInvalid")
	}
}

func TestIDs(t *testing.T) {
	m := New()
	writeFile(t, m, "a", "")
	writeFile(t, m, "b", "")
	mkdirs(t, m, "d")
	must(t, m.Link(bg, P("a"), P("c")))
	ia, _ := m.Stat(bg, P("a"))
	ib, _ := m.Stat(bg, P("b"))
	ic, _ := m.Stat(bg, P("c"))
	id, _ := m.Stat(bg, P("d"))
	ir, _ := m.Stat(bg, vfs.Root)
	if ia.ID != ic.ID {
		t.Fatalf("hard links have IDs %d and %d", ia.ID, ic.ID)
	}
	seen := map[uint64]bool{}
	for _, id := range []uint64{ia.ID, ib.ID, id.ID, ir.ID} {
		if id == 0 || seen[id] {
			t.Fatalf("ID %d zero or repeated", id)
		}
		seen[id] = true
	}
}

func TestOpenFlags(t *testing.T) {
	m := New()
	mkdirs(t, m, "d")
	writeFile(t, m, "f", "abc")

	_, err := m.OpenFile(bg, P("nope"), os.O_RDONLY, 0)
	wantCode(t, err, vfs.CodeNotFound)

	_, err = m.OpenFile(bg, P("f"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	wantCode(t, err, vfs.CodeExists)
	_, err = m.OpenFile(bg, P("d"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	wantCode(t, err, vfs.CodeExists)

	// O_EXCL creates a new file exactly once.
	f, err := m.OpenFile(bg, P("new"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	must(t, err)
	must(t, f.Close())
	i, err := m.Stat(bg, P("new"))
	must(t, err)
	if i.Mode != 0o600 {
		t.Fatalf("mode %v", i.Mode)
	}

	// O_CREATE without O_TRUNC keeps contents.
	f, err = m.OpenFile(bg, P("f"), os.O_RDWR|os.O_CREATE, 0o600)
	must(t, err)
	must(t, f.Close())
	if got := readFile(t, m, "f"); got != "abc" {
		t.Fatalf("O_CREATE changed contents: %q", got)
	}
	if i, _ := m.Stat(bg, P("f")); i.Mode != 0o644 {
		t.Fatalf("O_CREATE on existing changed mode: %v", i.Mode)
	}

	// O_TRUNC empties.
	f, err = m.OpenFile(bg, P("f"), os.O_WRONLY|os.O_TRUNC, 0)
	must(t, err)
	must(t, f.Close())
	if got := readFile(t, m, "f"); got != "" {
		t.Fatalf("O_TRUNC left %q", got)
	}
	if u := dataUsage(m); u != 0 {
		t.Fatalf("data usage after truncate %d", u)
	}

	// O_TRUNC truncates even a read-only open, as on Linux.
	writeFile(t, m, "f", "abc")
	f, err = m.OpenFile(bg, P("f"), os.O_RDONLY|os.O_TRUNC, 0)
	must(t, err)
	if i, _ := f.Stat(); i.Size != 0 {
		t.Fatalf("O_RDONLY|O_TRUNC left size %d", i.Size)
	}
	must(t, f.Close())

	// Invalid access mode.
	_, err = m.OpenFile(bg, P("f"), os.O_WRONLY|os.O_RDWR, 0)
	wantCode(t, err, vfs.CodeInvalidPath)

	// Directories: read-only open works, anything else is is_a_directory.
	for _, fl := range []int{os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_TRUNC, os.O_RDONLY | os.O_CREATE} {
		_, err = m.OpenFile(bg, P("d"), fl, 0o644)
		wantCode(t, err, vfs.CodeIsDir)
	}
	_, err = m.OpenFile(bg, vfs.Root, os.O_WRONLY, 0)
	wantCode(t, err, vfs.CodeIsDir)
	dh, err := m.OpenFile(bg, P("d"), os.O_RDONLY, 0)
	must(t, err)
	_, err = dh.Read(make([]byte, 4))
	wantCode(t, err, vfs.CodeIsDir)
	_, err = dh.ReadAt(make([]byte, 4), 0)
	wantCode(t, err, vfs.CodeIsDir)
	_, err = dh.Write([]byte("x"))
	wantCode(t, err, vfs.CodeIsDir)
	wantCode(t, dh.Truncate(0), vfs.CodeIsDir)
	di, err := dh.Stat()
	must(t, err)
	if !di.Mode.IsDir() || di.Name != "d" {
		t.Fatalf("dir handle stat %+v", di)
	}
	must(t, dh.Close())

	// Trailing slash: must be a directory.
	_, err = m.OpenFile(bg, P("f/"), os.O_RDONLY, 0)
	wantCode(t, err, vfs.CodeNotDir)
	_, err = m.OpenFile(bg, P("newfile/"), os.O_RDWR|os.O_CREATE, 0o644)
	wantCode(t, err, vfs.CodeIsDir)
	if exists(t, m, "newfile") {
		t.Fatal("trailing-slash create made a file")
	}
	dh, err = m.OpenFile(bg, P("d/"), os.O_RDONLY, 0)
	must(t, err)
	must(t, dh.Close())

	// Missing parent, file as parent.
	_, err = m.OpenFile(bg, P("nodir/x"), os.O_RDWR|os.O_CREATE, 0o644)
	wantCode(t, err, vfs.CodeNotFound)
	_, err = m.OpenFile(bg, P("f/x"), os.O_RDWR|os.O_CREATE, 0o644)
	wantCode(t, err, vfs.CodeNotDir)
}

func TestOpenCreatePermBits(t *testing.T) {
	m := New()
	f, err := m.OpenFile(bg, P("x"), os.O_WRONLY|os.O_CREATE, 0o4755|fs.ModeSetgid|fs.ModeDir|fs.ModeSymlink)
	must(t, err)
	must(t, f.Close())
	i, _ := m.Lstat(bg, P("x"))
	if i.Mode != 0o755|fs.ModeSetgid {
		t.Fatalf("mode %v: type bits must not leak from perm, setgid kept", i.Mode)
	}
}

func TestIndependentOffsets(t *testing.T) {
	m := New()
	writeFile(t, m, "f", "0123456789")
	a, err := m.OpenFile(bg, P("f"), os.O_RDWR, 0)
	must(t, err)
	defer a.Close()
	b, err := m.OpenFile(bg, P("f"), os.O_RDWR, 0)
	must(t, err)
	defer b.Close()
	buf := make([]byte, 3)
	if n, err := a.Read(buf); n != 3 || err != nil || string(buf) != "012" {
		t.Fatalf("a.Read = %d %v %q", n, err, buf)
	}
	if n, err := b.Read(buf[:2]); n != 2 || err != nil || string(buf[:2]) != "01" {
		t.Fatalf("b.Read = %d %v %q", n, err, buf[:2])
	}
	if _, err := b.Write([]byte("XY")); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Read(buf); n != 3 || err != nil || string(buf) != "Y45" {
		t.Fatalf("a sees %q (%d %v), want Y45", buf, n, err)
	}
}

func TestAppend(t *testing.T) {
	m := New()
	writeFile(t, m, "log", "a")
	x, err := m.OpenFile(bg, P("log"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	y, err := m.OpenFile(bg, P("log"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	// Seeking does not matter to an O_APPEND write.
	if _, err := x.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		f vfs.File
		s string
	}{{x, "b"}, {y, "c"}, {x, "d"}} {
		if _, err := io.WriteString(w.f, w.s); err != nil {
			t.Fatal(err)
		}
	}
	if got := readFile(t, m, "log"); got != "abcd" {
		t.Fatalf("got %q", got)
	}
	// The handle offset follows the write.
	if off, _ := x.Seek(0, io.SeekCurrent); off != 4 {
		t.Fatalf("offset after append %d", off)
	}
	_, err = x.WriteAt([]byte("z"), 0)
	wantCode(t, err, vfs.CodeInvalidPath)
	must(t, x.Close())
	must(t, y.Close())
}

func TestHandlePermissions(t *testing.T) {
	m := New()
	writeFile(t, m, "f", "abc")
	r, err := m.OpenFile(bg, P("f"), os.O_RDONLY, 0)
	must(t, err)
	defer r.Close()
	_, err = r.Write([]byte("x"))
	wantCode(t, err, vfs.CodePermission)
	_, err = r.WriteAt([]byte("x"), 0)
	wantCode(t, err, vfs.CodePermission)
	wantCode(t, r.Truncate(0), vfs.CodePermission)

	w, err := m.OpenFile(bg, P("f"), os.O_WRONLY, 0)
	must(t, err)
	defer w.Close()
	_, err = w.Read(make([]byte, 1))
	wantCode(t, err, vfs.CodePermission)
	_, err = w.ReadAt(make([]byte, 1), 0)
	wantCode(t, err, vfs.CodePermission)
	if got := readFile(t, m, "f"); got != "abc" {
		t.Fatalf("contents changed: %q", got)
	}
}

func TestReadAtWriteAtSeek(t *testing.T) {
	m := New()
	f, err := m.OpenFile(bg, P("f"), os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	defer f.Close()

	// Writing past EOF zero-fills the gap.
	if n, err := f.WriteAt([]byte("xy"), 5); n != 2 || err != nil {
		t.Fatalf("WriteAt = %d, %v", n, err)
	}
	buf := make([]byte, 10)
	n, err := f.ReadAt(buf, 0)
	if n != 7 || err != io.EOF || !bytes.Equal(buf[:7], []byte("\x00\x00\x00\x00\x00xy")) {
		t.Fatalf("ReadAt = %d %v %q", n, err, buf[:n])
	}
	// WriteAt does not move the offset.
	if off, _ := f.Seek(0, io.SeekCurrent); off != 0 {
		t.Fatalf("offset moved to %d", off)
	}
	n, err = f.ReadAt(buf[:3], 4)
	if n != 3 || err != nil || string(buf[:3]) != "\x00xy" {
		t.Fatalf("exact ReadAt = %d %v %q", n, err, buf[:3])
	}
	n, err = f.ReadAt(buf, 7)
	if n != 0 || err != io.EOF {
		t.Fatalf("ReadAt at EOF = %d %v", n, err)
	}
	n, err = f.ReadAt(buf, 100)
	if n != 0 || err != io.EOF {
		t.Fatalf("ReadAt past EOF = %d %v", n, err)
	}
	_, err = f.ReadAt(buf, -1)
	wantCode(t, err, vfs.CodeInvalidPath)
	_, err = f.WriteAt(buf, -1)
	wantCode(t, err, vfs.CodeInvalidPath)

	// Seek.
	if off, err := f.Seek(-2, io.SeekEnd); off != 5 || err != nil {
		t.Fatalf("Seek end = %d %v", off, err)
	}
	if off, err := f.Seek(1, io.SeekCurrent); off != 6 || err != nil {
		t.Fatalf("Seek cur = %d %v", off, err)
	}
	if n, err := f.Read(buf); n != 1 || err != nil || buf[0] != 'y' {
		t.Fatalf("Read after seek = %d %v", n, err)
	}
	if n, err := f.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read at EOF = %d %v", n, err)
	}
	if n, err := f.Read(nil); n != 0 || err != nil {
		t.Fatalf("empty Read at EOF = %d %v", n, err)
	}
	_, err = f.Seek(-1, io.SeekStart)
	wantCode(t, err, vfs.CodeInvalidPath)
	_, err = f.Seek(0, 7)
	wantCode(t, err, vfs.CodeInvalidPath)
	// Seek past the end then write: zero-filled.
	if _, err := f.Seek(10, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("z")); err != nil {
		t.Fatal(err)
	}
	all := make([]byte, 11)
	if n, err := f.ReadAt(all, 0); n != 11 || err != nil {
		t.Fatalf("ReadAt all = %d %v", n, err)
	}
	if string(all) != "\x00\x00\x00\x00\x00xy\x00\x00\x00z" {
		t.Fatalf("contents %q", all)
	}
	// A zero-length write past EOF does not extend the file.
	if _, err := f.WriteAt(nil, 100); err != nil {
		t.Fatal(err)
	}
	if i, _ := f.Stat(); i.Size != 11 {
		t.Fatalf("size %d after empty WriteAt", i.Size)
	}
}

func TestTruncate(t *testing.T) {
	m := New()
	writeFile(t, m, "f", "abcdefgh")
	f, err := m.OpenFile(bg, P("f"), os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	must(t, f.Truncate(3))
	// Growing again must not resurrect the old bytes.
	must(t, f.Truncate(6))
	buf := make([]byte, 6)
	if n, err := f.ReadAt(buf, 0); n != 6 || err != nil || string(buf) != "abc\x00\x00\x00" {
		t.Fatalf("after shrink+grow: %q (%d %v)", buf, n, err)
	}
	// Same for writes past the end within the old capacity.
	must(t, f.Truncate(1))
	if _, err := f.WriteAt([]byte("Z"), 4); err != nil {
		t.Fatal(err)
	}
	buf = buf[:5]
	if n, err := f.ReadAt(buf, 0); n != 5 || err != nil || string(buf) != "a\x00\x00\x00Z" {
		t.Fatalf("after shrink+write: %q (%d %v)", buf, n, err)
	}
	wantCode(t, f.Truncate(-1), vfs.CodeInvalidPath)
	// Truncate keeps the offset.
	if _, err := f.Seek(5, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	must(t, f.Truncate(0))
	if off, _ := f.Seek(0, io.SeekCurrent); off != 5 {
		t.Fatalf("offset %d", off)
	}
	if u := dataUsage(m); u != 0 {
		t.Fatalf("data usage %d", u)
	}
}

func TestLargeShrinkReleasesMemory(t *testing.T) {
	m := New()
	f, err := m.OpenFile(bg, P("f"), os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	defer f.Close()
	must(t, f.Truncate(1<<20))
	if _, err := f.WriteAt([]byte("abc"), 0); err != nil {
		t.Fatal(err)
	}
	must(t, f.Truncate(3))
	h := f.(*handle)
	h.n.mu.RLock()
	c := cap(h.n.data)
	h.n.mu.RUnlock()
	if c >= 1<<20 {
		t.Fatalf("capacity %d kept after shrinking to 3 bytes", c)
	}
	buf := make([]byte, 3)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "abc" {
		t.Fatalf("contents %q %v", buf, err)
	}
}

func TestClosedHandle(t *testing.T) {
	m := New()
	writeFile(t, m, "f", "abc")
	f, err := m.OpenFile(bg, P("f"), os.O_RDWR, 0)
	must(t, err)
	must(t, f.Close())
	wantCode(t, f.Close(), vfs.CodeClosed)
	_, err = f.Read(make([]byte, 1))
	wantCode(t, err, vfs.CodeClosed)
	_, err = f.ReadAt(make([]byte, 1), 0)
	wantCode(t, err, vfs.CodeClosed)
	_, err = f.Write([]byte("x"))
	wantCode(t, err, vfs.CodeClosed)
	_, err = f.WriteAt([]byte("x"), 0)
	wantCode(t, err, vfs.CodeClosed)
	_, err = f.Seek(0, io.SeekStart)
	wantCode(t, err, vfs.CodeClosed)
	_, err = f.Stat()
	wantCode(t, err, vfs.CodeClosed)
	wantCode(t, f.Truncate(0), vfs.CodeClosed)
	wantCode(t, f.Sync(), vfs.CodeClosed)
	if !errors.Is(f.Sync(), fs.ErrClosed) {
		t.Fatal("closed should match fs.ErrClosed")
	}
	if got := readFile(t, m, "f"); got != "abc" {
		t.Fatalf("contents %q", got)
	}
}

func TestHandleErrorsCarryPath(t *testing.T) {
	m := New()
	mkdirs(t, m, "d")
	writeFile(t, m, "d/f", "abc")
	f, err := m.OpenFile(bg, P("d/f"), os.O_RDONLY, 0)
	must(t, err)
	_, err = f.Write([]byte("x"))
	var e *vfs.Error
	if !errors.As(err, &e) || e.Path != "d/f" || e.Op != "write" {
		t.Fatalf("error %#v", err)
	}
	must(t, f.Close())
}

func TestMkdir(t *testing.T) {
	m := New(WithClock(fakeClock()))
	must(t, m.Mkdir(bg, P("a"), 0o750))
	i, err := m.Stat(bg, P("a"))
	must(t, err)
	if i.Mode != fs.ModeDir|0o750 || i.Nlink != 2 {
		t.Fatalf("info %+v", i)
	}
	wantCode(t, m.Mkdir(bg, P("a"), 0o755), vfs.CodeExists)
	wantCode(t, m.Mkdir(bg, P("a/"), 0o755), vfs.CodeExists)
	wantCode(t, m.Mkdir(bg, P("x/y"), 0o755), vfs.CodeNotFound)
	writeFile(t, m, "f", "")
	wantCode(t, m.Mkdir(bg, P("f"), 0o755), vfs.CodeExists)
	wantCode(t, m.Mkdir(bg, P("f/y"), 0o755), vfs.CodeNotDir)
	must(t, m.Symlink(bg, "nowhere", P("dangling")))
	wantCode(t, m.Mkdir(bg, P("dangling"), 0o755), vfs.CodeExists)
	wantCode(t, m.Mkdir(bg, P("dangling/"), 0o755), vfs.CodeExists)
	if exists(t, m, "nowhere") {
		t.Fatal("mkdir followed a dangling link")
	}
	must(t, m.Mkdir(bg, P("b/"), 0o755))
	// Parent link count counts subdirectories.
	must(t, m.Mkdir(bg, P("a/s1"), 0o755))
	must(t, m.Mkdir(bg, P("a/s2"), 0o755))
	writeFile(t, m, "a/file", "")
	if i, _ := m.Stat(bg, P("a")); i.Nlink != 4 || i.Size != 3 {
		t.Fatalf("a: nlink %d size %d, want 4 and 3", i.Nlink, i.Size)
	}
	// Intermediate symlink followed.
	must(t, m.Symlink(bg, "a", P("la")))
	must(t, m.Mkdir(bg, P("la/s3"), 0o755))
	if !exists(t, m, "a/s3") {
		t.Fatal("mkdir through link")
	}
}

func TestDirMtime(t *testing.T) {
	m := New(WithClock(fakeClock()))
	mkdirs(t, m, "d", "e")
	mt := func(p string) time.Time {
		t.Helper()
		i, err := m.Stat(bg, P(p))
		must(t, err)
		return i.ModTime
	}
	check := func(what string, p string, fn func()) {
		t.Helper()
		before := mt(p)
		fn()
		if !mt(p).After(before) {
			t.Fatalf("%s did not advance mtime of %s", what, p)
		}
	}
	check("create", "d", func() { writeFile(t, m, "d/f", "x") })
	check("mkdir", "d", func() { mkdirs(t, m, "d/sub") })
	check("symlink", "d", func() { must(t, m.Symlink(bg, "f", P("d/l"))) })
	check("link", "d", func() { must(t, m.Link(bg, P("d/f"), P("d/h"))) })
	check("remove", "d", func() { must(t, m.Remove(bg, P("d/h"))) })
	check("rename out (source)", "d", func() { must(t, m.Rename(bg, P("d/l"), P("e/l"), 0)) })
	check("rename in (dest)", "d", func() { must(t, m.Rename(bg, P("e/l"), P("d/l2"), 0)) })
	// Writing a file changes the file's mtime, not the directory's.
	before := mt("d")
	check("write", "d/f", func() { writeFile(t, m, "d/f", "yy") })
	if !mt("d").Equal(before) {
		t.Fatal("writing a file changed its directory's mtime")
	}
}

func TestRemove(t *testing.T) {
	m := New()
	mkdirs(t, m, "d", "d/sub")
	writeFile(t, m, "d/f", "x")
	wantCode(t, m.Remove(bg, P("d")), vfs.CodeNotEmpty)
	if !errors.Is(m.Remove(bg, P("d")), fs.ErrExist) {
		t.Fatal("not_empty should match fs.ErrExist")
	}
	wantCode(t, m.Remove(bg, P("nope")), vfs.CodeNotFound)
	wantCode(t, m.Remove(bg, vfs.Root), vfs.CodeInvalidPath)
	wantCode(t, m.Remove(bg, P("d/f/")), vfs.CodeNotDir)
	must(t, m.Remove(bg, P("d/f")))
	must(t, m.Remove(bg, P("d/sub/")))
	if i, _ := m.Stat(bg, P("d")); i.Nlink != 2 || i.Size != 0 {
		t.Fatalf("d after removals: %+v", i)
	}
	must(t, m.Remove(bg, P("d")))
	if exists(t, m, "d") {
		t.Fatal("d still exists")
	}
	if i, _ := m.Stat(bg, vfs.Root); i.Nlink != 2 {
		t.Fatalf("root nlink %d", i.Nlink)
	}

	// Remove does not follow a final symlink.
	mkdirs(t, m, "t")
	writeFile(t, m, "t/x", "")
	must(t, m.Symlink(bg, "t", P("lt")))
	wantCode(t, m.Remove(bg, P("lt/")), vfs.CodeNotDir)
	must(t, m.Remove(bg, P("lt")))
	if !exists(t, m, "t/x") {
		t.Fatal("removing a link removed its target")
	}
	// A dangling symlink can be removed.
	must(t, m.Symlink(bg, "gone", P("dl")))
	must(t, m.Remove(bg, P("dl")))
}

func TestRemoveOpenFile(t *testing.T) {
	m := New()
	writeFile(t, m, "f", "data")
	h, err := m.OpenFile(bg, P("f"), os.O_RDWR, 0)
	must(t, err)
	must(t, m.Remove(bg, P("f")))
	if exists(t, m, "f") {
		t.Fatal("f still exists")
	}
	// The handle keeps working on the unlinked inode.
	if _, err := h.Seek(0, io.SeekEnd); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Write([]byte("+more")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 9)
	if n, err := h.ReadAt(buf, 0); n != 9 || err != nil || string(buf) != "data+more" {
		t.Fatalf("ReadAt = %d %v %q", n, err, buf)
	}
	i, err := h.Stat()
	must(t, err)
	if i.Nlink != 0 || i.Size != 9 {
		t.Fatalf("unlinked stat %+v", i)
	}
	if m.Usage() != NodeCharge+9 {
		t.Fatalf("usage %d while the unlinked file is open", m.Usage())
	}
	// A new file under the old name is a different inode.
	writeFile(t, m, "f", "new")
	if _, err := h.ReadAt(buf, 0); err != nil || string(buf) != "data+more" {
		t.Fatalf("old handle sees %q", buf)
	}
	must(t, h.Close())
	if want := NodeCharge + entryCharge("f") + 3; m.Usage() != want {
		t.Fatalf("usage %d after last close, want %d (the new f only)", m.Usage(), want)
	}
}

func TestRenameBasics(t *testing.T) {
	m := New()
	mkdirs(t, m, "a", "a/b", "c")
	writeFile(t, m, "a/b/f", "deep")
	writeFile(t, m, "x", "xx")

	// File rename.
	must(t, m.Rename(bg, P("x"), P("c/y"), 0))
	if exists(t, m, "x") || readFile(t, m, "c/y") != "xx" {
		t.Fatal("file rename")
	}
	// Directory rename carries its children.
	must(t, m.Rename(bg, P("a"), P("c/a2"), 0))
	if got := readFile(t, m, "c/a2/b/f"); got != "deep" {
		t.Fatalf("child after dir rename: %q", got)
	}
	if exists(t, m, "a") {
		t.Fatal("a still exists")
	}
	if i, _ := m.Stat(bg, P("c")); i.Nlink != 3 {
		t.Fatalf("c nlink %d, want 3", i.Nlink)
	}
	if i, _ := m.Stat(bg, vfs.Root); i.Nlink != 3 {
		t.Fatalf("root nlink %d, want 3", i.Nlink)
	}
	// Missing source, missing destination parent.
	wantCode(t, m.Rename(bg, P("nope"), P("z"), 0), vfs.CodeNotFound)
	wantCode(t, m.Rename(bg, P("c/y"), P("nodir/z"), 0), vfs.CodeNotFound)
	// Same path: no-op.
	must(t, m.Rename(bg, P("c/y"), P("c/y"), 0))
	must(t, m.Rename(bg, P("c"), P("c"), 0))
	if readFile(t, m, "c/y") != "xx" {
		t.Fatal("self-rename lost data")
	}
	// Root.
	wantCode(t, m.Rename(bg, vfs.Root, P("z"), 0), vfs.CodeInvalidPath)
	wantCode(t, m.Rename(bg, P("c"), vfs.Root, 0), vfs.CodeInvalidPath)
	// Invalid flags.
	wantCode(t, m.Rename(bg, P("c/y"), P("z"), vfs.RenameExchange|vfs.RenameNoReplace), vfs.CodeInvalidPath)
	wantCode(t, m.Rename(bg, P("c/y"), P("z"), 1<<7), vfs.CodeInvalidPath)
	// Errors carry both paths.
	err := m.Rename(bg, P("nope"), P("zz"), 0)
	var e *vfs.Error
	if !errors.As(err, &e) || e.Path != "nope" || e.Dest != "zz" || e.Op != "rename" {
		t.Fatalf("error %#v", err)
	}
	err = m.Rename(bg, P("c/y"), P("nodir/z"), 0)
	if !errors.As(err, &e) || e.Path != "c/y" || e.Dest != "nodir/z" {
		t.Fatalf("error %#v", err)
	}
}

func TestRenameReplace(t *testing.T) {
	m := New()
	mkdirs(t, m, "d1", "d2", "full", "full/x", "empty")
	writeFile(t, m, "f1", "one")
	writeFile(t, m, "f2", "two")

	// File over file replaces.
	must(t, m.Rename(bg, P("f1"), P("f2"), 0))
	if exists(t, m, "f1") || readFile(t, m, "f2") != "one" {
		t.Fatal("file over file")
	}
	if u := dataUsage(m); u != 3 {
		t.Fatalf("data usage %d, replaced file not released", u)
	}
	// Dir over non-empty dir.
	wantCode(t, m.Rename(bg, P("d1"), P("full"), 0), vfs.CodeNotEmpty)
	// Dir over empty dir replaces.
	writeFile(t, m, "d1/in", "i")
	must(t, m.Rename(bg, P("d1"), P("empty"), 0))
	if exists(t, m, "d1") || readFile(t, m, "empty/in") != "i" {
		t.Fatal("dir over empty dir")
	}
	if i, _ := m.Stat(bg, vfs.Root); i.Nlink != 2+3 {
		t.Fatalf("root nlink %d, want 5", i.Nlink)
	}
	// File over dir, dir over file.
	wantCode(t, m.Rename(bg, P("f2"), P("d2"), 0), vfs.CodeIsDir)
	wantCode(t, m.Rename(bg, P("d2"), P("f2"), 0), vfs.CodeNotDir)
	// Trailing slash on a file.
	wantCode(t, m.Rename(bg, P("f2"), P("g/"), 0), vfs.CodeNotDir)
	wantCode(t, m.Rename(bg, P("f2/"), P("g"), 0), vfs.CodeNotDir)
	must(t, m.Rename(bg, P("d2/"), P("d3/"), 0))
	if !exists(t, m, "d3") {
		t.Fatal("d2/ -> d3/")
	}
	// A symlink is renamed, not its target.
	must(t, m.Symlink(bg, "f2", P("l")))
	must(t, m.Rename(bg, P("l"), P("l2"), 0))
	if s, err := m.Readlink(bg, P("l2")); err != nil || s != "f2" {
		t.Fatalf("readlink l2 = %q %v", s, err)
	}
	if readFile(t, m, "f2") != "one" {
		t.Fatal("target changed")
	}
	// Renaming over a symlink replaces the link, not the target.
	writeFile(t, m, "n", "new")
	must(t, m.Rename(bg, P("n"), P("l2"), 0))
	if i, _ := m.Lstat(bg, P("l2")); i.Mode.Type() != 0 {
		t.Fatalf("l2 is %v", i.Mode)
	}
	if readFile(t, m, "f2") != "one" {
		t.Fatal("rename over symlink wrote through it")
	}
	// Two hard links to one file: rename is a no-op, both names stay.
	must(t, m.Link(bg, P("f2"), P("h")))
	must(t, m.Rename(bg, P("f2"), P("h"), 0))
	if !exists(t, m, "f2") || !exists(t, m, "h") {
		t.Fatal("rename between hard links removed a name")
	}
}

func TestRenameIntoSubtree(t *testing.T) {
	m := New()
	mkdirs(t, m, "a", "a/b", "a/b/c")
	wantCode(t, m.Rename(bg, P("a"), P("a/b/c/a"), 0), vfs.CodeInvalidPath)
	wantCode(t, m.Rename(bg, P("a"), P("a/x"), 0), vfs.CodeInvalidPath)
	wantCode(t, m.Rename(bg, P("a/b"), P("a/b/c/d"), 0), vfs.CodeInvalidPath)
	// Via a symlink into the subtree.
	must(t, m.Symlink(bg, "a/b", P("lb")))
	wantCode(t, m.Rename(bg, P("a"), P("lb/z"), 0), vfs.CodeInvalidPath)
	// Over an empty directory inside the subtree.
	wantCode(t, m.Rename(bg, P("a"), P("a/b/c"), 0), vfs.CodeInvalidPath)
	// Exchange into the subtree.
	wantCode(t, m.Rename(bg, P("a"), P("a/b/c"), vfs.RenameExchange), vfs.CodeInvalidPath)
	wantCode(t, m.Rename(bg, P("a/b/c"), P("a"), vfs.RenameExchange), vfs.CodeInvalidPath)
	// The tree is intact.
	if !exists(t, m, "a/b/c") {
		t.Fatal("tree damaged")
	}
	// Moving a directory up out of itself is fine.
	must(t, m.Rename(bg, P("a/b/c"), P("c"), 0))
	must(t, m.Rename(bg, P("a/b"), P("c/b"), 0))
	if !exists(t, m, "c/b") || exists(t, m, "a/b") {
		t.Fatal("moves")
	}
}

func TestRenameNoReplace(t *testing.T) {
	m := New()
	writeFile(t, m, "a", "A")
	writeFile(t, m, "b", "B")
	must(t, m.Symlink(bg, "nowhere", P("dl")))
	wantCode(t, m.Rename(bg, P("a"), P("b"), vfs.RenameNoReplace), vfs.CodeExists)
	wantCode(t, m.Rename(bg, P("a"), P("dl"), vfs.RenameNoReplace), vfs.CodeExists)
	if readFile(t, m, "b") != "B" || readFile(t, m, "a") != "A" {
		t.Fatal("NoReplace changed something")
	}
	must(t, m.Rename(bg, P("a"), P("c"), vfs.RenameNoReplace))
	if exists(t, m, "a") || readFile(t, m, "c") != "A" {
		t.Fatal("NoReplace to a new name")
	}
}

func TestRenameExchange(t *testing.T) {
	m := New()
	mkdirs(t, m, "d", "p", "q")
	writeFile(t, m, "d/in", "inside")
	writeFile(t, m, "p/f", "file")
	must(t, m.Rename(bg, P("d"), P("p/f"), vfs.RenameExchange))
	if readFile(t, m, "d") != "file" || readFile(t, m, "p/f/in") != "inside" {
		t.Fatal("exchange of file and dir")
	}
	if i, _ := m.Stat(bg, P("p")); i.Nlink != 3 {
		t.Fatalf("p nlink %d, want 3 (now holds a dir)", i.Nlink)
	}
	if i, _ := m.Stat(bg, vfs.Root); i.Nlink != 4 {
		t.Fatalf("root nlink %d, want 4 (lost a dir)", i.Nlink)
	}
	// The moved directory's parent is updated: moving it into itself is caught.
	wantCode(t, m.Rename(bg, P("p"), P("p/f/x"), 0), vfs.CodeInvalidPath)
	wantCode(t, m.Rename(bg, P("d"), P("nope"), vfs.RenameExchange), vfs.CodeNotFound)
	wantCode(t, m.Rename(bg, P("nope"), P("d"), vfs.RenameExchange), vfs.CodeNotFound)
	// Exchange with a symlink swaps the link itself.
	must(t, m.Symlink(bg, "p", P("l")))
	must(t, m.Rename(bg, P("l"), P("q"), vfs.RenameExchange))
	if i, _ := m.Lstat(bg, P("q")); i.Mode.Type() != fs.ModeSymlink {
		t.Fatalf("q is %v", i.Mode)
	}
	if i, _ := m.Lstat(bg, P("l")); !i.Mode.IsDir() {
		t.Fatalf("l is %v", i.Mode)
	}
	// Self-exchange is a no-op.
	must(t, m.Rename(bg, P("d"), P("d"), vfs.RenameExchange))
	if readFile(t, m, "d") != "file" {
		t.Fatal("self exchange")
	}
}

func TestSymlinks(t *testing.T) {
	m := New()
	mkdirs(t, m, "d", "d/e")
	writeFile(t, m, "d/e/f", "target")
	must(t, m.Symlink(bg, "d/e/f", P("lf")))
	must(t, m.Symlink(bg, "e", P("d/le")))
	must(t, m.Symlink(bg, "../../lf", P("d/e/up")))

	if got := readFile(t, m, "lf"); got != "target" {
		t.Fatalf("through lf: %q", got)
	}
	if got := readFile(t, m, "d/le/f"); got != "target" {
		t.Fatalf("through intermediate link: %q", got)
	}
	if got := readFile(t, m, "d/e/up"); got != "target" {
		t.Fatalf("through a chain: %q", got)
	}
	li, err := m.Lstat(bg, P("lf"))
	must(t, err)
	if li.Mode.Type() != fs.ModeSymlink || li.Size != int64(len("d/e/f")) || li.Name != "lf" {
		t.Fatalf("lstat %+v", li)
	}
	si, err := m.Stat(bg, P("lf"))
	must(t, err)
	if si.Mode.Type() != 0 || si.Size != 6 || si.Name != "lf" {
		t.Fatalf("stat %+v", si)
	}
	// A trailing slash follows the link for Lstat.
	if i, err := m.Lstat(bg, P("d/le/")); err != nil || !i.Mode.IsDir() {
		t.Fatalf("lstat d/le/ = %+v %v", i, err)
	}
	if s, err := m.Readlink(bg, P("d/e/up")); err != nil || s != "../../lf" {
		t.Fatalf("readlink = %q %v", s, err)
	}
	_, err = m.Readlink(bg, P("d/e/f"))
	wantCode(t, err, vfs.CodeInvalidPath)
	_, err = m.Readlink(bg, P("d/nope"))
	wantCode(t, err, vfs.CodeNotFound)
	if es, err := m.ReadDir(bg, P("d/le")); err != nil || !slices.Equal(names(es), []string{"f", "up"}) {
		t.Fatalf("readdir through link = %v %v", es, err)
	}

	wantCode(t, m.Symlink(bg, "x", P("lf")), vfs.CodeExists)
	wantCode(t, m.Symlink(bg, "", P("empty")), vfs.CodeInvalidPath)
	wantCode(t, m.Symlink(bg, "a\x00b", P("nul")), vfs.CodeInvalidPath)
	wantCode(t, m.Symlink(bg, strings.Repeat("a/", vfs.MaxPathLen/2+1), P("long")), vfs.CodeInvalidPath)
	wantCode(t, m.Symlink(bg, "x", P("nodir/l")), vfs.CodeNotFound)
	wantCode(t, m.Symlink(bg, "x", P("newl/")), vfs.CodeNotDir)
	must(t, m.Symlink(bg, strings.Repeat("a", vfs.MaxPathLen), P("maxlen")))

	// Dangling: Stat fails, Lstat works.
	must(t, m.Symlink(bg, "missing", P("dang")))
	_, err = m.Stat(bg, P("dang"))
	wantCode(t, err, vfs.CodeNotFound)
	if _, err := m.Lstat(bg, P("dang")); err != nil {
		t.Fatal(err)
	}
	_, err = m.OpenFile(bg, P("dang"), os.O_RDONLY, 0)
	wantCode(t, err, vfs.CodeNotFound)
}

func TestSymlinkConfinement(t *testing.T) {
	m := New()
	mkdirs(t, m, "d")
	writeFile(t, m, "secret", "s")
	must(t, m.Symlink(bg, "/etc/passwd", P("abs")))
	must(t, m.Symlink(bg, "../../x", P("d/up2")))
	must(t, m.Symlink(bg, "..", P("d/up1")))
	must(t, m.Symlink(bg, "loop", P("loop")))
	must(t, m.Symlink(bg, "b", P("a")))
	must(t, m.Symlink(bg, "a", P("b")))

	for _, p := range []string{"abs", "abs/x", "d/up2", "d/up2/y"} {
		_, err := m.Stat(bg, P(p))
		wantCode(t, err, vfs.CodeOutside)
		_, err = m.OpenFile(bg, P(p), os.O_RDWR|os.O_CREATE, 0o644)
		wantCode(t, err, vfs.CodeOutside)
	}
	for _, p := range []string{"loop", "a", "loop/x", "a/"} {
		_, err := m.Stat(bg, P(p))
		wantCode(t, err, vfs.CodeTooManyLinks)
	}
	// ".." inside a target is physical and stays beneath the root.
	if got := readFile(t, m, "d/up1/secret"); got != "s" {
		t.Fatalf("d/up1/secret = %q", got)
	}
	must(t, m.Mkdir(bg, P("d/up1/new"), 0o755))
	if !exists(t, m, "new") {
		t.Fatal("mkdir through .. link")
	}
	// Operations that do not follow the final link act on the link.
	if _, err := m.Lstat(bg, P("abs")); err != nil {
		t.Fatal(err)
	}
	if s, err := m.Readlink(bg, P("abs")); err != nil || s != "/etc/passwd" {
		t.Fatalf("readlink = %q %v", s, err)
	}
	wantCode(t, m.Chmod(bg, P("abs"), 0o600), vfs.CodeOutside)
	wantCode(t, m.Link(bg, P("abs/x"), P("h")), vfs.CodeOutside)
	wantCode(t, m.Rename(bg, P("secret"), P("abs/x"), 0), vfs.CodeOutside)
	must(t, m.Remove(bg, P("abs")))
}

func TestCreateThroughDanglingSymlink(t *testing.T) {
	m := New()
	mkdirs(t, m, "d")
	must(t, m.Symlink(bg, "d/target", P("dl")))
	must(t, m.Symlink(bg, "../../outside", P("d/esc")))
	must(t, m.Symlink(bg, "nodir/x", P("deep")))

	// O_CREATE follows the dangling link and creates its target.
	f, err := m.OpenFile(bg, P("dl"), os.O_WRONLY|os.O_CREATE, 0o640)
	must(t, err)
	if _, err := f.Write([]byte("via link")); err != nil {
		t.Fatal(err)
	}
	must(t, f.Close())
	if got := readFile(t, m, "d/target"); got != "via link" {
		t.Fatalf("target = %q", got)
	}
	if i, _ := m.Lstat(bg, P("dl")); i.Mode.Type() != fs.ModeSymlink {
		t.Fatal("link replaced")
	}
	// Escaping target: refused, nothing created.
	_, err = m.OpenFile(bg, P("d/esc"), os.O_WRONLY|os.O_CREATE, 0o644)
	wantCode(t, err, vfs.CodeOutside)
	if exists(t, m, "outside") {
		t.Fatal("created outside")
	}
	// Missing directory in the target.
	_, err = m.OpenFile(bg, P("deep"), os.O_WRONLY|os.O_CREATE, 0o644)
	wantCode(t, err, vfs.CodeNotFound)
	// O_EXCL never follows: a dangling link is an existing name.
	must(t, m.Symlink(bg, "d/other", P("dl2")))
	_, err = m.OpenFile(bg, P("dl2"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	wantCode(t, err, vfs.CodeExists)
	if exists(t, m, "d/other") {
		t.Fatal("O_EXCL followed a dangling link")
	}
	// A link target with an over-long component cannot be created.
	must(t, m.Symlink(bg, strings.Repeat("n", 300), P("longname")))
	_, err = m.OpenFile(bg, P("longname"), os.O_WRONLY|os.O_CREATE, 0o644)
	wantCode(t, err, vfs.CodeInvalidPath)
}

func TestHardLinks(t *testing.T) {
	m := New()
	mkdirs(t, m, "d")
	writeFile(t, m, "f", "abc")
	must(t, m.Link(bg, P("f"), P("d/g")))
	if i, _ := m.Stat(bg, P("f")); i.Nlink != 2 {
		t.Fatalf("nlink %d", i.Nlink)
	}
	writeFile(t, m, "d/g", "changed")
	if got := readFile(t, m, "f"); got != "changed" {
		t.Fatalf("shared data: %q", got)
	}
	if u := dataUsage(m); u != 7 {
		t.Fatalf("data usage %d, links must count once", u)
	}
	must(t, m.Remove(bg, P("f")))
	if got := readFile(t, m, "d/g"); got != "changed" {
		t.Fatalf("after removing one name: %q", got)
	}
	if i, _ := m.Stat(bg, P("d/g")); i.Nlink != 1 {
		t.Fatalf("nlink %d", i.Nlink)
	}
	if want := DirCharge + entryCharge("d") + NodeCharge + entryCharge("g") + 7; m.Usage() != want {
		t.Fatalf("usage %d, want %d", m.Usage(), want)
	}

	wantCode(t, m.Link(bg, P("d"), P("d2")), vfs.CodePermission)
	wantCode(t, m.Link(bg, P("nope"), P("x")), vfs.CodeNotFound)
	wantCode(t, m.Link(bg, P("d/g"), P("d/g")), vfs.CodeExists)
	wantCode(t, m.Link(bg, P("d/g"), P("nodir/x")), vfs.CodeNotFound)
	wantCode(t, m.Link(bg, P("d/g"), P("x/")), vfs.CodeNotDir)
	wantCode(t, m.Link(bg, P("d/g/"), P("x")), vfs.CodeNotDir)
	// Linking a symlink links the symlink itself.
	must(t, m.Symlink(bg, "d/g", P("sl")))
	must(t, m.Link(bg, P("sl"), P("sl2")))
	if i, _ := m.Lstat(bg, P("sl2")); i.Mode.Type() != fs.ModeSymlink || i.Nlink != 2 {
		t.Fatalf("sl2 %+v", i)
	}
	if i, _ := m.Stat(bg, P("d/g")); i.Nlink != 1 {
		t.Fatalf("target nlink %d", i.Nlink)
	}
	err := m.Link(bg, P("nope"), P("x"))
	var e *vfs.Error
	if !errors.As(err, &e) || e.Path != "nope" || e.Dest != "x" || e.Op != "link" {
		t.Fatalf("error %#v", err)
	}
	must(t, m.Remove(bg, P("d/g")))
	if want := DirCharge + entryCharge("d") + NodeCharge + 3 + entryCharge("sl") + entryCharge("sl2"); m.Usage() != want {
		t.Fatalf("usage %d after last link removed, want %d (d and the symlink sl, sl2)", m.Usage(), want)
	}
}

func TestChmodChtimes(t *testing.T) {
	m := New()
	mkdirs(t, m, "d")
	writeFile(t, m, "f", "")
	must(t, m.Symlink(bg, "f", P("l")))
	must(t, m.Chmod(bg, P("f"), 0o600))
	must(t, m.Chmod(bg, P("d"), 0o700|fs.ModeSticky|fs.ModeSetgid))
	if i, _ := m.Stat(bg, P("f")); i.Mode != 0o600 {
		t.Fatalf("f mode %v", i.Mode)
	}
	if i, _ := m.Stat(bg, P("d")); i.Mode != fs.ModeDir|fs.ModeSticky|fs.ModeSetgid|0o700 {
		t.Fatalf("d mode %v", i.Mode)
	}
	// Type bits in the argument are ignored; Chmod follows links.
	must(t, m.Chmod(bg, P("l"), fs.ModeDir|fs.ModeSetuid|0o751))
	if i, _ := m.Stat(bg, P("f")); i.Mode != fs.ModeSetuid|0o751 {
		t.Fatalf("f mode via link %v", i.Mode)
	}
	if i, _ := m.Lstat(bg, P("l")); i.Mode != fs.ModeSymlink|0o777 {
		t.Fatalf("link mode %v", i.Mode)
	}
	wantCode(t, m.Chmod(bg, P("nope"), 0o600), vfs.CodeNotFound)

	when := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)
	must(t, m.Chtimes(bg, P("l"), time.Time{}, when))
	if i, _ := m.Stat(bg, P("f")); !i.ModTime.Equal(when) {
		t.Fatalf("mtime %v", i.ModTime)
	}
	// A zero mtime leaves it unchanged.
	must(t, m.Chtimes(bg, P("f"), when, time.Time{}))
	if i, _ := m.Stat(bg, P("f")); !i.ModTime.Equal(when) {
		t.Fatalf("mtime changed to %v", i.ModTime)
	}
	wantCode(t, m.Chtimes(bg, P("nope"), when, when), vfs.CodeNotFound)
}

func TestReadDir(t *testing.T) {
	m := New()
	mkdirs(t, m, "d", "d/sub")
	for _, n := range []string{"c", "a", "b", "B"} {
		writeFile(t, m, "d/"+n, "")
	}
	must(t, m.Symlink(bg, "a", P("d/ln")))
	es, err := m.ReadDir(bg, P("d"))
	must(t, err)
	want := []vfs.DirEntry{{Name: "B"}, {Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "ln", Type: fs.ModeSymlink}, {Name: "sub", Type: fs.ModeDir}}
	if !slices.Equal(es, want) {
		t.Fatalf("ReadDir = %v, want %v", es, want)
	}
	// The caller owns the result.
	es[0].Name = "mutated"
	es2, _ := m.ReadDir(bg, P("d"))
	if es2[0].Name != "B" {
		t.Fatal("ReadDir result aliases the cache")
	}
	// The cache is invalidated by every change.
	writeFile(t, m, "d/aa", "")
	must(t, m.Remove(bg, P("d/b")))
	must(t, m.Rename(bg, P("d/c"), P("d/0"), 0))
	must(t, m.Rename(bg, P("d/sub"), P("moved"), 0))
	must(t, m.Link(bg, P("d/a"), P("d/z")))
	es, _ = m.ReadDir(bg, P("d"))
	if got := names(es); !slices.Equal(got, []string{"0", "B", "a", "aa", "ln", "z"}) {
		t.Fatalf("after changes: %v", got)
	}
	must(t, m.Rename(bg, P("d/ln"), P("moved"), vfs.RenameExchange))
	es, _ = m.ReadDir(bg, P("d"))
	if es[4] != (vfs.DirEntry{Name: "ln", Type: fs.ModeDir}) {
		t.Fatalf("after exchange: %v", es)
	}

	_, err = m.ReadDir(bg, P("d/a"))
	wantCode(t, err, vfs.CodeNotDir)
	_, err = m.ReadDir(bg, P("nope"))
	wantCode(t, err, vfs.CodeNotFound)
	mkdirs(t, m, "empty")
	es, err = m.ReadDir(bg, P("empty"))
	if err != nil || len(es) != 0 {
		t.Fatalf("empty dir: %v %v", es, err)
	}
}

func TestSub(t *testing.T) {
	m := New()
	mkdirs(t, m, "a", "a/b", "other")
	writeFile(t, m, "a/b/f", "in sub")
	writeFile(t, m, "a/x", "sibling")
	must(t, m.Symlink(bg, "../x", P("a/b/esc")))
	must(t, m.Symlink(bg, "f", P("a/b/ok")))

	sb, err := m.Sub(bg, P("a/b"))
	must(t, err)
	s := sb.(*FS)
	if got := readFile(t, s, "f"); got != "in sub" {
		t.Fatalf("sub read %q", got)
	}
	if got := readFile(t, s, "ok"); got != "in sub" {
		t.Fatalf("sub link %q", got)
	}
	// ".." above the sub's root is outside, even though it is inside m.
	_, err = s.Stat(bg, P("esc"))
	wantCode(t, err, vfs.CodeOutside)
	if i, err := s.Stat(bg, vfs.Root); err != nil || i.Name != "." || !i.Mode.IsDir() {
		t.Fatalf("sub root stat %+v %v", i, err)
	}
	// The sub's root cannot be removed or renamed through the sub.
	wantCode(t, s.Remove(bg, vfs.Root), vfs.CodeInvalidPath)
	wantCode(t, s.Rename(bg, vfs.Root, P("z"), 0), vfs.CodeInvalidPath)

	// Renaming the path does not redirect the sub.
	must(t, m.Rename(bg, P("a"), P("other/moved"), 0))
	mkdirs(t, m, "a", "a/b")
	writeFile(t, m, "a/b/f", "impostor")
	if got := readFile(t, s, "f"); got != "in sub" {
		t.Fatalf("sub followed the rename: %q", got)
	}
	writeFile(t, s, "g", "written via sub")
	if got := readFile(t, m, "other/moved/b/g"); got != "written via sub" {
		t.Fatalf("write through sub: %q", got)
	}

	// Sub errors.
	_, err = m.Sub(bg, P("a/b/f"))
	wantCode(t, err, vfs.CodeNotDir)
	_, err = m.Sub(bg, P("nope"))
	wantCode(t, err, vfs.CodeNotFound)
	// Sub follows a final symlink.
	must(t, m.Symlink(bg, "other", P("lo")))
	so, err := m.Sub(bg, P("lo"))
	must(t, err)
	if es, err := so.ReadDir(bg, vfs.Root); err != nil || !slices.Equal(names(es), []string{"moved"}) {
		t.Fatalf("sub via link: %v %v", es, err)
	}
	// Nested sub.
	ss, err := so.Sub(bg, P("moved/b"))
	must(t, err)
	if got := readFile(t, ss, "g"); got != "written via sub" {
		t.Fatalf("nested sub: %q", got)
	}
}

func TestSubOfRemovedDir(t *testing.T) {
	m := New()
	mkdirs(t, m, "d")
	s, err := m.Sub(bg, P("d"))
	must(t, err)
	must(t, m.Remove(bg, P("d")))
	i, err := s.Stat(bg, vfs.Root)
	must(t, err)
	if i.Nlink != 0 {
		t.Fatalf("removed dir nlink %d", i.Nlink)
	}
	_, err = s.OpenFile(bg, P("f"), os.O_WRONLY|os.O_CREATE, 0o644)
	wantCode(t, err, vfs.CodeNotFound)
	wantCode(t, s.Mkdir(bg, P("x"), 0o755), vfs.CodeNotFound)
	wantCode(t, s.Symlink(bg, "x", P("l")), vfs.CodeNotFound)
	es, err := s.ReadDir(bg, vfs.Root)
	if err != nil || len(es) != 0 {
		t.Fatalf("readdir of removed dir: %v %v", es, err)
	}
}

func TestContextCanceled(t *testing.T) {
	m := New()
	writeFile(t, m, "f", "x")
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err := m.Stat(ctx, P("f"))
	wantCode(t, err, vfs.CodeCanceled)
	if !errors.Is(err, context.Canceled) {
		t.Fatal("canceled should wrap context.Canceled")
	}
	_, err = m.OpenFile(ctx, P("g"), os.O_WRONLY|os.O_CREATE, 0o644)
	wantCode(t, err, vfs.CodeCanceled)
	wantCode(t, m.Mkdir(ctx, P("d"), 0o755), vfs.CodeCanceled)
	wantCode(t, m.Remove(ctx, P("f")), vfs.CodeCanceled)
	wantCode(t, m.Rename(ctx, P("f"), P("g"), 0), vfs.CodeCanceled)
	wantCode(t, m.Symlink(ctx, "f", P("l")), vfs.CodeCanceled)
	wantCode(t, m.Link(ctx, P("f"), P("h")), vfs.CodeCanceled)
	wantCode(t, m.Chmod(ctx, P("f"), 0), vfs.CodeCanceled)
	wantCode(t, m.Chtimes(ctx, P("f"), time.Time{}, time.Now()), vfs.CodeCanceled)
	_, err = m.ReadDir(ctx, vfs.Root)
	wantCode(t, err, vfs.CodeCanceled)
	_, err = m.Lstat(ctx, P("f"))
	wantCode(t, err, vfs.CodeCanceled)
	_, err = m.Readlink(ctx, P("f"))
	wantCode(t, err, vfs.CodeCanceled)
	_, err = m.Sub(ctx, vfs.Root)
	wantCode(t, err, vfs.CodeCanceled)
	if exists(t, m, "g") || exists(t, m, "d") || !exists(t, m, "f") {
		t.Fatal("a canceled call changed the tree")
	}
}

// TestReadAtEnd pins Read around the end of the file: the last byte, io.EOF, data
// appended through another handle after an EOF, and a Seek back after an EOF.
func TestReadAtEnd(t *testing.T) {
	m := New()
	writeFile(t, m, "f", "0123456789")
	f, err := m.OpenFile(bg, P("f"), os.O_RDONLY, 0)
	must(t, err)
	defer f.Close()
	buf := make([]byte, 9)
	if n, err := f.Read(buf); n != 9 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	if n, err := f.Read(buf); n != 1 || err != nil || buf[0] != '9' {
		t.Fatalf("Read of the last byte = %d, %v", n, err)
	}
	for range 2 {
		if n, err := f.Read(buf); n != 0 || err != io.EOF {
			t.Fatalf("Read at the end = %d, %v; want 0, EOF", n, err)
		}
	}
	if n, err := f.Read(nil); n != 0 || err != nil {
		t.Fatalf("empty Read at the end = %d, %v; want 0, nil", n, err)
	}
	w, err := m.OpenFile(bg, P("f"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	defer w.Close()
	if _, err := w.Write([]byte("ab")); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Read(buf); n != 2 || err != nil || string(buf[:2]) != "ab" {
		t.Fatalf("Read after an append = %d, %v, %q", n, err, buf[:n])
	}
	if _, err := f.Seek(-3, io.SeekEnd); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Read(buf); n != 3 || err != nil || string(buf[:3]) != "9ab" {
		t.Fatalf("Read after Seek = %d, %v, %q", n, err, buf[:n])
	}
	must(t, w.Truncate(4))
	if _, err := f.Seek(3, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Read(buf); n != 1 || err != nil || buf[0] != '3' {
		t.Fatalf("Read after Truncate = %d, %v", n, err)
	}
	if n, err := f.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read at the truncated end = %d, %v; want 0, EOF", n, err)
	}
}
