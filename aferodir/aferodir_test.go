package aferodir_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capfs/capfs/aferodir"
	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
	"github.com/spf13/afero"
)

// aferoCode checks that err is an *fs.PathError carrying the errno code stands
// for.
func aferoCode(t *testing.T, err error, code vfs.Code) {
	t.Helper()
	if _, ok := errors.AsType[*fs.PathError](err); !ok || !errors.Is(err, code.Errno()) {
		t.Fatalf("error %v: want an *fs.PathError with %v (%s)", err, code.Errno(), code)
	}
}

func aferoMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestAferoHelpers runs afero's own helpers through the view.
func TestAferoHelpers(t *testing.T) {
	d, _ := dir.New(memory.New())
	v := afero.Fs(aferodir.New(d))
	if v.Name() != "capfs" {
		t.Errorf("Name = %q", v.Name())
	}
	aferoCode(t, afero.WriteFile(v, "/a/b.txt", []byte("x"), 0o644), vfs.CodeNotFound)
	aferoMust(t, v.MkdirAll("/a/sub/deep", 0o750))
	aferoMust(t, v.MkdirAll("a/sub", 0o700)) // exists: fine, modes unchanged
	for _, p := range []string{"a", "a/sub", "a/sub/deep"} {
		fi, err := d.Stat(context.Background(), p)
		if err != nil || fi.Mode() != fs.ModeDir|0o750 {
			t.Errorf("%s: mode %v, %v", p, fi.Mode(), err)
		}
	}
	aferoMust(t, afero.WriteFile(v, "/a/b.txt", []byte("bee"), 0o600))
	aferoMust(t, afero.WriteFile(v, "/a/c.txt", []byte("sea"), 0o644|fs.ModeSetuid))
	aferoMust(t, afero.WriteFile(v, "/a/sub/deep/d.go", []byte("package d"), 0o644))
	aferoCode(t, v.MkdirAll("/a/b.txt/x", 0o755), vfs.CodeNotDir)

	// The view and the Dir see the same tree.
	data, err := afero.ReadFile(v, "a/b.txt")
	if err != nil || string(data) != "bee" {
		t.Fatalf("afero.ReadFile = %q, %v", data, err)
	}
	if data, _ := d.ReadFile(context.Background(), "a/c.txt"); string(data) != "sea" {
		t.Fatalf("Dir.ReadFile = %q", data)
	}
	fi, err := v.Stat("/a/c.txt")
	if err != nil || fi.Mode() != 0o644 || fi.Name() != "c.txt" || fi.Size() != 3 {
		t.Errorf("stat c.txt: %v %v (setuid must be dropped at creation)", fi, err)
	}
	fi, err = v.Stat("/a/b.txt")
	if err != nil || fi.Mode() != 0o600 {
		t.Errorf("stat b.txt: %v %v", fi, err)
	}

	var walked []string
	aferoMust(t, afero.Walk(v, "/", func(p string, info fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		walked = append(walked, filepath.ToSlash(p)+map[bool]string{true: "/"}[info.IsDir()])
		return nil
	}))
	want := []string{"//", "/a/", "/a/b.txt", "/a/c.txt", "/a/sub/", "/a/sub/deep/", "/a/sub/deep/d.go"}
	if !slices.Equal(walked, want) {
		t.Errorf("Walk = %q, want %q", walked, want)
	}
	matches, err := afero.Glob(v, "/a/*.txt")
	if err != nil || !slices.Equal(matches, []string{"/a/b.txt", "/a/c.txt"}) {
		t.Errorf("Glob = %q, %v", matches, err)
	}
	infos, err := afero.ReadDir(v, "/a")
	if err != nil || len(infos) != 3 || infos[0].Name() != "b.txt" || !infos[2].IsDir() {
		t.Errorf("ReadDir = %v, %v", infos, err)
	}
	ok, err := afero.DirExists(v, "/a/sub")
	if !ok || err != nil {
		t.Errorf("DirExists = %v, %v", ok, err)
	}
	// os.IsNotExist sees the error, so afero's Exists reports a missing path
	// as false.
	ok, err = afero.Exists(v, "/missing")
	if ok || err != nil {
		t.Errorf("Exists(missing) = %v, %v", ok, err)
	}
	tmp, err := afero.TempFile(v, "/a", "tmp-*")
	aferoMust(t, err)
	if !strings.HasPrefix(tmp.Name(), "/a/tmp-") {
		t.Errorf("TempFile name %q", tmp.Name())
	}
	aferoMust(t, tmp.Close())

	// Mutations.
	aferoMust(t, v.Rename("/a/b.txt", "/a/sub/b2.txt"))
	aferoCode(t, v.Rename("/a/missing", "/a/x"), vfs.CodeNotFound)
	aferoMust(t, v.Remove(tmp.Name()))
	aferoCode(t, v.Remove("/a/sub"), vfs.CodeNotEmpty)
	aferoMust(t, v.RemoveAll("/a/sub"))
	aferoMust(t, v.RemoveAll("/a/sub")) // missing is fine
	aferoMust(t, v.Mkdir("/a/m", 0o1777))
	if fi, err := v.Stat("/a/m"); err != nil || fi.Mode() != fs.ModeDir|fs.ModeSticky|0o777 {
		t.Errorf("Mkdir mode %v, %v", fi.Mode(), err)
	}
	aferoCode(t, v.Mkdir("/a/m", 0o755), vfs.CodeExists)
	aferoCode(t, v.Mkdir("/nope/m", 0o755), vfs.CodeNotFound)
	aferoMust(t, v.Chmod("/a/c.txt", 0o640))
	aferoCode(t, v.Chmod("/a/c.txt", 0o4755), vfs.CodePermission)
	when := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	aferoMust(t, v.Chtimes("/a/c.txt", when, when))
	if fi, _ := v.Stat("/a/c.txt"); fi.Mode() != 0o640 || !fi.ModTime().Equal(when) {
		t.Errorf("after chmod/chtimes: %v %v", fi.Mode(), fi.ModTime())
	}
	err = v.Chown("/a/c.txt", 0, 0)
	aferoCode(t, err, vfs.CodeNotSupported)
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Chown error %v is not errors.ErrUnsupported", err)
	}
	aferoCode(t, v.Mkdir("", 0o755), vfs.CodeInvalidPath)
}

