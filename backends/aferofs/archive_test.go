package aferofs

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"io"
	"io/fs"
	"os"
	"testing"

	"github.com/capfs/capfs/vfs"
	"github.com/spf13/afero"
	"github.com/spf13/afero/tarfs"
	"github.com/spf13/afero/zipfs"
)

// entry is one member of a test archive: a directory (name ends in "/"), a file, or
// a symlink (link != "").
type entry struct{ name, data, link string }

var archiveEntries = []entry{
	{name: "docs/"},
	{name: "docs/readme.txt", data: "read me\n"},
	{name: "docs/sub/"},
	{name: "docs/sub/deep.txt", data: "deep"},
	{name: "top.txt", data: "top level"},
	{name: "docs/to-top", link: "../top.txt"},
	{name: "docs/to-sub", link: "sub"},
	{name: "docs/escape", link: "../../etc/passwd"},
	{name: "docs/abs", link: "/etc/passwd"},
	{name: "loop", link: "loop"},
}

func buildZip(t *testing.T) *zip.Reader {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, e := range archiveEntries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		content := e.data
		switch {
		case e.link != "":
			h.SetMode(fs.ModeSymlink | 0o777)
			content = e.link
		case e.name[len(e.name)-1] == '/':
			h.SetMode(fs.ModeDir | 0o755)
		default:
			h.SetMode(0o644)
		}
		f, err := w.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(f, content); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func buildTar(t *testing.T) *tar.Reader {
	t.Helper()
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, e := range archiveEntries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		switch {
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size, h.Mode = tar.TypeSymlink, e.link, 0, 0o777
		case e.name[len(e.name)-1] == '/':
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		if err := w.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return tar.NewReader(bytes.NewReader(buf.Bytes()))
}

func TestArchives(t *testing.T) {
	for name, fsys := range map[string]func(t *testing.T) afero.Fs{
		"zip":          func(t *testing.T) afero.Fs { return zipfs.New(buildZip(t)) },
		"tar":          func(t *testing.T) afero.Fs { return tarfs.New(buildTar(t)) },
		"readonly-zip": func(t *testing.T) afero.Fs { return afero.NewReadOnlyFs(zipfs.New(buildZip(t))) },
	} {
		t.Run(name, func(t *testing.T) {
			b, err := New(fsys(t))
			if err != nil {
				t.Fatal(err)
			}
			testArchive(t, b)
		})
	}
}

func testArchive(t *testing.T, b *Backend) {
	if f := b.Features(); !f.ReadOnly || !f.Symlinks || f.HardLinks {
		t.Fatalf("features %+v", f)
	}
	if got := readFile(t, b, "docs/readme.txt"); got != "read me\n" {
		t.Errorf("readme = %q", got)
	}
	if got := readFile(t, b, "docs/sub/deep.txt"); got != "deep" {
		t.Errorf("deep = %q", got)
	}
	// Symlinks inside the archive resolve beneath the root.
	if got := readFile(t, b, "docs/to-top"); got != "top level" {
		t.Errorf("to-top = %q", got)
	}
	if got := readFile(t, b, "docs/to-sub/deep.txt"); got != "deep" {
		t.Errorf("to-sub/deep.txt = %q", got)
	}
	if target, err := b.Readlink(ctx, mp("docs/escape")); err != nil || target != "../../etc/passwd" {
		t.Errorf("readlink escape = %q, %v", target, err)
	}
	info, err := b.Lstat(ctx, mp("docs/to-top"))
	if err != nil || info.Mode.Type() != fs.ModeSymlink {
		t.Errorf("lstat link %+v, %v", info, err)
	}
	info, err = b.Stat(ctx, mp("docs/to-top"))
	if err != nil || !info.Mode.IsRegular() || info.Size != int64(len("top level")) || info.Name != "to-top" {
		t.Errorf("stat through link %+v, %v", info, err)
	}
	// ...and never outside it.
	for _, p := range []string{"docs/escape", "docs/abs", "docs/escape/x", "docs/abs/"} {
		_, err := b.OpenFile(ctx, mp(p), os.O_RDONLY, 0)
		wantCode(t, err, vfs.CodeOutside)
		_, err = b.Stat(ctx, mp(p))
		wantCode(t, err, vfs.CodeOutside)
	}
	_, err = b.Stat(ctx, mp("loop"))
	wantCode(t, err, vfs.CodeTooManyLinks)

	// A Sub confines links relative to its own root.
	docs, err := b.Sub(ctx, mp("docs"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = docs.Stat(ctx, mp("to-top"))
	wantCode(t, err, vfs.CodeOutside)
	if got := readFile(t, docs, "to-sub/deep.txt"); got != "deep" {
		t.Errorf("sub to-sub/deep.txt = %q", got)
	}
	viaLink, err := b.Sub(ctx, mp("docs/to-sub"))
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, viaLink, "deep.txt"); got != "deep" {
		t.Errorf("sub through link = %q", got)
	}

	ents, err := b.ReadDir(ctx, mp("docs"))
	if err != nil {
		t.Fatal(err)
	}
	want := []vfs.DirEntry{
		{Name: "abs", Type: fs.ModeSymlink}, {Name: "escape", Type: fs.ModeSymlink}, {Name: "readme.txt", Type: 0},
		{Name: "sub", Type: fs.ModeDir}, {Name: "to-sub", Type: fs.ModeSymlink}, {Name: "to-top", Type: fs.ModeSymlink},
	}
	if len(ents) != len(want) {
		t.Fatalf("docs entries %v", ents)
	}
	for i := range want {
		if ents[i] != want[i] {
			t.Errorf("entry %d = %v, want %v", i, ents[i], want[i])
		}
	}
	// Reads at offsets, across the end, and past it, never panic.
	f, err := b.OpenFile(ctx, mp("top.txt"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if n, err := f.ReadAt(buf, 6); n != 3 || err != io.EOF || string(buf[:n]) != "vel" {
		t.Errorf("ReadAt tail = %d %v %q", n, err, buf[:n])
	}
	if n, err := f.ReadAt(buf, 1000); n != 0 || err != io.EOF {
		t.Errorf("ReadAt past end = %d %v", n, err)
	}
	if _, err := f.Seek(1000, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Read(buf); n != 0 || err != io.EOF {
		t.Errorf("Read past end = %d %v", n, err)
	}
	f.Close()
	// Two handles keep separate offsets (tarfs shares one reader between them).
	h1, _ := b.OpenFile(ctx, mp("top.txt"), os.O_RDONLY, 0)
	h2, _ := b.OpenFile(ctx, mp("top.txt"), os.O_RDONLY, 0)
	b1, b2 := make([]byte, 3), make([]byte, 3)
	h1.Read(b1)
	h2.Read(b2)
	if string(b1) != "top" || string(b2) != "top" {
		t.Errorf("offsets shared: %q %q", b1, b2)
	}
	h1.Close()
	h2.Close()

	// Every write is read_only.
	_, err = b.OpenFile(ctx, mp("new"), os.O_RDWR|os.O_CREATE, 0o644)
	wantCode(t, err, vfs.CodeReadOnly)
	wantCode(t, b.Remove(ctx, mp("top.txt")), vfs.CodeReadOnly)
	wantCode(t, b.Mkdir(ctx, mp("d"), 0o755), vfs.CodeReadOnly)
	wantCode(t, b.Symlink(ctx, "top.txt", mp("l")), vfs.CodeReadOnly)
}
