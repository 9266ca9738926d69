package dir_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

func TestListAndReadDir(t *testing.T) {
	d, _, _ := newTree(t)
	wantList(t, d, "", "a.txt", "dir", "dlink", "empty", "link", "other")
	wantList(t, d, ".", "a.txt", "dir", "dlink", "empty", "link", "other")
	wantList(t, d, "/", "a.txt", "dir", "dlink", "empty", "link", "other")
	wantList(t, d, "dir/sub", "c.go", "deep")
	wantList(t, d, "dlink", "b.txt", "sub") // a symlink to a directory is followed
	wantList(t, d, "empty")

	_, err := d.List(bg, "missing")
	wantCode(t, err, vfs.CodeNotFound)
	_, err = d.List(bg, "a.txt")
	wantCode(t, err, vfs.CodeNotDir)
	_, err = d.List(bg, "../x")
	wantCode(t, err, vfs.CodeOutside)

	ents, err := d.ReadDir(bg, "")
	must(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"a.txt", "dir", "dlink", "empty", "link", "other"}) {
		t.Fatalf("ReadDir names = %q", names)
	}
	types := map[string]fs.FileMode{}
	for _, e := range ents {
		types[e.Name()] = e.Type()
	}
	if types["dir"] != fs.ModeDir || types["link"] != fs.ModeSymlink || types["a.txt"] != 0 {
		t.Fatalf("types = %v", types)
	}
	info, err := ents[0].Info()
	must(t, err)
	if info.Name() != "a.txt" || info.Size() != 5 {
		t.Fatalf("Info = %v", info)
	}
	linfo, err := ents[4].Info() // "link": Info does not follow
	must(t, err)
	if linfo.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("link Info mode = %v", linfo.Mode())
	}
}

func TestStatLstatExists(t *testing.T) {
	d, _, _ := newTree(t)
	fi, err := d.Stat(bg, "link")
	must(t, err)
	if fi.Name() != "link" || !fi.Mode().IsRegular() || fi.Size() != 4 {
		t.Fatalf("Stat(link) = %v", fi)
	}
	fi, err = d.Lstat(bg, "link")
	must(t, err)
	if fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("Lstat(link) mode = %v", fi.Mode())
	}
	fi, err = d.Stat(bg, "/")
	must(t, err)
	if fi.Name() != "." || !fi.IsDir() {
		t.Fatalf("Stat(/) = %v", fi)
	}
	_, err = d.Stat(bg, "")
	wantCode(t, err, vfs.CodeInvalidPath)
	_, err = d.Stat(bg, "nope")
	wantCode(t, err, vfs.CodeNotFound)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("not_found must match fs.ErrNotExist")
	}
	_, err = d.Stat(bg, "a.txt/")
	wantCode(t, err, vfs.CodeNotDir)

	for path, want := range map[string]bool{"a.txt": true, "dir/sub": true, "nope": false, "dir/nope": false} {
		got, err := d.Exists(bg, path)
		must(t, err)
		if got != want {
			t.Errorf("Exists(%q) = %v, want %v", path, got, want)
		}
	}
	must(t, d.Symlink(bg, "nowhere", "dangling"))
	if ok, err := d.Exists(bg, "dangling"); err != nil || !ok {
		t.Fatalf("Exists(dangling) = %v, %v; a dangling link is an entry", ok, err)
	}
	_, err = d.Exists(bg, "a.txt/x")
	wantCode(t, err, vfs.CodeNotDir)
}