func TestAferoSymlinks(t *testing.T) {
	d, _ := dir.New(memory.New())
	v := afero.Fs(aferodir.New(d))
	aferoMust(t, v.MkdirAll("/d", 0o755))
	aferoMust(t, afero.WriteFile(v, "/d/f", []byte("target"), 0o644))
	ls, ok := v.(afero.Symlinker)
	if !ok {
		t.Fatal("view is not an afero.Symlinker")
	}
	aferoMust(t, ls.SymlinkIfPossible("d/f", "/link"))
	// A target leaving the tree is data (issue 29): stored, never followed.
	aferoMust(t, ls.SymlinkIfPossible("../outside", "/escape"))
	aferoMust(t, ls.SymlinkIfPossible("/etc/passwd", "/abs"))
	if target, err := ls.ReadlinkIfPossible("/abs"); err != nil || target != "/etc/passwd" {
		t.Errorf("Readlink abs = %q, %v", target, err)
	}
	_, err := afero.ReadFile(v, "/abs")
	aferoCode(t, err, vfs.CodeOutside)
	target, err := ls.ReadlinkIfPossible("/link")
	if err != nil || target != "d/f" {
		t.Errorf("Readlink = %q, %v", target, err)
	}
	fi, lstatCalled, err := ls.LstatIfPossible("/link")
	if err != nil || !lstatCalled || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat = %v, %v, %v", fi, lstatCalled, err)
	}
	if data, err := afero.ReadFile(v, "/link"); err != nil || string(data) != "target" {
		t.Errorf("read through link = %q, %v", data, err)
	}
}

