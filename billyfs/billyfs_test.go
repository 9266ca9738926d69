//go:build unix

package billyfs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-billy/v5/util"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
)

func run(t *testing.T, dir string, args ...string) {
	t.Helper()
	c := exec.Command("git", args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
}

// TestCloneIntoMemoryDir clones a local repository with go-git into a
// memory-backed Dir (work tree and .git both through this package) and checks
// the files, their modes and a symlink.
func TestCloneIntoMemoryDir(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed (make sysdeps installs it)")
	}
	files := map[string]string{"README.md": "hello\n", "src/main.go": "package main\n", "src/deep/x.txt": "x\n"}
	src := makeRepo(t, files)

	d, _ := dir.New(memory.New())
	wt := New(d)
	dot, err := wt.Chroot(".git")
	if err != nil {
		t.Fatal(err)
	}
	st := filesystem.NewStorage(dot, cache.NewObjectLRUDefault())
	repo, err := git.Clone(st, wt, &git.CloneOptions{URL: src})
	if err != nil {
		t.Fatalf("Clone: %v", err)
	}
	ctx := context.Background()
	for name, body := range files {
		b, err := d.ReadFile(ctx, name)
		if err != nil || string(b) != body {
			t.Errorf("%s = %q, %v; want %q", name, b, err, body)
		}
	}
	if fi, err := d.Stat(ctx, "run.sh"); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("run.sh: %v, %v; want executable", fi, err)
	}
	if tgt, err := d.Readlink(ctx, "link"); err != nil || tgt != "src/main.go" {
		t.Errorf("link -> %q, %v", tgt, err)
	}
	if _, err := d.Stat(ctx, ".git/HEAD"); err != nil {
		t.Errorf(".git/HEAD: %v", err)
	}
	w, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	status, err := w.Status()
	if err != nil {
		t.Fatal(err)
	}
	if !status.IsClean() {
		t.Errorf("fresh clone not clean: %v", status)
	}
}

// makeRepo commits files, an executable run.sh and a symlink link ->
// src/main.go in a new git repository and returns its directory.
func makeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	src := t.TempDir()
	run(t, src, "init", "-q", "-b", "main")
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src/main.go", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	run(t, src, "add", "-A")
	run(t, src, "commit", "-q", "-m", "first")
	return src
}

// TestErrorsAndCapabilities: errors answer os.IsNotExist and os.IsExist as
// go-git expects; a read-only Dir declares no write capability and refuses
// writes; Chroot confines.
func TestErrorsAndCapabilities(t *testing.T) {
	d, _ := dir.New(memory.New())
	f := New(d)
	if _, err := f.Open("missing"); !os.IsNotExist(err) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing) = %v; want not-exist", err)
	}
	if err := f.MkdirAll("a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	fl, err := f.Create("a/b/c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fl.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	fl.Close()
	if _, err := f.OpenFile("a/b/c", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); !os.IsExist(err) {
		t.Errorf("O_EXCL on an existing file = %v; want exist", err)
	}
	checkCapabilities(t, d)
	sub, err := f.Chroot("a")
	if err != nil {
		t.Fatal(err)
	}
	if sub.Root() != "/a" {
		t.Errorf("Root() = %q", sub.Root())
	}
	if _, err := sub.Open("../a/b/c"); err == nil {
		t.Error("Chroot let .. climb out")
	}
	if b, err := readAll(sub, "/b/c"); err != nil || b != "data" {
		t.Errorf("through the chroot: %q, %v", b, err)
	}
	tf, err := f.TempFile("tmp", "pre")
	if err != nil {
		t.Fatal(err)
	}
	tf.Close()
	if err := f.Rename(tf.Name(), "moved/into/place"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat("moved/into/place"); err != nil {
		t.Error(err)
	}
}

// checkCapabilities: d's FS declares write and truncate, not locking; its
// read-only view declares no writing and refuses Create.
func checkCapabilities(t *testing.T, d *dir.Dir) {
	t.Helper()
	f := New(d)
	if !billy.CapabilityCheck(f, billy.WriteCapability|billy.TruncateCapability) || billy.CapabilityCheck(f, billy.LockCapability) {
		t.Errorf("capabilities %v", f.Capabilities())
	}
	ro := New(d.ReadOnly())
	if billy.CapabilityCheck(ro, billy.WriteCapability) {
		t.Error("read-only FS declares WriteCapability")
	}
	if _, err := ro.Create("x"); err == nil {
		t.Error("Create on a read-only FS succeeded")
	}
}

func readAll(f billy.Filesystem, name string) (string, error) {
	fl, err := f.Open(name)
	if err != nil {
		return "", err
	}
	defer fl.Close()
	b := make([]byte, 100)
	n, _ := fl.Read(b)
	return string(b[:n]), nil
}

// TestChange: the billy.Change methods are the Dir's: Chtimes acts, Chown
// answers not_supported on a backend that keeps no owners (memory);
// [TestChownPhysical] checks owners on the host.
func TestChange(t *testing.T) {
	d, _ := dir.New(memory.New())
	f := New(d)
	if err := util.WriteFile(f, "x", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	when := time.Unix(1_600_000_000, 0)
	if err := f.Chtimes("x", when, when); err != nil {
		t.Fatal(err)
	}
	if fi, err := f.Stat("x"); err != nil || !fi.ModTime().Equal(when) {
		t.Errorf("Chtimes: %v, %v", fi, err)
	}
	if err := f.Chown("x", 1, 1); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Chown on memory: %v; want not supported", err)
	}
}

// TestChownPhysical: on the physical backend run as root, Chown follows a
// symlink and Lchown changes the link itself, on the host files.
func TestChownPhysical(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing a file's owner needs root")
	}
	host := t.TempDir()
	pb, err := physical.New(host)
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Close()
	pd, _ := dir.New(pb)
	pf := New(pd)
	if err := util.WriteFile(pf, "y", []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pf.Symlink("y", "ly"); err != nil {
		t.Fatal(err)
	}
	if err := pf.Chown("ly", 1234, 4321); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(host, "y"), &st); err != nil || st.Uid != 1234 || st.Gid != 4321 {
		t.Errorf("Chown through a link: %+v, %v", st, err)
	}
	if err := pf.Lchown("ly", 99, 99); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Lstat(filepath.Join(host, "ly"), &st); err != nil || st.Uid != 99 {
		t.Errorf("Lchown of the link: uid %d, %v", st.Uid, err)
	}
	if err := syscall.Stat(filepath.Join(host, "y"), &st); err != nil || st.Uid != 1234 {
		t.Errorf("Lchown changed the target: uid %d, %v", st.Uid, err)
	}
}