func TestReadWriteAppend(t *testing.T) {
	d, _, _ := newTree(t)
	if got := readString(t, d, "dir/b.txt"); got != "beta" {
		t.Fatalf("got %q", got)
	}
	if got := readString(t, d, "/dir/sub/../b.txt"); got != "beta" {
		t.Fatalf("got %q", got)
	}
	must(t, d.WriteFile(bg, "new.txt", []byte("one"), 0o600))
	if got := readString(t, d, "new.txt"); got != "one" {
		t.Fatalf("got %q", got)
	}
	fi, err := d.Stat(bg, "new.txt")
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("perm = %v", fi.Mode().Perm())
	}
	// Replacing keeps the existing permission bits.
	must(t, d.WriteFile(bg, "new.txt", []byte("two"), 0o644))
	fi, err = d.Stat(bg, "new.txt")
	must(t, err)
	if fi.Mode().Perm() != 0o600 || readString(t, d, "new.txt") != "two" {
		t.Fatalf("after replace: perm %v, %q", fi.Mode().Perm(), readString(t, d, "new.txt"))
	}
	must(t, d.Append(bg, "new.txt", []byte("+three")))
	must(t, d.Append(bg, "fresh.log", []byte("x")))
	if readString(t, d, "new.txt") != "two+three" || readString(t, d, "fresh.log") != "x" {
		t.Fatal("append")
	}

	// Writing through a symlink replaces the target and keeps the link.
	must(t, d.WriteFile(bg, "link", []byte("BETA"), 0o644))
	if readString(t, d, "dir/b.txt") != "BETA" {
		t.Fatal("write through link did not reach the target")
	}
	if fi, err := d.Lstat(bg, "link"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("link replaced: %v %v", fi, err)
	}
	// A link whose target uses "..": resolved the same way as the backend does.
	must(t, d.Symlink(bg, "../a.txt", "dir/up"))
	must(t, d.WriteFile(bg, "dir/up", []byte("ALPHA"), 0o644))
	if readString(t, d, "a.txt") != "ALPHA" {
		t.Fatal("write through ../ link")
	}
	if fi, err := d.Lstat(bg, "dir/up"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("dir/up replaced: %v %v", fi, err)
	}

	// No temporary files are left behind.
	names, err := d.List(bg, "")
	must(t, err)
	for _, n := range names {
		if strings.HasPrefix(n, ".capfs-tmp-") {
			t.Fatalf("temporary file left: %s", n)
		}
	}

	wantCode(t, d.WriteFile(bg, "dir", []byte("x"), 0o644), vfs.CodeIsDir)
	wantCode(t, d.WriteFile(bg, "missing/x", []byte("x"), 0o644), vfs.CodeNotFound)
	wantCode(t, d.WriteFile(bg, "/", []byte("x"), 0o644), vfs.CodeIsDir)
	wantCode(t, d.WriteFile(bg, "a.txt/", []byte("x"), 0o644), vfs.CodeNotDir)
	_, err = d.ReadFile(bg, "dir")
	wantCode(t, err, vfs.CodeIsDir)
	_, err = d.ReadFile(bg, "nope")
	wantCode(t, err, vfs.CodeNotFound)
	if names, _ := d.List(bg, "dir"); slices.ContainsFunc(names, func(s string) bool { return strings.HasPrefix(s, ".capfs-tmp-") }) {
		t.Fatal("failed write left a temporary file")
	}
}

func TestReadLimit(t *testing.T) {
	m := memory.New()
	d, _ := dir.New(m, dir.WithMaxReadBytes(10))
	must(t, d.WriteFile(bg, "ten", bytes.Repeat([]byte("x"), 10), 0o644))
	must(t, d.WriteFile(bg, "eleven", bytes.Repeat([]byte("x"), 11), 0o644))
	if b, err := d.ReadFile(bg, "ten"); err != nil || len(b) != 10 {
		t.Fatalf("ReadFile(ten) = %d, %v", len(b), err)
	}
	_, err := d.ReadFile(bg, "eleven")
	wantCode(t, err, vfs.CodeTooLarge)
	f, err := d.OpenFile(bg, "eleven")
	must(t, err)
	_, err = f.ReadBytes(bg)
	wantCode(t, err, vfs.CodeTooLarge)
	_, err = f.ReadText(bg)
	wantCode(t, err, vfs.CodeTooLarge)
	// Streaming is not limited.
	h, err := d.Open(bg, "eleven", os.O_RDONLY, 0)
	must(t, err)
	b, err := io.ReadAll(h)
	must(t, err)
	must(t, h.Close())
	if len(b) != 11 {
		t.Fatalf("streamed %d bytes", len(b))
	}
}

