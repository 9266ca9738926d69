package aferofs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capfs/capfs/vfs"
	"github.com/spf13/afero"
)

var ctx = context.Background()

func mp(s string) vfs.Path { return vfs.MustParse(s) }

func newMem(t *testing.T, opts ...Option) (*Backend, afero.Fs) {
	t.Helper()
	m := afero.NewMemMapFs()
	b, err := New(m, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b, m
}

func wantCode(t *testing.T, err error, code vfs.Code) {
	t.Helper()
	if got := vfs.CodeOf(err); got != code {
		t.Fatalf("error %v: code %q, want %q", err, got, code)
	}
}

func writeFile(t *testing.T, b vfs.Backend, p string, data string) {
	t.Helper()
	f, err := b.OpenFile(ctx, mp(p), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, b vfs.Backend, p string) string {
	t.Helper()
	f, err := b.OpenFile(ctx, mp(p), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// wrapper embeds an afero.Fs in an unexported field, as user wrappers do.
type wrapper struct{ inner afero.Fs }

func (w wrapper) Create(n string) (afero.File, error)    { return w.inner.Create(n) }
func (w wrapper) Mkdir(n string, p os.FileMode) error    { return w.inner.Mkdir(n, p) }
func (w wrapper) MkdirAll(n string, p os.FileMode) error { return w.inner.MkdirAll(n, p) }
func (w wrapper) Open(n string) (afero.File, error)      { return w.inner.Open(n) }
func (w wrapper) OpenFile(n string, f int, p os.FileMode) (afero.File, error) {
	return w.inner.OpenFile(n, f, p)
}
func (w wrapper) Remove(n string) error                  { return w.inner.Remove(n) }
func (w wrapper) RemoveAll(n string) error               { return w.inner.RemoveAll(n) }
func (w wrapper) Rename(o, n string) error               { return w.inner.Rename(o, n) }
func (w wrapper) Stat(n string) (os.FileInfo, error)     { return w.inner.Stat(n) }
func (w wrapper) Name() string                           { return "wrapper" }
func (w wrapper) Chmod(n string, m os.FileMode) error    { return w.inner.Chmod(n, m) }
func (w wrapper) Chown(n string, u, g int) error         { return w.inner.Chown(n, u, g) }
func (w wrapper) Chtimes(n string, a, m time.Time) error { return w.inner.Chtimes(n, a, m) }

func TestNewRefusesOsFs(t *testing.T) {
	osfs := afero.NewOsFs()
	for name, f := range map[string]afero.Fs{
		"nil":           nil,
		"OsFs":          osfs,
		"ReadOnly(Os)":  afero.NewReadOnlyFs(osfs),
		"BasePath(Os)":  afero.NewBasePathFs(osfs, t.TempDir()),
		"CopyOnWrite":   afero.NewCopyOnWriteFs(afero.NewReadOnlyFs(osfs), afero.NewMemMapFs()),
		"CacheOnRead":   afero.NewCacheOnReadFs(osfs, afero.NewMemMapFs(), time.Second),
		"user wrapper":  wrapper{inner: afero.NewBasePathFs(osfs, "/")},
		"RegexpFs(Os)":  afero.NewRegexpFs(osfs, nil),
		"nested deeply": afero.NewReadOnlyFs(afero.NewReadOnlyFs(afero.NewBasePathFs(osfs, "/"))),
	} {
		b, err := New(f)
		if b != nil || vfs.CodeOf(err) != vfs.CodeNotSupported {
			t.Errorf("%s: New = %v, %v; want not_supported", name, b, err)
		}
	}
	for name, f := range map[string]afero.Fs{
		"MemMapFs":           afero.NewMemMapFs(),
		"ReadOnly(MemMapFs)": afero.NewReadOnlyFs(afero.NewMemMapFs()),
		"BasePath(MemMapFs)": afero.NewBasePathFs(afero.NewMemMapFs(), "/x"),
		"user wrapper":       wrapper{inner: afero.NewMemMapFs()},
	} {
		if _, err := New(f); err != nil {
			t.Errorf("%s: New: %v", name, err)
		}
	}
}

func TestFeatures(t *testing.T) {
	b, _ := newMem(t)
	want := vfs.Features{Chmod: true, Chtimes: true}
	if got := b.Features(); got != want {
		t.Errorf("MemMapFs features %+v, want %+v", got, want)
	}
	b, _ = newMem(t, ReadOnly(), Persistent())
	if f := b.Features(); !f.ReadOnly || !f.Persistent || f.HardLinks || f.Symlinks {
		t.Errorf("options: %+v", f)
	}
	ro, err := New(afero.NewReadOnlyFs(afero.NewMemMapFs()))
	if err != nil {
		t.Fatal(err)
	}
	if f := ro.Features(); !f.ReadOnly || f.Symlinks {
		t.Errorf("ReadOnlyFs(MemMapFs): %+v", f)
	}
}

func TestReadWrite(t *testing.T) {
	b, m := newMem(t)
	if err := b.Mkdir(ctx, mp("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, b, "d/f", "hello")
	if got := readFile(t, b, "d/f"); got != "hello" {
		t.Fatalf("read %q", got)
	}
	if data, err := afero.ReadFile(m, "/d/f"); err != nil || string(data) != "hello" {
		t.Fatalf("afero sees %q, %v", data, err)
	}
	info, err := b.Stat(ctx, mp("d/f"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "f" || info.Size != 5 || info.Mode != 0o644 {
		t.Errorf("stat %+v", info)
	}
	info, err = b.Stat(ctx, vfs.Root)
	if err != nil || info.Name != "." || !info.Mode.IsDir() {
		t.Errorf("stat root %+v, %v", info, err)
	}
	_, err = b.Stat(ctx, mp("d/f/"))
	wantCode(t, err, vfs.CodeNotDir)
	_, err = b.Stat(ctx, mp("d/f/x"))
	wantCode(t, err, vfs.CodeNotDir)
	_, err = b.Stat(ctx, mp("nope"))
	wantCode(t, err, vfs.CodeNotFound)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%v is not fs.ErrNotExist", err)
	}
}

func TestMissingParentIsNotCreated(t *testing.T) {
	b, m := newMem(t)
	_, err := b.OpenFile(ctx, mp("a/b/c"), os.O_RDWR|os.O_CREATE, 0o644)
	wantCode(t, err, vfs.CodeNotFound)
	wantCode(t, b.Mkdir(ctx, mp("x/y"), 0o755), vfs.CodeNotFound)
	for _, p := range []string{"/a", "/a/b", "/x"} {
		if _, err := m.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists in the afero fs: %v", p, err)
		}
	}
	writeFile(t, b, "file", "x")
	wantCode(t, b.Mkdir(ctx, mp("file/sub"), 0o755), vfs.CodeNotDir)
	wantCode(t, b.Mkdir(ctx, mp("file"), 0o755), vfs.CodeExists)
}

func TestReadDirSortedAndTyped(t *testing.T) {
	b, _ := newMem(t)
	for _, n := range []string{"zeta", "alpha", "mid"} {
		writeFile(t, b, n, n)
	}
	if err := b.Mkdir(ctx, mp("dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := b.ReadDir(ctx, vfs.Root)
	if err != nil {
		t.Fatal(err)
	}
	want := []vfs.DirEntry{{Name: "alpha", Type: 0}, {Name: "dir", Type: fs.ModeDir}, {Name: "mid", Type: 0}, {Name: "zeta", Type: 0}}
	if len(ents) != len(want) {
		t.Fatalf("entries %v", ents)
	}
	for i := range want {
		if ents[i] != want[i] {
			t.Errorf("entry %d = %v, want %v", i, ents[i], want[i])
		}
	}
	_, err = b.ReadDir(ctx, mp("alpha"))
	wantCode(t, err, vfs.CodeNotDir)
	info, err := b.Stat(ctx, mp("alpha"))
	if err != nil || info.Mode != 0o644 {
		t.Errorf("mode %v (MemMapFs's ModeTemporary must not leak), %v", info.Mode, err)
	}
}

func TestRemove(t *testing.T) {
	b, m := newMem(t)
	if err := b.Mkdir(ctx, mp("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, b, "d/f", "x")
	wantCode(t, b.Remove(ctx, mp("d")), vfs.CodeNotEmpty)
	if _, err := m.Stat("/d/f"); err != nil {
		t.Fatalf("child lost after refused remove: %v", err)
	}
	if err := b.Remove(ctx, mp("d/f")); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(ctx, mp("d")); err != nil {
		t.Fatal(err)
	}
	wantCode(t, b.Remove(ctx, mp("d")), vfs.CodeNotFound)
	wantCode(t, b.Remove(ctx, vfs.Root), vfs.CodeInvalidPath)
}

func TestRename(t *testing.T) {
	b, _ := newMem(t)
	for _, d := range []string{"d1", "d2", "full"} {
		if err := b.Mkdir(ctx, mp(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, b, "d1/a", "A")
	writeFile(t, b, "f", "F")
	writeFile(t, b, "g", "G")
	writeFile(t, b, "full/x", "X")

	wantCode(t, b.Rename(ctx, mp("d1"), mp("f"), 0), vfs.CodeNotDir)
	wantCode(t, b.Rename(ctx, mp("f"), mp("d2"), 0), vfs.CodeIsDir)
	wantCode(t, b.Rename(ctx, mp("d1"), mp("full"), 0), vfs.CodeNotEmpty)
	wantCode(t, b.Rename(ctx, mp("d1"), mp("d1/sub"), 0), vfs.CodeInvalidPath)
	wantCode(t, b.Rename(ctx, mp("f"), mp("g"), vfs.RenameNoReplace), vfs.CodeExists)
	wantCode(t, b.Rename(ctx, mp("nope"), mp("x"), 0), vfs.CodeNotFound)
	wantCode(t, b.Rename(ctx, mp("f"), mp("nodir/x"), 0), vfs.CodeNotFound)
	err := b.Rename(ctx, mp("f"), mp("g"), vfs.RenameNoReplace|vfs.RenameExchange)
	wantCode(t, err, vfs.CodeInvalidPath)
	if got := readFile(t, b, "g"); got != "G" {
		t.Fatalf("refused renames changed g: %q", got)
	}

	// Replace a file; move a directory onto an empty one with its contents.
	if err := b.Rename(ctx, mp("f"), mp("g"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, b, "g"); got != "F" {
		t.Errorf("g = %q after replace", got)
	}
	if err := b.Rename(ctx, mp("d1"), mp("d2"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, b, "d2/a"); got != "A" {
		t.Errorf("d2/a = %q", got)
	}
	_, err = b.Stat(ctx, mp("d1"))
	wantCode(t, err, vfs.CodeNotFound)

	// Exchange a file and a directory.
	if err := b.Rename(ctx, mp("g"), mp("d2"), vfs.RenameExchange); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, b, "d2"); got != "F" {
		t.Errorf("d2 = %q after exchange", got)
	}
	if got := readFile(t, b, "g/a"); got != "A" {
		t.Errorf("g/a = %q after exchange", got)
	}
	ents, err := b.ReadDir(ctx, vfs.Root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name, ".capfs") {
			t.Errorf("temporary name left behind: %v", ents)
		}
	}
	wantCode(t, b.Rename(ctx, mp("g"), mp("missing"), vfs.RenameExchange), vfs.CodeNotFound)
	wantCode(t, b.Rename(ctx, mp("g"), mp("g/a"), vfs.RenameExchange), vfs.CodeInvalidPath)
	err = b.Rename(ctx, mp("nope"), mp("g"), 0)
	var e *vfs.Error
	if !errors.As(err, &e) || e.Path != "nope" || e.Dest != "g" {
		t.Errorf("rename error addressing: %#v", err)
	}
}

func TestOpenSemantics(t *testing.T) {
	b, _ := newMem(t)
	if err := b.Mkdir(ctx, mp("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := b.OpenFile(ctx, mp("d"), os.O_RDWR, 0)
	wantCode(t, err, vfs.CodeIsDir)
	_, err = b.OpenFile(ctx, mp("d"), os.O_WRONLY|os.O_CREATE, 0o644)
	wantCode(t, err, vfs.CodeIsDir)
	_, err = b.OpenFile(ctx, mp("d"), os.O_RDONLY|os.O_CREATE, 0o644)
	wantCode(t, err, vfs.CodeIsDir)
	_, err = b.OpenFile(ctx, mp("new/"), os.O_WRONLY|os.O_CREATE, 0o644)
	wantCode(t, err, vfs.CodeIsDir)
	dh, err := b.OpenFile(ctx, mp("d"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dh.Read(make([]byte, 4))
	wantCode(t, err, vfs.CodeIsDir)
	if info, err := dh.Stat(); err != nil || !info.Mode.IsDir() || info.Name != "d" {
		t.Errorf("dir handle stat %+v, %v", info, err)
	}
	dh.Close()

	writeFile(t, b, "f", "0123456789")
	_, err = b.OpenFile(ctx, mp("f"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	wantCode(t, err, vfs.CodeExists)
	_, err = b.OpenFile(ctx, mp("missing"), os.O_RDONLY, 0)
	wantCode(t, err, vfs.CodeNotFound)

	ro, err := b.OpenFile(ctx, mp("f"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ro.Write([]byte("x"))
	wantCode(t, err, vfs.CodePermission)
	wantCode(t, ro.Truncate(0), vfs.CodePermission)
	wo, err := b.OpenFile(ctx, mp("f"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = wo.Read(make([]byte, 1))
	wantCode(t, err, vfs.CodePermission)

	// Independent offsets; ReadAt and WriteAt leave them alone.
	buf := make([]byte, 3)
	if n, err := ro.Read(buf); n != 3 || err != nil || string(buf) != "012" {
		t.Fatalf("read %d %v %q", n, err, buf)
	}
	if n, err := wo.WriteAt([]byte("ab"), 8); n != 2 || err != nil {
		t.Fatalf("writeat %d %v", n, err)
	}
	if n, err := wo.Write([]byte("XY")); n != 2 || err != nil {
		t.Fatalf("write %d %v", n, err)
	}
	if n, err := ro.Read(buf); n != 3 || err != nil || string(buf) != "345" {
		t.Fatalf("second read %d %v %q", n, err, buf)
	}
	big := make([]byte, 8)
	n, err := ro.ReadAt(big, 5)
	if n != 5 || err != io.EOF || string(big[:n]) != "567ab" {
		t.Fatalf("short ReadAt = %d, %v, %q; want 5, EOF", n, err, big[:n])
	}
	n, err = ro.ReadAt(big[:2], 100)
	if n != 0 || err != io.EOF {
		t.Fatalf("ReadAt past end = %d, %v", n, err)
	}
	if pos, err := ro.Seek(0, io.SeekCurrent); pos != 6 || err != nil {
		t.Fatalf("offset moved by ReadAt: %d %v", pos, err)
	}
	if pos, err := ro.Seek(-2, io.SeekEnd); pos != 8 || err != nil {
		t.Fatalf("seek end %d %v", pos, err)
	}
	if _, err := ro.Seek(-100, io.SeekCurrent); vfs.CodeOf(err) != vfs.CodeInvalidPath {
		t.Fatalf("negative seek: %v", err)
	}
	if got := readFile(t, b, "f"); got != "XY234567ab" {
		t.Fatalf("content %q", got)
	}
	// Reading at an offset past the end after a seek is EOF, not an error.
	if _, err := ro.Seek(50, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if n, err := ro.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read past end %d %v", n, err)
	}
	// Writing past the end zero-fills.
	if _, err := wo.WriteAt([]byte("Z"), 12); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, b, "f"); got != "XY234567ab\x00\x00Z" {
		t.Fatalf("content %q", got)
	}
	if err := wo.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if info, err := wo.Stat(); err != nil || info.Size != 4 || info.Name != "f" {
		t.Fatalf("stat after truncate %+v %v", info, err)
	}
	for _, f := range []vfs.File{ro, wo} {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		_, err := f.Read(buf)
		wantCode(t, err, vfs.CodeClosed)
		if !errors.Is(f.Close(), fs.ErrClosed) {
			t.Error("second Close is not fs.ErrClosed")
		}
	}
	// O_TRUNC empties on open, even read-only (as on Linux), and the handle stays
	// read-only.
	writeFile(t, b, "f", "content")
	rt, err := b.OpenFile(ctx, mp("f"), os.O_RDONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := rt.Stat(); info.Size != 0 {
		t.Errorf("O_RDONLY|O_TRUNC left %d bytes", info.Size)
	}
	_, err = rt.Write([]byte("x"))
	wantCode(t, err, vfs.CodePermission)
	rt.Close()
	writeFile(t, b, "f", "content")
	tf, err := b.OpenFile(ctx, mp("f"), os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := tf.Stat(); info.Size != 0 {
		t.Errorf("O_TRUNC left %d bytes", info.Size)
	}
	tf.Close()
}

func TestAppend(t *testing.T) {
	b, _ := newMem(t)
	writeFile(t, b, "log", "")
	h1, err := b.OpenFile(ctx, mp("log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := b.OpenFile(ctx, mp("log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Interleaved appends through two handles must not overwrite each other, which
	// they do on MemMapFs itself (it only seeks to the end at open).
	for i := 0; i < 3; i++ {
		if _, err := h1.Write([]byte("a")); err != nil {
			t.Fatal(err)
		}
		if _, err := h2.Write([]byte("b")); err != nil {
			t.Fatal(err)
		}
	}
	if got := readFile(t, b, "log"); got != "ababab" {
		t.Fatalf("appends %q", got)
	}
	_, err = h1.WriteAt([]byte("x"), 0)
	wantCode(t, err, vfs.CodeInvalidPath)

	// Concurrent appenders: every record lands whole.
	var wg sync.WaitGroup
	for _, h := range []vfs.File{h1, h2} {
		wg.Add(1)
		go func(h vfs.File) {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				if _, err := h.Write([]byte("0123456789")); err != nil {
					t.Error(err)
					return
				}
			}
		}(h)
	}
	wg.Wait()
	got := readFile(t, b, "log")
	if len(got) != 6+2000 || strings.Count(got, "0123456789") != 200 {
		t.Fatalf("concurrent appends: %d bytes, %d records", len(got), strings.Count(got, "0123456789"))
	}
	h1.Close()
	h2.Close()
}

func TestChmodChtimes(t *testing.T) {
	b, _ := newMem(t)
	writeFile(t, b, "f", "x")
	if err := b.Chmod(ctx, mp("f"), 0o600|fs.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	info, err := b.Stat(ctx, mp("f"))
	if err != nil || info.Mode != 0o600|fs.ModeSetuid {
		t.Fatalf("mode %v, %v", info.Mode, err)
	}
	if err := b.Mkdir(ctx, mp("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := b.Chmod(ctx, mp("d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if info, _ := b.Stat(ctx, mp("d")); info.Mode != fs.ModeDir|0o700 {
		t.Fatalf("dir mode %v", info.Mode)
	}
	when := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := b.Chtimes(ctx, mp("f"), time.Time{}, when); err != nil {
		t.Fatal(err)
	}
	if info, _ := b.Stat(ctx, mp("f")); !info.ModTime.Equal(when) {
		t.Fatalf("mtime %v", info.ModTime)
	}
	if err := b.Chtimes(ctx, mp("f"), when, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if info, _ := b.Stat(ctx, mp("f")); !info.ModTime.Equal(when) {
		t.Fatalf("zero mtime changed the time: %v", info.ModTime)
	}
	wantCode(t, b.Chmod(ctx, mp("nope"), 0o600), vfs.CodeNotFound)
}

func TestUnsupported(t *testing.T) {
	b, _ := newMem(t)
	writeFile(t, b, "f", "x")
	err := b.Link(ctx, mp("f"), mp("g"))
	wantCode(t, err, vfs.CodeNotSupported)
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("%v is not errors.ErrUnsupported", err)
	}
	wantCode(t, b.Symlink(ctx, "f", mp("l")), vfs.CodeNotSupported)
	_, err = b.Readlink(ctx, mp("f"))
	wantCode(t, err, vfs.CodeInvalidPath)
}

func TestReadOnlyOption(t *testing.T) {
	b, m := newMem(t, ReadOnly())
	if err := afero.WriteFile(m, "/f", []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, b, "f"); got != "data" {
		t.Fatalf("read %q", got)
	}
	for _, flag := range []int{os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_CREATE, os.O_RDONLY | os.O_TRUNC, os.O_RDONLY | os.O_APPEND} {
		_, err := b.OpenFile(ctx, mp("f"), flag, 0o644)
		wantCode(t, err, vfs.CodeReadOnly)
	}
	wantCode(t, b.Mkdir(ctx, mp("d"), 0o755), vfs.CodeReadOnly)
	wantCode(t, b.Remove(ctx, mp("f")), vfs.CodeReadOnly)
	wantCode(t, b.Rename(ctx, mp("f"), mp("g"), 0), vfs.CodeReadOnly)
	wantCode(t, b.Symlink(ctx, "f", mp("l")), vfs.CodeReadOnly)
	wantCode(t, b.Link(ctx, mp("f"), mp("l")), vfs.CodeReadOnly)
	wantCode(t, b.Chmod(ctx, mp("f"), 0o600), vfs.CodeReadOnly)
	wantCode(t, b.Chtimes(ctx, mp("f"), time.Now(), time.Now()), vfs.CodeReadOnly)
	sub, err := b.Sub(ctx, vfs.Root)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, sub.Remove(ctx, mp("f")), vfs.CodeReadOnly)
	if data, _ := afero.ReadFile(m, "/f"); string(data) != "data" {
		t.Fatalf("content changed: %q", data)
	}
}

// TestNoEscapeWithoutSymlinks: with no symlinks in play, a Sub's guest can only name
// entries beneath the Sub's afero directory, and never sees afero paths in errors.
func TestNoEscapeWithoutSymlinks(t *testing.T) {
	m := afero.NewMemMapFs()
	for p, data := range map[string]string{
		"/secret-root/app/in":      "inside",
		"/secret-root/app-secret":  "sibling prefix",
		"/secret-root/outside":     "outside",
		"/secret-root/app/../leak": "cleaned by afero",
		"/top":                     "top",
	} {
		if err := afero.WriteFile(m, p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := New(m)
	if err != nil {
		t.Fatal(err)
	}
	app, err := root.Sub(ctx, mp("secret-root/app"))
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, app, "in"); got != "inside" {
		t.Fatalf("in = %q", got)
	}
	for _, guest := range []string{"../app-secret", "../outside", "../../top", "a/../../outside", "/../top"} {
		if _, err := vfs.ParseGuest(guest); vfs.CodeOf(err) != vfs.CodeOutside {
			t.Errorf("ParseGuest(%q) = %v, want path_outside_sandbox", guest, err)
		}
	}
	// Names that look like escapes to a string-prefix check are ordinary entries.
	for _, p := range []string{"...", "..a", "app-secret", "outside", "top", "leak", "secret-root"} {
		_, err := app.Stat(ctx, mp(p))
		wantCode(t, err, vfs.CodeNotFound)
		if strings.Contains(err.Error(), "/") {
			t.Errorf("error names an afero path: %v", err)
		}
	}
	// Everything a Sub creates lands beneath its directory.
	if err := app.Mkdir(ctx, mp("..."), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, app, ".../x", "made")
	if data, err := afero.ReadFile(m, "/secret-root/app/.../x"); err != nil || string(data) != "made" {
		t.Fatalf("created at the wrong place: %q %v", data, err)
	}
	if err := app.Rename(ctx, mp(".../x"), mp("moved"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stat("/secret-root/app/moved"); err != nil {
		t.Fatal(err)
	}
	ents, err := app.ReadDir(ctx, vfs.Root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	if strings.Join(names, ",") != "...,in,moved" {
		t.Fatalf("sub listing %v", names)
	}
	_, err = root.Sub(ctx, mp("top"))
	wantCode(t, err, vfs.CodeNotDir)
	_, err = root.Sub(ctx, mp("none"))
	wantCode(t, err, vfs.CodeNotFound)
}

// TestSubIsNotPinned pins the documented limitation: afero has no handles, so a Sub
// follows its directory's name.
func TestSubIsNotPinned(t *testing.T) {
	b, _ := newMem(t)
	if err := b.Mkdir(ctx, mp("a"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, b, "a/f", "old")
	sub, err := b.Sub(ctx, mp("a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Rename(ctx, mp("a"), mp("b"), 0); err != nil {
		t.Fatal(err)
	}
	_, err = sub.Stat(ctx, mp("f"))
	wantCode(t, err, vfs.CodeNotFound)
	if err := b.Mkdir(ctx, mp("a"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, b, "a/f", "new")
	if got := readFile(t, sub, "f"); got != "new" {
		t.Fatalf("sub reads %q, want the new directory's file", got)
	}
}

func TestCanceled(t *testing.T) {
	b, _ := newMem(t)
	c, cancel := context.WithCancel(ctx)
	cancel()
	_, err := b.Stat(c, vfs.Root)
	wantCode(t, err, vfs.CodeCanceled)
	wantCode(t, b.Mkdir(c, mp("d"), 0o755), vfs.CodeCanceled)
	_, err = b.OpenFile(c, mp("f"), os.O_CREATE|os.O_RDWR, 0o644)
	wantCode(t, err, vfs.CodeCanceled)
}

func TestConcurrentNamespace(t *testing.T) {
	b, _ := newMem(t)
	if err := b.Mkdir(ctx, mp("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				// Everyone races to create the same names exclusively.
				p := mp("d/f" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
				f, err := b.OpenFile(ctx, p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
				if err == nil {
					mu.Lock()
					created++
					mu.Unlock()
					f.Close()
				} else if vfs.CodeOf(err) != vfs.CodeExists {
					t.Error(err)
				}
				if _, err := b.ReadDir(ctx, mp("d")); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if created != 50 {
		t.Fatalf("O_EXCL created %d files, want exactly 50", created)
	}
}

func TestRenameExchangeSameDirTempNames(t *testing.T) {
	b, m := newMem(t)
	writeFile(t, b, "x", "X")
	writeFile(t, b, "y", "Y")
	for i := 0; i < 3; i++ {
		if err := b.Rename(ctx, mp("x"), mp("y"), vfs.RenameExchange); err != nil {
			t.Fatal(err)
		}
	}
	if readFile(t, b, "x") != "Y" || readFile(t, b, "y") != "X" {
		t.Fatal("three exchanges did not swap")
	}
	names, err := afero.ReadDir(m, "/")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 {
		t.Fatalf("afero root holds %d entries", len(names))
	}
	var buf bytes.Buffer
	for _, n := range names {
		buf.WriteString(n.Name())
	}
	if buf.String() != "xy" {
		t.Fatalf("names %q", buf.String())
	}
}