// TestAferoConfinement: the view of a Sub never reaches outside it, whatever names
// afero code passes.
func TestAferoConfinement(t *testing.T) {
	root, _ := dir.New(memory.New())
	ctx := context.Background()
	aferoMust(t, root.MkdirAll(ctx, "jail"))
	aferoMust(t, root.WriteFile(ctx, "secret", []byte("s3cret"), 0o600))
	jail, err := root.Sub(ctx, "jail")
	aferoMust(t, err)
	v := afero.Fs(aferodir.New(jail))
	for _, name := range []string{"../secret", "/../secret", "a/../../secret"} {
		_, err := afero.ReadFile(v, name)
		aferoCode(t, err, vfs.CodeOutside)
	}
	_, err = afero.ReadFile(v, "/secret")
	aferoCode(t, err, vfs.CodeNotFound)
	aferoMust(t, afero.WriteFile(v, "/secret", []byte("mine"), 0o644))
	if data, _ := root.ReadFile(ctx, "jail/secret"); string(data) != "mine" {
		t.Errorf("jail/secret = %q", data)
	}
	if data, _ := root.ReadFile(ctx, "secret"); string(data) != "s3cret" {
		t.Errorf("outside file changed: %q", data)
	}
	aferoCode(t, v.Mkdir("../x", 0o755), vfs.CodeOutside)
	aferoCode(t, v.MkdirAll("../x/y", 0o755), vfs.CodeOutside)
}

// TestAferoReadOnly: a read-only Dir's view reads and refuses every write.
func TestAferoReadOnly(t *testing.T) {
	d, _ := dir.New(memory.New())
	ctx := context.Background()
	aferoMust(t, d.MkdirAll(ctx, "d"))
	aferoMust(t, d.WriteFile(ctx, "d/f", []byte("keep"), 0o644))
	v := afero.Fs(aferodir.New(d.ReadOnly()))

	if data, err := afero.ReadFile(v, "/d/f"); err != nil || string(data) != "keep" {
		t.Fatalf("read = %q, %v", data, err)
	}
	aferoCode(t, afero.WriteFile(v, "/d/f", []byte("x"), 0o644), vfs.CodeReadOnly)
	_, err := v.Create("/d/new")
	aferoCode(t, err, vfs.CodeReadOnly)
	for _, flag := range []int{os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_APPEND, os.O_RDONLY | os.O_TRUNC, os.O_RDONLY | os.O_CREATE} {
		_, err := v.OpenFile("/d/f", flag, 0o644)
		aferoCode(t, err, vfs.CodeReadOnly)
	}
	aferoCode(t, v.Mkdir("/d2", 0o755), vfs.CodeReadOnly)
	aferoCode(t, v.MkdirAll("/d2/e", 0o755), vfs.CodeReadOnly)
	aferoCode(t, v.Remove("/d/f"), vfs.CodeReadOnly)
	aferoCode(t, v.RemoveAll("/d"), vfs.CodeReadOnly)
	aferoCode(t, v.Rename("/d/f", "/g"), vfs.CodeReadOnly)
	aferoCode(t, v.Chmod("/d/f", 0o600), vfs.CodeReadOnly)
	aferoCode(t, v.Chtimes("/d/f", time.Now(), time.Now()), vfs.CodeReadOnly)
	aferoCode(t, v.(afero.Linker).SymlinkIfPossible("d/f", "/l"), vfs.CodeReadOnly)
	if err := v.Remove("/d/f"); !errors.Is(err, syscall.EROFS) || os.IsPermission(err) != errors.Is(err, fs.ErrPermission) {
		t.Errorf("read_only: %v, want EROFS, the same answer from os.IsPermission and errors.Is", err)
	}
	// A file opened for reading cannot be written either.
	f, err := v.Open("/d/f")
	aferoMust(t, err)
	_, err = f.WriteString("x")
	if err == nil {
		t.Fatal("write through a read-only handle succeeded")
	}
	aferoMust(t, f.Close())
	if data, _ := d.ReadFile(ctx, "d/f"); string(data) != "keep" {
		t.Fatalf("content changed: %q", data)
	}
	if _, err := d.Stat(ctx, "d2"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("d2 was created: %v", err)
	}
}