// liar is a backend whose files report size 0 but hold more: ReadFile must not
// trust the reported size.
type liar struct{ vfs.Backend }

func (l liar) OpenFile(ctx ctxT, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := l.Backend.OpenFile(ctx, p, flag, perm)
	if err != nil {
		return nil, err
	}
	return liarFile{f}, nil
}

type liarFile struct{ vfs.File }

func (f liarFile) Stat() (vfs.Info, error) {
	i, err := f.File.Stat()
	i.Size = 0
	return i, err
}

func TestReadLimitDoesNotTrustStat(t *testing.T) {
	m := memory.New()
	root, _ := dir.New(m)
	must(t, root.WriteFile(bg, "big", bytes.Repeat([]byte("y"), 100), 0o644))
	d, _ := dir.New(liar{m}, dir.WithMaxReadBytes(50))
	_, err := d.ReadFile(bg, "big")
	wantCode(t, err, vfs.CodeTooLarge)
}

func TestMkdirCreateRemove(t *testing.T) {
	d, _, _ := newTree(t)
	sub, err := d.CreateDir(bg, "made")
	must(t, err)
	must(t, sub.WriteFile(bg, "in.txt", []byte("in"), 0o644))
	if readString(t, d, "made/in.txt") != "in" {
		t.Fatal("CreateDir's Dir writes elsewhere")
	}
	_, err = d.CreateDir(bg, "made")
	wantCode(t, err, vfs.CodeExists)
	_, err = d.CreateDir(bg, "no/parent")
	wantCode(t, err, vfs.CodeNotFound)

	must(t, d.MkdirAll(bg, "p/q/r"))
	must(t, d.MkdirAll(bg, "p/q/r")) // idempotent
	must(t, d.MkdirAll(bg, "dlink/new"))
	if ok, _ := d.Exists(bg, "dir/new"); !ok {
		t.Fatal("MkdirAll through a symlink to a directory")
	}
	wantCode(t, d.MkdirAll(bg, "a.txt/x"), vfs.CodeNotDir)
	must(t, d.Symlink(bg, "nowhere", "dangle"))
	wantCode(t, d.MkdirAll(bg, "dangle/x"), vfs.CodeNotDir)
	if ok, _ := d.Exists(bg, "nowhere"); ok {
		t.Fatal("MkdirAll created a dangling link's target")
	}

	f, err := d.CreateFile(bg, "made/f.txt")
	must(t, err)
	must(t, f.WriteText(bg, "hello"))
	if readString(t, d, "made/f.txt") != "hello" {
		t.Fatal("CreateFile")
	}
	_, err = d.CreateFile(bg, "made/f.txt")
	wantCode(t, err, vfs.CodeExists)
	_, err = d.CreateFile(bg, "dangle")
	wantCode(t, err, vfs.CodeExists)

	wantCode(t, d.Remove(bg, "dir"), vfs.CodeNotEmpty)
	must(t, d.Remove(bg, "link"))
	if readString(t, d, "dir/b.txt") != "beta" {
		t.Fatal("Remove(link) touched the target")
	}
	must(t, d.Remove(bg, "empty"))
	wantCode(t, d.Remove(bg, "empty"), vfs.CodeNotFound)
	wantCode(t, d.Remove(bg, "/"), vfs.CodeInvalidPath)
	wantCode(t, d.Remove(bg, "."), vfs.CodeInvalidPath)
}