// A file's Name is the one billy's osfs gives for the same call: its path
// from the file system's root (the Chroot's, after Chroot), cleaned, with no
// leading "/"; through a symlink, the name it was opened by; a TempFile's,
// dir joined with the random name.
func TestFileNameAsOSFS(t *testing.T) {
	d, _ := dir.New(memory.New())
	ours := New(d)
	theirs := osfs.New(t.TempDir())
	names := []string{"/bar/foo", "bar/foo", "bar/./baz", "qux", "/a/../top", "//x//y", "./dot", "bar/"}
	for _, fsys := range []billy.Filesystem{ours, theirs} {
		if err := fsys.Symlink("bar/foo", "link"); err != nil {
			t.Fatal(err)
		}
	}
	sameNames(t, ours, theirs, names)
	o, err := ours.Chroot("sub")
	if err != nil {
		t.Fatal(err)
	}
	th, err := theirs.Chroot("sub")
	if err != nil {
		t.Fatal(err)
	}
	sameNames(t, o, th, names)
	got, gerr := nameOf(ours.Open("/link"))
	want, werr := nameOf(theirs.Open("/link"))
	if got != want || gerr != nil || werr != nil {
		t.Errorf("Open(/link).Name() = %q, %v; osfs: %q, %v", got, gerr, want, werr)
	}
}

// sameNames fails t unless ours and theirs name alike the files Create and
// TempFile return for the same arguments.
func sameNames(t *testing.T, ours, theirs billy.Filesystem, names []string) {
	t.Helper()
	for _, n := range names {
		got, gerr := nameOf(ours.Create(n))
		want, werr := nameOf(theirs.Create(n))
		if got != want || (gerr == nil) != (werr == nil) {
			t.Errorf("%s: Create(%q).Name() = %q, %v; osfs: %q, %v", ours.Root(), n, got, gerr, want, werr)
		}
	}
	for _, dirname := range []string{"", "/tmpdir", "tmp/./dir"} {
		got, gerr := nameOf(ours.TempFile(dirname, "x"))
		want, werr := nameOf(theirs.TempFile(dirname, "x"))
		if gerr != nil || werr != nil || path.Dir(got) != path.Dir(want) || !strings.HasPrefix(path.Base(got), "x") {
			t.Errorf("%s: TempFile(%q).Name() = %q, %v; osfs: %q, %v", ours.Root(), dirname, got, gerr, want, werr)
		}
	}
}

// nameOf returns f's Name and closes it.
func nameOf(f billy.File, err error) (string, error) {
	if err != nil {
		return "", err
	}
	defer f.Close()
	return f.Name(), nil
}