// TestAferoFile exercises the afero.File wrapper.
func TestAferoFile(t *testing.T) {
	d, ctl := dir.New(memory.New())
	v := afero.Fs(aferodir.New(d))
	aferoMust(t, v.MkdirAll("/dir", 0o755))
	for _, n := range []string{"e", "c", "a", "d", "b"} {
		aferoMust(t, afero.WriteFile(v, "/dir/"+n, []byte(n+n), 0o644))
	}
	dh, err := v.Open("/dir")
	aferoMust(t, err)
	if dh.Name() != "/dir" {
		t.Errorf("Name = %q", dh.Name())
	}
	var got []string
	for {
		infos, err := dh.Readdir(2)
		if err == io.EOF {
			break
		}
		aferoMust(t, err)
		if len(infos) == 0 || len(infos) > 2 {
			t.Fatalf("Readdir(2) returned %d entries", len(infos))
		}
		for _, fi := range infos {
			if fi.Size() != 2 {
				t.Errorf("%s: size %d", fi.Name(), fi.Size())
			}
			got = append(got, fi.Name())
		}
	}
	if strings.Join(got, "") != "abcde" {
		t.Errorf("Readdir pages = %q", got)
	}
	aferoMust(t, dh.Close())
	dh, err = v.Open("/dir")
	aferoMust(t, err)
	names, err := dh.Readdirnames(-1)
	if err != nil || strings.Join(names, ",") != "a,b,c,d,e" {
		t.Errorf("Readdirnames = %q, %v", names, err)
	}
	if rdf, ok := dh.(fs.ReadDirFile); !ok {
		t.Error("afero.File is not an fs.ReadDirFile")
	} else if ents, err := rdf.ReadDir(-1); err != nil || len(ents) != 0 {
		t.Errorf("ReadDir after a full Readdirnames = %v, %v", ents, err)
	}
	if fi, err := dh.Stat(); err != nil || !fi.IsDir() || fi.Name() != "dir" {
		t.Errorf("dir Stat = %v, %v", fi, err)
	}
	aferoMust(t, dh.Close())

	f, err := v.OpenFile("/dir/new", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	aferoMust(t, err)
	if n, err := f.WriteString("hello, world"); n != 12 || err != nil {
		t.Fatalf("WriteString = %d, %v", n, err)
	}
	if _, err := f.Readdir(-1); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("Readdir on a file: %v", err)
	}
	buf := make([]byte, 5)
	if n, err := f.ReadAt(buf, 7); n != 5 || err != nil || string(buf) != "world" {
		t.Errorf("ReadAt = %d %v %q", n, err, buf)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	aferoMust(t, f.Truncate(5))
	aferoMust(t, f.Sync())
	data, err := io.ReadAll(f)
	if err != nil || string(data) != "hello" {
		t.Errorf("after truncate: %q, %v", data, err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != 5 || fi.Mode() != 0o600 {
		t.Errorf("file Stat = %v, %v", fi, err)
	}
	_, err = v.OpenFile("/dir/new", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	aferoCode(t, err, vfs.CodeExists)
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("%v is not fs.ErrExist", err)
	}

	// Revocation stops the open file and the view.
	ctl.Revoke()
	_, err = f.WriteString("x")
	aferoCode(t, err, vfs.CodeRevoked)
	_, err = v.Stat("/dir/new")
	aferoCode(t, err, vfs.CodeRevoked)
	aferoCode(t, v.MkdirAll("/x/y", 0o755), vfs.CodeRevoked)
	aferoMust(t, f.Close())
}

// TestAferoAudited: every call through the view is one audited Dir call.
func TestAferoAudited(t *testing.T) {
	ring := audit.NewRing(64)
	denyEnv := policy.Func(func(_ context.Context, r *policy.Request) policy.Decision {
		if strings.HasSuffix(r.Path, ".env") {
			return policy.Decision{Effect: policy.Deny, Rule: "deny:**/.env"}
		}
		return policy.Decision{Effect: policy.Allow, Rule: "default"}
	})
	d, _ := dir.New(memory.New(), dir.WithAudit(ring), dir.WithPolicy(denyEnv))
	v := afero.Fs(aferodir.New(d))
	aferoMust(t, v.Mkdir("/d", 0o755))
	_, _ = v.Stat("/d")
	_ = v.Remove("/missing")
	evs := ring.Events()
	if len(evs) != 3 {
		t.Fatalf("%d audit events, want 3: %+v", len(evs), evs)
	}
	if evs[2].Outcome == audit.OK {
		t.Errorf("failed Remove audited as %q", evs[2].Outcome)
	}
	// The Dir's policy applies too.
	_, err := afero.ReadFile(v, "/d/.env")
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("reading .env through the view: %v", err)
	}
}