func TestRemoveAll(t *testing.T) {
	d, _, _ := newTree(t)
	// A link to a directory inside the tree being removed: the link goes, the
	// target stays.
	must(t, d.Symlink(bg, "../../other", "dir/sub/tother"))
	must(t, d.RemoveAll(bg, "dir/sub"))
	if ok, _ := d.Exists(bg, "dir/sub"); ok {
		t.Fatal("dir/sub still exists")
	}
	wantList(t, d, "other", ".env", "x.md")
	must(t, d.RemoveAll(bg, "dir/sub")) // missing: not an error
	must(t, d.RemoveAll(bg, "dlink"))   // a link: removed, not followed
	wantList(t, d, "dir", "b.txt")
	must(t, d.RemoveAll(bg, "a.txt"))
	wantCode(t, d.RemoveAll(bg, "/"), vfs.CodeInvalidPath)
	wantCode(t, d.RemoveAll(bg, "../x"), vfs.CodeOutside)
	must(t, d.WriteFile(bg, "f", nil, 0o644))
	wantCode(t, d.RemoveAll(bg, "f/"), vfs.CodeNotDir)
}

func TestSymlinkRules(t *testing.T) {
	d, _, _ := newTree(t)
	must(t, d.Symlink(bg, "../a.txt", "dir/up"))
	if readString(t, d, "dir/up") != "alpha" {
		t.Fatal("in-tree relative link")
	}
	if got, err := d.Readlink(bg, "dir/up"); err != nil || got != "../a.txt" {
		t.Fatalf("Readlink = %q, %v", got, err)
	}
	wantCode(t, d.Symlink(bg, "", "empty-target"), vfs.CodeInvalidPath)
	wantCode(t, d.Symlink(bg, "a\\b", "bs"), vfs.CodeInvalidPath)
	wantCode(t, d.Symlink(bg, "/a\\b", "absbs"), vfs.CodeInvalidPath)
	wantCode(t, d.Symlink(bg, "x", "link"), vfs.CodeExists)
	for _, n := range []string{"empty-target", "bs", "absbs"} {
		if ok, _ := d.Exists(bg, n); ok {
			t.Fatalf("refused symlink %s was created", n)
		}
	}
	// In a Sub, the Sub's root is the limit, even though the target is inside the parent.
	sub, err := d.Sub(bg, "dir")
	must(t, err)
	// There a target climbing above the Sub's root lands in the tree, where
	// the parent would follow it: refused. An absolute one is data.
	wantCode(t, sub.Symlink(bg, "../a.txt", "up2"), vfs.CodeOutside)
	must(t, sub.Symlink(bg, "/etc/passwd", "abs2"))
	_, err = sub.ReadFile(bg, "abs2")
	wantCode(t, err, vfs.CodeOutside)
	must(t, sub.Symlink(bg, "sub/c.go", "c"))
	_, err = d.Readlink(bg, "a.txt")
	wantCode(t, err, vfs.CodeInvalidPath)
}

func TestLinkChmodChtimes(t *testing.T) {
	d, _, _ := newTree(t)
	must(t, d.Link(bg, "a.txt", "hard"))
	must(t, d.Append(bg, "hard", []byte("!")))
	if readString(t, d, "a.txt") != "alpha!" {
		t.Fatal("hard link does not share contents")
	}
	wantCode(t, d.Link(bg, "a.txt", "../out"), vfs.CodeOutside)
	wantCode(t, d.Link(bg, "../out", "x"), vfs.CodeOutside)

	must(t, d.Chmod(bg, "a.txt", 0o600))
	fi, _ := d.Stat(bg, "a.txt")
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("perm = %v", fi.Mode())
	}
	wantCode(t, d.Chmod(bg, "a.txt", 0o4755), vfs.CodePermission)
	fi, _ = d.Stat(bg, "a.txt")
	if fi.Mode()&fs.ModeSetuid != 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("refused chmod changed mode to %v", fi.Mode())
	}

	when := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(t, d.Chtimes(bg, "a.txt", time.Time{}, when))
	fi, _ = d.Stat(bg, "a.txt")
	if !fi.ModTime().Equal(when) {
		t.Fatalf("mtime = %v", fi.ModTime())
	}
}

