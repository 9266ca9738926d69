//go:build linux

package fuseexport

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// The tests in this file pin what pjdfstest checks (fuseexport/pjdfstest.sh runs
// it in full under make stress): each one failed before the fix it names.

// physicalMount mounts a physical Dir over a fresh host directory, returning
// the host directory and the mount point.
func physicalMount(t *testing.T) (host, mp string) {
	t.Helper()
	host = t.TempDir()
	pb, err := physical.New(host)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := dir.New(pb)
	mp, _ = mountT(t, d, Options{})
	return host, mp
}

// TestCtimeFromBackend: stat's st_ctime is the backend's change time, so a
// chmod, a link or an unlink moves it while the mtime stays (it was mtime,
// which chmod does not touch).
func TestCtimeFromBackend(t *testing.T) {
	host, mp := physicalMount(t)
	f := filepath.Join(mp, "f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(f, old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f, 0o600); err != nil {
		t.Fatal(err)
	}
	var st, hst unix.Stat_t
	if err := unix.Lstat(f, &st); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lstat(filepath.Join(host, "f"), &hst); err != nil {
		t.Fatal(err)
	}
	if st.Mtim.Sec != old.Unix() {
		t.Errorf("mtime %d; want %d", st.Mtim.Sec, old.Unix())
	}
	if st.Ctim != hst.Ctim {
		t.Errorf("ctime through the mount %v; the host's %v", st.Ctim, hst.Ctim)
	}
	if st.Ctim.Sec <= old.Unix() {
		t.Errorf("ctime %d after chmod is not after the mtime set before it (%d)", st.Ctim.Sec, old.Unix())
	}
	// A directory's ctime follows the entries made in it.
	if err := os.Chtimes(mp, old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(f, filepath.Join(mp, "g")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lstat(mp, &st); err != nil {
		t.Fatal(err)
	}
	if st.Ctim.Sec <= old.Unix() || st.Mtim.Sec <= old.Unix() {
		t.Errorf("root after link: mtime %d, ctime %d; want both after %d", st.Mtim.Sec, st.Ctim.Sec, old.Unix())
	}
}

// TestLinkCounts: st_nlink follows link, unlink and rename, on every name, and
// an open file whose last name is removed reports none (fstat after unlink).
func TestLinkCounts(t *testing.T) {
	_, mp := physicalMount(t)
	a, b, c := filepath.Join(mp, "a"), filepath.Join(mp, "b"), filepath.Join(mp, "c")
	nlink := func(p string) uint64 {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatalf("lstat %s: %v", filepath.Base(p), err)
		}
		return uint64(st.Nlink) // uint32 on arm64
	}
	if err := os.WriteFile(a, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(b, c); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{a, b, c} {
		if n := nlink(p); n != 3 {
			t.Errorf("%s: nlink %d after two links; want 3", filepath.Base(p), n)
		}
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	if n := nlink(a); n != 2 {
		t.Errorf("a: nlink %d after unlink of b; want 2", n)
	}
	// Renaming a over c (the same file) changes nothing; over a new name, the
	// count stays.
	if err := unix.Rename(c, b); err != nil {
		t.Fatal(err)
	}
	if n := nlink(a); n != 2 {
		t.Errorf("a: nlink %d after rename of c to b; want 2", n)
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Nlink != 0 {
		t.Errorf("fstat after the last unlink: nlink %d; want 0", st.Nlink)
	}
	buf := make([]byte, 5)
	if n, err := f.ReadAt(buf, 0); n != 5 || string(buf) != "hello" {
		t.Errorf("read of the unlinked open file: %q, %v", buf[:n], err)
	}
}

// TestPathTooLong: a path deeper than PATH_MAX from the exported root answers
// ENAMETOOLONG (it was EINVAL), as a name longer than NAME_MAX does.
func TestPathTooLong(t *testing.T) {
	d, _ := dir.New(memory.New())
	mp, _ := mountT(t, d, Options{})
	fd, err := unix.Open(mp, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("d", 250)
	depth := 0
	// Sixteen levels: a path of 16*251-1 = 4015 bytes, within PATH_MAX.
	for ; (depth+1)*(len(name)+1)-1 <= vfs.MaxPathLen; depth++ {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			unix.Close(fd)
			t.Fatalf("mkdir at depth %d: %v", depth, err)
		}
		nfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatalf("open at depth %d: %v", depth, err)
		}
		fd = nfd
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "f", unix.O_WRONLY|unix.O_CREAT, 0o644)
	if err != nil {
		t.Fatalf("create within PATH_MAX: %v", err)
	}
	unix.Close(f)
	long := strings.Repeat("l", 100) // 4015 + 1 + 100 bytes
	_, err = unix.Openat(fd, long, unix.O_WRONLY|unix.O_CREAT, 0o644)
	wantErrno(t, "create beyond PATH_MAX", err, syscall.ENAMETOOLONG)
	wantErrno(t, "mkdir beyond PATH_MAX", unix.Mkdirat(fd, long, 0o755), syscall.ENAMETOOLONG)
	var st unix.Stat_t
	wantErrno(t, "lstat beyond PATH_MAX", unix.Fstatat(fd, long, &st, unix.AT_SYMLINK_NOFOLLOW), syscall.ENAMETOOLONG)
	wantErrno(t, "create with a name beyond NAME_MAX", os.WriteFile(filepath.Join(mp, strings.Repeat("n", 256)), nil, 0o644), syscall.ENAMETOOLONG)
}

// TestPathMaxUnderGitGuard: a file whose path from the root is PATH_MAX-1 bytes
// long (pjdfstest's PATH_MAX tests) can be made, changed and removed through a
// mount of a Dir with the CLI's GitGuard hook, which looked for HEAD beneath
// the new file itself, and refused (EACCES) when the backend could not name so
// long a path.
func TestPathMaxUnderGitGuard(t *testing.T) {
	pb, err := physical.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d, _ := dir.New(pb, dir.WithHooks(dir.GitGuard(pb)))
	mp, _ := mountT(t, d, Options{})
	fd, err := unix.Open(mp, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("d", 250)
	for depth := range 16 { // 16*251 bytes, with the slash after each
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			unix.Close(fd)
			t.Fatalf("mkdir at depth %d: %v", depth, err)
		}
		nfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = nfd
	}
	defer unix.Close(fd)
	last := strings.Repeat("f", vfs.MaxPathLen-1-16*251) // the path is 4095 bytes
	f, err := unix.Openat(fd, last, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	if err != nil {
		t.Fatalf("create a path of PATH_MAX-1 bytes: %v", err)
	}
	unix.Close(f)
	if err := unix.Fchmodat(fd, last, 0o600, 0); err != nil {
		t.Errorf("chmod: %v", err)
	}
	if err := unix.Unlinkat(fd, last, 0); err != nil {
		t.Errorf("unlink: %v", err)
	}
	if err := unix.Mkdirat(fd, last, 0o755); err != nil {
		t.Errorf("mkdir: %v", err)
	}
}

// TestErrnos: the errors pjdfstest checks for each call, through the mount.
func TestErrnos(t *testing.T) {
	ns := vfs.NewNamespace()
	for _, m := range []string{"a", "b"} {
		if err := ns.Mount(vfs.MustParse(m), memory.New(), vfs.MountOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := dir.New(ns)
	mp, _ := mountT(t, d, Options{Mounts: []vfs.Path{{}, vfs.MustParse("a"), vfs.MustParse("b")}})
	at := func(p string) string { return filepath.Join(mp, p) }
	for _, p := range []string{"a/dir", "a/full"} {
		if err := os.Mkdir(at(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"a/file", "a/full/x"} {
		if err := os.WriteFile(at(p), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("loop2", at("a/loop1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop1", at("a/loop2")); err != nil {
		t.Fatal(err)
	}
	_, err := os.Stat(at("a/loop1"))
	wantErrno(t, "stat of a symlink loop", err, syscall.ELOOP)
	_, err = os.Stat(at("a/file/x"))
	wantErrno(t, "stat through a file", err, syscall.ENOTDIR)
	wantErrno(t, "mkdir through a file", os.Mkdir(at("a/file/x"), 0o755), syscall.ENOTDIR)
	wantErrno(t, "mkdir of an existing name", os.Mkdir(at("a/file"), 0o755), syscall.EEXIST)
	wantErrno(t, "symlink onto an existing name", os.Symlink("t", at("a/dir")), syscall.EEXIST)
	wantErrno(t, "link onto an existing name", os.Link(at("a/file"), at("a/dir")), syscall.EEXIST)
	_, err = os.OpenFile(at("a/dir"), os.O_WRONLY, 0)
	wantErrno(t, "open of a directory for writing", err, syscall.EISDIR)
	wantErrno(t, "rmdir of a non-empty directory", unix.Rmdir(at("a/full")), syscall.ENOTEMPTY)
	wantErrno(t, "rmdir of a file", unix.Rmdir(at("a/file")), syscall.ENOTDIR)
	wantErrno(t, "unlink of a directory", unix.Unlink(at("a/dir")), syscall.EISDIR)
	wantErrno(t, "rename of a directory over a file", unix.Rename(at("a/dir"), at("a/file")), syscall.ENOTDIR)
	wantErrno(t, "rename of a file over a directory", unix.Rename(at("a/file"), at("a/dir")), syscall.EISDIR)
	wantErrno(t, "rename over a non-empty directory", unix.Rename(at("a/dir"), at("a/full")), syscall.ENOTEMPTY)
	wantErrno(t, "rename of a directory into itself", unix.Rename(at("a/dir"), at("a/dir/sub")), syscall.EINVAL)
	wantErrno(t, "rename across mounts", unix.Rename(at("a/file"), at("b/file")), syscall.EXDEV)
	wantErrno(t, "link across mounts", os.Link(at("a/file"), at("b/file")), syscall.EXDEV)
	wantErrno(t, "mkfifo", unix.Mkfifo(at("a/fifo"), 0o644), syscall.EPERM)
	wantErrno(t, "chown to another owner", os.Chown(at("a/file"), 12345, 12345), syscall.EPERM)
	if err := os.Chown(at("a/file"), -1, -1); err != nil {
		t.Errorf("chown that changes nothing: %v", err)
	}
}

// TestPageCacheKept: read-only opens keep the kernel's page cache from one open
// to the next, and lose it whenever the file changes: a write through the
// mount (direct I/O on a writable open), a truncate through the mount, and a
// change through another route once the attributes expire (here at once:
// AttrTimeout negative) or Invalidate names the file.
func TestPageCacheKept(t *testing.T) {
	mem := memory.New()
	d, _ := dir.New(mem)
	if err := d.WriteFile(bg, "f", []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	mp, s := mountT(t, d, Options{AttrTimeout: -1, EntryTimeout: -1, NegativeTimeout: -1})
	f := filepath.Join(mp, "f")
	read := func(what, want string) {
		t.Helper()
		b, err := os.ReadFile(f)
		if err != nil || string(b) != want {
			t.Errorf("%s: read %q, %v; want %q", what, b, err, want)
		}
	}
	read("first read", "one")
	read("second read (cached)", "one")
	// The same size, through the mount.
	w, err := os.OpenFile(f, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("two"), 0); err != nil {
		t.Fatal(err)
	}
	read("after a write through a descriptor still open", "two")
	w.Close()
	read("after the writer closed", "two")
	if err := os.Truncate(f, 1); err != nil {
		t.Fatal(err)
	}
	read("after truncate", "t")
	// Through the Dir, then another mtime: the kernel sees it on its next
	// attribute fetch.
	if err := d.WriteFile(bg, "f", []byte("thr"), 0o644); err != nil {
		t.Fatal(err)
	}
	read("after a write through the Dir", "thr")
	// The same size and mtime through another route: only Invalidate tells.
	info, _ := d.Lstat(bg, "f")
	h, err := d.Backend().OpenFile(bg, vfs.MustParse("f"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt([]byte("fou"), 0); err != nil {
		t.Fatal(err)
	}
	h.Close()
	if err := d.Chtimes(bg, "f", info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	read("the same size and mtime, before Invalidate (the pages are kept)", "thr")
	<-s.Invalidate("f")
	read("after Invalidate", "fou")
}