func TestOpenDirSub(t *testing.T) {
	d, _, _ := newTree(t)
	sub, err := d.OpenDir(bg, "dir")
	must(t, err)
	wantList(t, sub, "", "b.txt", "sub")
	_, err = d.OpenDir(bg, "dir/sub")
	wantCode(t, err, vfs.CodeInvalidPath)
	_, err = d.OpenDir(bg, "..")
	wantCode(t, err, vfs.CodeOutside)
	_, err = d.OpenDir(bg, "a.txt")
	wantCode(t, err, vfs.CodeNotDir)
	_, err = d.OpenDir(bg, "")
	wantCode(t, err, vfs.CodeInvalidPath)

	deep, err := d.Sub(bg, "dir/sub")
	must(t, err)
	wantList(t, deep, "/", "c.go", "deep")
	if readString(t, deep, "/deep/d.go") != "package deep\n" {
		t.Fatal("leading slash must mean the Sub's root")
	}
	_, err = deep.ReadFile(bg, "../b.txt")
	wantCode(t, err, vfs.CodeOutside)
	_, err = deep.ReadFile(bg, "/../b.txt")
	wantCode(t, err, vfs.CodeOutside)
	_, err = deep.Sub(bg, "..")
	wantCode(t, err, vfs.CodeOutside)

	// Pinned: renaming the directory does not redirect the Sub.
	must(t, d.Move(bg, "dir/sub", "moved"))
	if readString(t, deep, "c.go") != "package c\n" {
		t.Fatal("Sub not pinned")
	}
	must(t, d.MkdirAll(bg, "dir/sub"))
	must(t, d.WriteFile(bg, "dir/sub/c.go", []byte("impostor"), 0o644))
	if readString(t, deep, "c.go") != "package c\n" {
		t.Fatal("Sub followed the name, not the directory")
	}
}

func TestSubConfinesSymlinks(t *testing.T) {
	d, _, _ := newTree(t)
	// A link inside "dir" that points to a sibling of dir: fine from the root,
	// outside from a Sub of dir.
	must(t, d.Symlink(bg, "../other/x.md", "dir/tox"))
	if readString(t, d, "dir/tox") != "# x\n" {
		t.Fatal("from the root, the link resolves")
	}
	sub, err := d.Sub(bg, "dir")
	must(t, err)
	_, err = sub.ReadFile(bg, "tox")
	wantCode(t, err, vfs.CodeOutside)
}

func TestHandles(t *testing.T) {
	d, _, _ := newTree(t)
	h, err := d.Open(bg, "h.txt", os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	if _, err := h.Write([]byte("hello world")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt([]byte("W"), 6); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(h, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("Read = %q, %v", buf, err)
	}
	if _, err := h.ReadAt(buf, 6); err != nil || string(buf) != "World" {
		t.Fatalf("ReadAt = %q, %v", buf, err)
	}
	must(t, h.Truncate(5))
	must(t, h.Sync())
	fi, err := h.Stat()
	must(t, err)
	if fi.Name() != "h.txt" || fi.Size() != 5 {
		t.Fatalf("Stat = %v", fi)
	}
	if h.Name() != "h.txt" {
		t.Fatalf("Name = %q", h.Name())
	}
	_, err = h.ReadDir(-1)
	wantCode(t, err, vfs.CodeNotDir)
	must(t, h.Close())
	_, err = h.Read(buf)
	wantCode(t, err, vfs.CodeClosed)

	_, err = d.Open(bg, "h.txt", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	wantCode(t, err, vfs.CodeExists)
	_, err = d.Open(bg, "nope", os.O_RDONLY, 0)
	wantCode(t, err, vfs.CodeNotFound)

	dh, err := d.Open(bg, "dir/sub", os.O_RDONLY, 0)
	must(t, err)
	first, err := dh.ReadDir(1)
	must(t, err)
	rest, err := dh.ReadDir(5)
	must(t, err)
	if len(first) != 1 || first[0].Name() != "c.go" || len(rest) != 1 || rest[0].Name() != "deep" {
		t.Fatalf("ReadDir pages = %v %v", first, rest)
	}
	if _, err := dh.ReadDir(1); err != io.EOF {
		t.Fatalf("ReadDir at end = %v, want io.EOF", err)
	}
	if all, err := dh.ReadDir(-1); err != nil || len(all) != 0 {
		t.Fatalf("ReadDir(-1) at end = %v, %v", all, err)
	}
	info, err := first[0].Info()
	must(t, err)
	if info.Name() != "c.go" || info.Size() != int64(len("package c\n")) {
		t.Fatalf("entry Info = %v", info)
	}
	must(t, dh.Close())
}

func TestFileCapability(t *testing.T) {
	d, _, _ := newTree(t)
	f, err := d.OpenFile(bg, "dir/sub/c.go")
	must(t, err)
	if f.Name() != "dir/sub/c.go" {
		t.Fatalf("Name = %q", f.Name())
	}
	if s, err := f.ReadText(bg); err != nil || s != "package c\n" {
		t.Fatalf("ReadText = %q, %v", s, err)
	}
	must(t, f.WriteBytes(bg, []byte("package c // v2\n")))
	must(t, f.Append(bg, []byte("// more\n")))
	if b, err := f.ReadBytes(bg); err != nil || string(b) != "package c // v2\n// more\n" {
		t.Fatalf("ReadBytes = %q, %v", b, err)
	}
	fi, err := f.Stat(bg)
	must(t, err)
	if fi.Name() != "c.go" || fi.Size() != int64(len("package c // v2\n// more\n")) {
		t.Fatalf("Stat = %v", fi)
	}
	h, err := f.Open(bg, os.O_RDONLY)
	must(t, err)
	b, err := io.ReadAll(h)
	must(t, err)
	must(t, h.Close())
	if !strings.HasPrefix(string(b), "package c // v2") {
		t.Fatalf("Open read %q", b)
	}

	// The File pins its parent: renaming the parent directory does not redirect it.
	must(t, d.Move(bg, "dir/sub", "dir/renamed"))
	if s, _ := f.ReadText(bg); !strings.HasPrefix(s, "package c // v2") {
		t.Fatalf("after parent rename: %q", s)
	}
	// It names the entry: removing it makes the File see not_found.
	must(t, d.Remove(bg, "dir/renamed/c.go"))
	_, err = f.ReadText(bg)
	wantCode(t, err, vfs.CodeNotFound)
	if err.(*vfs.Error).Path != "dir/sub/c.go" {
		t.Fatalf("error path = %q", err.(*vfs.Error).Path)
	}

	_, err = d.OpenFile(bg, "dir")
	wantCode(t, err, vfs.CodeIsDir)
	_, err = d.OpenFile(bg, "missing")
	wantCode(t, err, vfs.CodeNotFound)
	_, err = d.OpenFile(bg, "/")
	wantCode(t, err, vfs.CodeIsDir)
	_, err = d.OpenFile(bg, "a.txt/")
	wantCode(t, err, vfs.CodeNotDir)

	// A symlink leaf pointing into a sibling directory still opens.
	must(t, d.Symlink(bg, "../other/x.md", "dir/x"))
	fx, err := d.OpenFile(bg, "dir/x")
	must(t, err)
	if s, err := fx.ReadText(bg); err != nil || s != "# x\n" {
		t.Fatalf("File via ../ link: %q, %v", s, err)
	}
}

func TestHugeReadLimit(t *testing.T) {
	d, _ := dir.New(memory.New(), dir.WithMaxReadBytes(1<<63-1))
	must(t, d.WriteFile(bg, "f", []byte("small"), 0o644))
	if got := readString(t, d, "f"); got != "small" {
		t.Fatalf("got %q", got)
	}
}

// TestSymlinkLeavingIsData: a link whose target leaves the tree (absolute, or
// climbing above the root) is stored as data on a backend that holds its data
// privately, read back, listed and described, and never followed, with and
// without a policy; the physical backend refuses to create one. Before issue 29
// the Dir refused to create it (path_outside_sandbox).
func TestSymlinkLeavingIsData(t *testing.T) {
	links := map[string]string{"abs": "/etc/passwd", "esc": "../outside", "dir/esc": "sub/../../../x", "absdir": "/etc"}
	for _, pol := range []bool{false, true} {
		var opts []dir.Option
		if pol {
			opts = append(opts, dir.WithPolicy(policy.Defaults()))
		}
		d, _, _ := newTree(t, opts...)
		for name, target := range links {
			must(t, d.Symlink(bg, target, name))
			if got, err := d.Readlink(bg, name); err != nil || got != target {
				t.Fatalf("policy %v: Readlink(%s) = %q, %v", pol, name, got, err)
			}
			fi, err := d.Lstat(bg, name)
			if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
				t.Fatalf("policy %v: Lstat(%s) = %v, %v", pol, name, fi, err)
			}
			_, err = d.Stat(bg, name)
			wantCode(t, err, vfs.CodeOutside)
			_, err = d.ReadFile(bg, name)
			wantCode(t, err, vfs.CodeOutside)
			wantCode(t, d.WriteFile(bg, name, []byte("x"), 0o644), vfs.CodeOutside)
		}
		_, err := d.ReadFile(bg, "absdir/passwd")
		wantCode(t, err, vfs.CodeOutside)
		wantCode(t, d.WriteFile(bg, "absdir/passwd", []byte("x"), 0o644), vfs.CodeOutside)
		wantCode(t, d.MkdirAll(bg, "absdir/x/y"), vfs.CodeOutside)
		names := map[string]bool{}
		must(t, d.Walk(bg, ".", func(p string, _ fs.DirEntry, err error) error {
			names[p] = err == nil
			return nil
		}))
		for name := range links {
			if !names[name] {
				t.Fatalf("policy %v: Walk does not show %s: %v", pol, name, names)
			}
		}
		// Copy carries the link as data too.
		must(t, d.Copy(bg, "abs", "abs2"))
		if got, err := d.Readlink(bg, "abs2"); err != nil || got != "/etc/passwd" {
			t.Fatalf("policy %v: copied link = %q, %v", pol, got, err)
		}
	}
	// The physical backend refuses to create one: host processes read its tree.
	pb, err := physical.New(t.TempDir())
	must(t, err)
	t.Cleanup(func() { pb.Close() })
	d, _ := dir.New(pb)
	wantCode(t, d.Symlink(bg, "/etc/passwd", "abs"), vfs.CodeOutside)
	wantCode(t, d.Symlink(bg, "../outside", "esc"), vfs.CodeOutside)
	if ok, _ := d.Exists(bg, "abs"); ok {
		t.Fatal("physical: absolute link created")
	}
}

// TestSymlinkLeavingDecidedWhereItLands: a target that climbs above the root
// only as written (the link's directory is reached through a symlink) lands
// in the tree from the link's real place, where the resolver follows it, so
// it is no data: it is refused (path_outside_sandbox), as before issue 29,
// not stored undecided. Fails before the fix: the link was created and read
// through.
func TestSymlinkLeavingDecidedWhereItLands(t *testing.T) {
	for _, pol := range []bool{false, true} {
		var opts []dir.Option
		if pol {
			opts = append(opts, dir.WithPolicy(policy.Defaults()))
		}
		d, _, _ := newTree(t, opts...)
		must(t, d.Symlink(bg, "dir/sub", "s2"))
		wantCode(t, d.Symlink(bg, "../../a.txt", "s2/l"), vfs.CodeOutside)
		// So through the Dir's backend view.
		wantCode(t, d.Backend().Symlink(bg, "../../a.txt", vfs.MustParse("s2/v")), vfs.CodeOutside)
		for _, name := range []string{"dir/sub/l", "dir/sub/v"} {
			if ok, _ := d.Exists(bg, name); ok {
				t.Fatalf("policy %v: link %s was created", pol, name)
			}
		}
		// Climbing above the root from the real place too, it is data.
		must(t, d.Symlink(bg, "../../../x", "s2/m"))
		if got, err := d.Readlink(bg, "dir/sub/m"); err != nil || got != "../../../x" {
			t.Fatalf("policy %v: Readlink = %q, %v", pol, got, err)
		}
	}
}
