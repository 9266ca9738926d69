//go:build linux

package fuseexport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

var bg = context.Background()

func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: err = %v; want %v", what, err, want)
	}
}

// TestReaddirLarge lists a directory of 10,000 entries through the mount: every
// name once, in the order the Dir lists them.
func TestReaddirLarge(t *testing.T) {
	d, _ := dir.New(memory.New())
	if err := d.MkdirAll(bg, "big"); err != nil {
		t.Fatal(err)
	}
	const n = 10000
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("f%05d", i)
		if err := d.WriteFile(bg, "big/"+want[i], nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mp, _ := mountT(t, d, Options{})
	ents, err := os.ReadDir(filepath.Join(mp, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != n {
		t.Fatalf("ReadDir: %d entries; want %d", len(ents), n)
	}
	got := make([]string, n)
	for i, e := range ents {
		got[i] = e.Name()
		if !e.Type().IsRegular() {
			t.Fatalf("%s: type %v; want a regular file", e.Name(), e.Type())
		}
	}
	sort.Strings(got)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entry %d = %q; want %q", i, got[i], want[i])
		}
	}
}

// TestConcurrentWriters: goroutines write files of their own and append lines to
// one shared file opened O_APPEND, through the mount; every file is whole and
// the shared file holds every line once.
func TestConcurrentWriters(t *testing.T) {
	d, _ := dir.New(memory.New())
	mp, _ := mountT(t, d, Options{})
	const workers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log, err := os.OpenFile(filepath.Join(mp, "log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
			if err != nil {
				errs <- err
				return
			}
			defer log.Close()
			for i := range each {
				name := filepath.Join(mp, fmt.Sprintf("w%d-%d", w, i))
				body := strings.Repeat(fmt.Sprintf("%d:%d;", w, i), 100+i)
				if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
					errs <- err
					return
				}
				if _, err := fmt.Fprintf(log, "w%d-%d\n", w, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range workers {
		for i := range each {
			b, err := d.ReadFile(bg, fmt.Sprintf("w%d-%d", w, i))
			if want := strings.Repeat(fmt.Sprintf("%d:%d;", w, i), 100+i); err != nil || string(b) != want {
				t.Fatalf("w%d-%d: %d bytes, %v; want %d bytes", w, i, len(b), err, len(want))
			}
		}
	}
	b, err := d.ReadFile(bg, "log")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		seen[sc.Text()]++
	}
	if len(seen) != workers*each {
		t.Fatalf("log holds %d distinct lines; want %d", len(seen), workers*each)
	}
	for l, c := range seen {
		if c != 1 {
			t.Fatalf("log line %q appears %d times", l, c)
		}
	}
}

// TestInodesStable: an entry keeps its inode number across a rename, a hard
// link shares it, and numbers survive the kernel forgetting the nodes.
func TestInodesStable(t *testing.T) {
	d, _ := dir.New(memory.New())
	mp, s := mountT(t, d, Options{})
	a := filepath.Join(mp, "a")
	if err := os.WriteFile(a, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ino := func(p string) uint64 {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	i0 := ino(a)
	if err := os.Link(a, filepath.Join(mp, "hard")); err != nil {
		t.Fatal(err)
	}
	if got := ino(filepath.Join(mp, "hard")); got != i0 {
		t.Errorf("hard link's inode %d; want %d", got, i0)
	}
	var st unix.Stat_t
	if err := unix.Stat(a, &st); err != nil || st.Nlink != 2 {
		t.Errorf("nlink = %d, %v; want 2", st.Nlink, err)
	}
	if err := os.WriteFile(filepath.Join(mp, "hard"), []byte("through the other name"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(a); string(b) != "through the other name" {
		t.Errorf("a = %q after writing its hard link", b)
	}
	if err := os.Rename(a, filepath.Join(mp, "b")); err != nil {
		t.Fatal(err)
	}
	if got := ino(filepath.Join(mp, "b")); got != i0 {
		t.Errorf("renamed file's inode %d; want %d", got, i0)
	}
	<-s.Invalidate("")
	if got := ino(filepath.Join(mp, "b")); got != i0 {
		t.Errorf("inode after invalidation %d; want %d", got, i0)
	}
	if err := os.Mkdir(filepath.Join(mp, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if ino(filepath.Join(mp, "dir")) == i0 || ino(mp) == i0 || ino(mp) == ino(filepath.Join(mp, "dir")) {
		t.Error("two entries share an inode number")
	}
}

// TestInodesAcrossMounts: two memory backends number their files alike; with
// Options.Mounts the mount keeps their numbers apart.
func TestInodesAcrossMounts(t *testing.T) {
	ns := vfs.NewNamespace()
	for _, m := range []string{"a", "b"} {
		if err := ns.Mount(vfs.MustParse(m), memory.New(), vfs.MountOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := dir.New(ns)
	for _, m := range []string{"a", "b"} {
		if err := d.WriteFile(bg, m+"/f", []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ia, _ := d.Lstat(bg, "a/f")
	ib, _ := d.Lstat(bg, "b/f")
	if ia.Sys() != nil && ib.Sys() != nil {
		t.Logf("backend ids: %v %v", ia.Sys(), ib.Sys())
	}
	mp, _ := mountT(t, d, Options{Mounts: []vfs.Path{vfs.MustParse("a"), vfs.MustParse("b")}})
	var sa, sb unix.Stat_t
	if err := unix.Stat(filepath.Join(mp, "a/f"), &sa); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(filepath.Join(mp, "b/f"), &sb); err != nil {
		t.Fatal(err)
	}
	if sa.Ino == sb.Ino {
		t.Fatalf("a/f and b/f share inode %d", sa.Ino)
	}
	ba, _ := os.ReadFile(filepath.Join(mp, "a/f"))
	bb, _ := os.ReadFile(filepath.Join(mp, "b/f"))
	if string(ba) != "a" || string(bb) != "b" {
		t.Fatalf("a/f = %q, b/f = %q", ba, bb)
	}
}

// TestRenameFlags: renameat2's NOREPLACE and EXCHANGE reach the Dir; WHITEOUT is
// refused.
func TestRenameFlags(t *testing.T) {
	d, _ := dir.New(memory.New())
	mp, _ := mountT(t, d, Options{})
	for name, body := range map[string]string{"x": "X", "y": "Y"} {
		if err := os.WriteFile(filepath.Join(mp, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	x, y := filepath.Join(mp, "x"), filepath.Join(mp, "y")
	wantErrno(t, "RENAME_NOREPLACE onto y", unix.Renameat2(unix.AT_FDCWD, x, unix.AT_FDCWD, y, unix.RENAME_NOREPLACE), syscall.EEXIST)
	if err := unix.Renameat2(unix.AT_FDCWD, x, unix.AT_FDCWD, y, unix.RENAME_EXCHANGE); err != nil {
		t.Fatalf("RENAME_EXCHANGE: %v", err)
	}
	bx, _ := d.ReadFile(bg, "x")
	by, _ := d.ReadFile(bg, "y")
	if string(bx) != "Y" || string(by) != "X" {
		t.Fatalf("after exchange x = %q, y = %q", bx, by)
	}
	wantErrno(t, "RENAME_WHITEOUT", unix.Renameat2(unix.AT_FDCWD, x, unix.AT_FDCWD, filepath.Join(mp, "z"), unix.RENAME_WHITEOUT), syscall.EINVAL)
	if err := unix.Renameat2(unix.AT_FDCWD, x, unix.AT_FDCWD, filepath.Join(mp, "z"), unix.RENAME_NOREPLACE); err != nil {
		t.Fatalf("RENAME_NOREPLACE to a free name: %v", err)
	}
	if _, err := d.Lstat(bg, "z"); err != nil {
		t.Fatal(err)
	}
}

// TestTruncateChmodTimes: truncate(2), ftruncate, chmod and utimes reach the Dir.
func TestTruncateChmodTimes(t *testing.T) {
	d, _ := dir.New(memory.New())
	mp, _ := mountT(t, d, Options{})
	f := filepath.Join(mp, "f")
	if err := os.WriteFile(f, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(f, 4); err != nil {
		t.Fatal(err)
	}
	if b, _ := d.ReadFile(bg, "f"); string(b) != "0123" {
		t.Errorf("after truncate: %q", b)
	}
	h, err := os.OpenFile(f, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Truncate(6); err != nil {
		t.Fatal(err)
	}
	h.Close()
	if b, _ := d.ReadFile(bg, "f"); string(b) != "0123\x00\x00" {
		t.Errorf("after ftruncate: %q", b)
	}
	if err := os.Chmod(f, 0o640); err != nil {
		t.Fatal(err)
	}
	if fi, _ := d.Stat(bg, "f"); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v; want 0640", fi.Mode())
	}
	wantErrno(t, "chmod u+s", syscall.Chmod(f, 0o4755), syscall.EACCES)
	mt := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(f, mt, mt); err != nil {
		t.Fatal(err)
	}
	if fi, _ := d.Stat(bg, "f"); !fi.ModTime().Equal(mt) {
		t.Errorf("mtime %v; want %v", fi.ModTime(), mt)
	}
	if fi, _ := os.Stat(f); !fi.ModTime().Equal(mt) {
		t.Errorf("mtime through the mount %v; want %v", fi.ModTime(), mt)
	}
	wantErrno(t, "chown", os.Chown(f, 12345, 12345), syscall.EPERM)
}

// TestSymlinks: links inside the mount work; on the physical backend a link
// leaving the mount is refused at creation; one the host planted is shown as
// data (issue 29), unless it is absolute, whose target (a host path) the
// backend does not show: that one is absent.
func TestSymlinks(t *testing.T) {
	host := t.TempDir()
	if err := os.MkdirAll(filepath.Join(host, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "sub/target"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"abs": "/etc/passwd", "up": "../../../../../etc/passwd", "sub/up2": "../.."} {
		if err := os.Symlink(target, filepath.Join(host, name)); err != nil {
			t.Fatal(err)
		}
	}
	pb, err := physical.New(host)
	if err != nil {
		t.Skipf("physical backend with stored links: %v", err)
	}
	t.Cleanup(func() { pb.Close() })
	d, _ := dir.New(pb)
	mp, _ := mountT(t, d, Options{})
	_, err = os.Lstat(filepath.Join(mp, "abs"))
	wantErrno(t, "lstat of the absolute link", err, syscall.ENOENT)
	for name, target := range map[string]string{"up": "../../../../../etc/passwd", "sub/up2": "../.."} {
		if got, err := os.Readlink(filepath.Join(mp, name)); err != nil || got != target {
			t.Errorf("readlink %s = %q, %v; want %q", name, got, err, target)
		}
	}
	ents, err := os.ReadDir(mp)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, e := range ents {
		listed[e.Name()] = true
	}
	if listed["abs"] || !listed["up"] {
		t.Errorf("listing %v: want up, not abs", listed)
	}
	wantErrno(t, "symlink to /etc/passwd", os.Symlink("/etc/passwd", filepath.Join(mp, "new")), syscall.EPERM)
	wantErrno(t, "symlink climbing out", os.Symlink("../x", filepath.Join(mp, "new")), syscall.EPERM)
	if err := os.Symlink("sub/target", filepath.Join(mp, "in")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(mp, "in")); err != nil || string(b) != "inside" {
		t.Fatalf("through the inside link: %q, %v", b, err)
	}
	if tgt, err := os.Readlink(filepath.Join(mp, "in")); err != nil || tgt != "sub/target" {
		t.Fatalf("readlink: %q, %v", tgt, err)
	}
}

// TestLeavingLinksNeverFollowedByServer: over a backend that holds its data
// privately (memory), a link leaving the mount is made, listed and read back
// through the mount as data, and the kernel follows it in the caller's
// namespace: reading through an absolute link reaches the host's file at that
// path, never the tree's entry at the same path re-rooted, which the server
// would reach if it followed the link itself.
func TestLeavingLinksNeverFollowedByServer(t *testing.T) {
	hostDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(hostDir, "f"), []byte("HOST"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, _ := dir.New(memory.New())
	decoy := strings.TrimPrefix(hostDir, "/")
	if err := d.MkdirAll(bg, decoy); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile(bg, decoy+"/f", []byte("DECOY"), 0o644); err != nil {
		t.Fatal(err)
	}
	mp, _ := mountT(t, d, Options{})
	if err := os.Symlink(hostDir, filepath.Join(mp, "abs")); err != nil {
		t.Fatalf("symlink to an absolute path: %v", err)
	}
	if err := os.Symlink("../climb", filepath.Join(mp, "up")); err != nil {
		t.Fatalf("symlink climbing out: %v", err)
	}
	for name, target := range map[string]string{"abs": hostDir, "up": "../climb"} {
		if got, err := d.Readlink(bg, name); err != nil || got != target {
			t.Fatalf("the Dir holds %s -> %q, %v; want %q", name, got, err, target)
		}
		if got, err := os.Readlink(filepath.Join(mp, name)); err != nil || got != target {
			t.Fatalf("readlink %s = %q, %v; want %q", name, got, err, target)
		}
	}
	if b, err := os.ReadFile(filepath.Join(mp, "abs", "f")); err != nil || string(b) != "HOST" {
		t.Fatalf("through abs: %q, %v; want the caller's own file", b, err)
	}
	if _, err := d.ReadFile(bg, "abs/f"); vfs.CodeOf(err) != vfs.CodeOutside {
		t.Fatalf("the Dir follows abs: %v", err)
	}
	ents, err := os.ReadDir(mp)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Contains(names, "abs") || !slices.Contains(names, "up") {
		t.Fatalf("listing %v", names)
	}
}

// TestSpecialFilesRefused: mkfifo and mknod through the mount are refused, and a
// FIFO the host made is absent (no process can block on it through the mount).
func TestSpecialFilesRefused(t *testing.T) {
	host := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(host, "hostfifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	pb, err := physical.New(host)
	if err != nil {
		t.Skipf("physical backend: %v", err)
	}
	t.Cleanup(func() { pb.Close() })
	d, _ := dir.New(pb)
	mp, _ := mountT(t, d, Options{})
	wantErrno(t, "mkfifo", syscall.Mkfifo(filepath.Join(mp, "fifo"), 0o644), syscall.EPERM)
	wantErrno(t, "mknod char device", syscall.Mknod(filepath.Join(mp, "null"), syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))), syscall.EPERM)
	_, err = os.Lstat(filepath.Join(mp, "hostfifo"))
	wantErrno(t, "lstat of the host's FIFO", err, syscall.ENOENT)
	ents, _ := os.ReadDir(mp)
	if len(ents) != 0 {
		t.Errorf("listing shows %v", ents)
	}
	if err := syscall.Mknod(filepath.Join(mp, "plain"), syscall.S_IFREG|0o600, 0); err != nil {
		t.Fatalf("mknod of a regular file: %v", err)
	}
}

// TestPolicyThroughMount: the default policy's secrets are absent, its
// persistence files cannot be written, also through links the guest makes to
// them, and every request is audited; with openat2 and with the portable
// resolver.
func TestPolicyThroughMount(t *testing.T) {
	for _, mode := range []physical.ResolverMode{physical.ResolverAuto, physical.ResolverPortable} {
		t.Run(map[physical.ResolverMode]string{physical.ResolverAuto: "openat2", physical.ResolverPortable: "portable"}[mode], func(t *testing.T) { policyThroughMount(t, mode) })
	}
}

func policyThroughMount(t *testing.T, mode physical.ResolverMode) {
	host := t.TempDir()
	for name, body := range map[string]string{".env": "TOKEN=1", ".ssh/id_rsa": "KEY", "main.go": "package main", ".git/config": "[core]", ".bashrc": "echo"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(host, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(host, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pb, err := physical.New(host, physical.WithResolver(mode))
	if err != nil {
		t.Skipf("physical backend: %v", err)
	}
	t.Cleanup(func() { pb.Close() })
	ring := audit.NewRing(1 << 12)
	d, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()), dir.WithAudit(ring))
	mp, _ := mountT(t, d, Options{})

	for _, name := range []string{".env", ".ssh/id_rsa", ".ssh"} {
		_, err := os.ReadFile(filepath.Join(mp, name))
		wantErrno(t, "read "+name, err, syscall.ENOENT)
		_, err = os.Lstat(filepath.Join(mp, name))
		wantErrno(t, "lstat "+name, err, syscall.ENOENT)
	}
	ents, err := os.ReadDir(mp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == ".ssh" {
			t.Error("listing shows .ssh")
		}
	}
	if b, err := os.ReadFile(filepath.Join(mp, "main.go")); err != nil || string(b) != "package main" {
		t.Fatalf("main.go: %q, %v", b, err)
	}
	wantErrno(t, "write .bashrc", os.WriteFile(filepath.Join(mp, ".bashrc"), []byte("evil"), 0o644), syscall.EACCES)
	wantErrno(t, "write .git/config", os.WriteFile(filepath.Join(mp, ".git/config"), []byte("evil"), 0o644), syscall.EACCES)
	wantErrno(t, "create .git/hooks", os.Mkdir(filepath.Join(mp, ".git/hooks"), 0o755), syscall.EACCES)
	wantErrno(t, "rename onto .bashrc", os.Rename(filepath.Join(mp, "main.go"), filepath.Join(mp, ".bashrc")), syscall.EACCES)
	// A link the guest makes to a protected place is refused (its target is
	// decided as a path). One the host tree already holds is followed by the
	// kernel, one request per step, and each step is decided where it is.
	for _, c := range []struct {
		link, target string
		through      func(string) error
		want         syscall.Errno
	}{
		{"k", ".ssh/id_rsa", func(l string) error { _, err := os.ReadFile(l); return err }, syscall.ENOENT},
		{"s", ".ssh", func(l string) error { _, err := os.ReadFile(filepath.Join(l, "id_rsa")); return err }, syscall.ENOENT},
		{"g", ".git", func(l string) error { return os.WriteFile(filepath.Join(l, "config"), []byte("evil"), 0o644) }, syscall.EACCES},
		{"rc", ".bashrc", func(l string) error { return os.WriteFile(l, []byte("evil"), 0o644) }, syscall.EACCES},
	} {
		wantErrno(t, "symlink "+c.link+" -> "+c.target, os.Symlink(c.target, filepath.Join(mp, c.link)), syscall.EACCES)
		if err := os.Symlink(c.target, filepath.Join(host, "host-"+c.link)); err != nil {
			t.Fatal(err)
		}
		wantErrno(t, "through host-"+c.link+" -> "+c.target, c.through(filepath.Join(mp, "host-"+c.link)), c.want)
	}
	if b, _ := os.ReadFile(filepath.Join(host, ".git/config")); string(b) != "[core]" {
		t.Fatalf(".git/config on the host = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(host, ".bashrc")); string(b) != "echo" {
		t.Fatalf(".bashrc on the host = %q", b)
	}
	var sawDenied, sawRead bool
	for _, e := range ring.Events() {
		if e.Outcome == audit.Outcome("denied") && strings.Contains(e.Path, ".env") {
			sawDenied = true
		}
		if e.Path == "main.go" && e.Outcome == audit.Outcome("ok") && e.Op == "read" {
			sawRead = true
		}
	}
	if !sawDenied || !sawRead {
		t.Errorf("audit trail: denied .env %v, opened main.go %v", sawDenied, sawRead)
	}
}

// TestReadOnly: a read-only Dir mounts read-only (EROFS), and a read-only mount
// of a Namespace refuses writes beneath it with EROFS while the rest is writable.
func TestReadOnly(t *testing.T) {
	mem := memory.New()
	d, _ := dir.New(mem)
	if err := d.WriteFile(bg, "f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	mp, _ := mountT(t, d.ReadOnly(), Options{})
	wantErrno(t, "write in a read-only mount", os.WriteFile(filepath.Join(mp, "f"), []byte("y"), 0o644), syscall.EROFS)
	wantErrno(t, "mkdir in a read-only mount", os.Mkdir(filepath.Join(mp, "d"), 0o755), syscall.EROFS)
	wantErrno(t, "remove in a read-only mount", os.Remove(filepath.Join(mp, "f")), syscall.EROFS)
	if b, err := os.ReadFile(filepath.Join(mp, "f")); err != nil || string(b) != "x" {
		t.Fatalf("read: %q, %v", b, err)
	}

	ns := vfs.NewNamespace()
	if err := ns.Mount(vfs.MustParse("rw"), memory.New(), vfs.MountOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ns.Mount(vfs.MustParse("ro"), mem, vfs.MountOptions{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	nd, ctl := dir.New(ns)
	mp2, _ := mountT(t, nd, Options{})
	wantErrno(t, "write in the read-only mount", os.WriteFile(filepath.Join(mp2, "ro/f"), []byte("y"), 0o644), syscall.EROFS)
	wantErrno(t, "create in the read-only mount", os.WriteFile(filepath.Join(mp2, "ro/new"), []byte("y"), 0o644), syscall.EROFS)
	if err := os.WriteFile(filepath.Join(mp2, "rw/new"), []byte("y"), 0o644); err != nil {
		t.Fatalf("write in the writable mount: %v", err)
	}
	ctl.SetWritable(false)
	wantErrno(t, "write while the host locks writes", os.WriteFile(filepath.Join(mp2, "rw/new"), []byte("z"), 0o644), syscall.EROFS)
	ctl.SetWritable(true)
	ctl.Revoke()
	_, err := os.ReadFile(filepath.Join(mp2, "rw/new"))
	wantErrno(t, "read after revocation", err, syscall.EACCES)
}

// TestMode0000: a file chmod'ed to 0000 reports mode 0000 and is closed to
// another user, while a 0644 file stays readable to that user.
func TestMode0000(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a reader under another uid")
	}
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip("no cat")
	}
	d, _ := dir.New(memory.New())
	mp, _ := mountT(t, d, Options{AllowOther: true})
	if err := os.Chmod(filepath.Dir(mp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(filepath.Dir(mp)), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{"closed": 0, "open": 0o644} {
		p := filepath.Join(mp, name)
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != mode {
			t.Fatalf("%s: mode %v, %v; want %v", name, fi.Mode(), err, mode)
		}
	}
	run := func(name string) error {
		c := exec.Command(cat, filepath.Join(mp, name))
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := c.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := run("open"); err != nil {
		t.Fatalf("another user reading a 0644 file: %v", err)
	}
	if err := run("closed"); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Fatalf("another user reading a 0000 file: %v; want permission denied", err)
	}
	if b, err := os.ReadFile(filepath.Join(mp, "closed")); err != nil || string(b) != "closed" {
		t.Fatalf("root reading the 0000 file: %q, %v", b, err)
	}
}

// TestInvalidate: with caches that would otherwise last an hour, a change made
// through another route is seen as soon as Invalidate's notifications are sent.
func TestInvalidate(t *testing.T) {
	d, _ := dir.New(memory.New())
	if err := d.WriteFile(bg, "f", []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.MkdirAll(bg, "sub"); err != nil {
		t.Fatal(err)
	}
	mp, s := mountT(t, d, Options{EntryTimeout: time.Hour, AttrTimeout: time.Hour, NegativeTimeout: time.Hour})
	if b, _ := os.ReadFile(filepath.Join(mp, "f")); string(b) != "old" {
		t.Fatalf("f = %q", b)
	}
	if _, err := os.Stat(filepath.Join(mp, "sub/new")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("sub/new: %v", err)
	}
	if err := d.WriteFile(bg, "f", []byte("new contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile(bg, "sub/new", []byte("n"), 0o644); err != nil {
		t.Fatal(err)
	}
	<-s.Invalidate("f")
	<-s.Invalidate("sub")
	if b, err := os.ReadFile(filepath.Join(mp, "f")); err != nil || string(b) != "new contents" {
		t.Errorf("f after Invalidate = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(mp, "sub/new")); err != nil {
		t.Errorf("sub/new after Invalidate: %v", err)
	}
}

// TestInvalidateFromHook: Invalidate called from a Dir hook while the kernel
// waits on a request of this server does not deadlock.
func TestInvalidateFromHook(t *testing.T) {
	var s *Server
	var mu sync.Mutex
	hook := hookFunc(func(r *policy.Request) {
		mu.Lock()
		srv := s
		mu.Unlock()
		if srv != nil {
			srv.Invalidate(r.Path)
		}
	})
	d, _ := dir.New(memory.New(), dir.WithHooks(hook))
	mp, srv := mountT(t, d, Options{})
	mu.Lock()
	s = srv
	mu.Unlock()
	done := make(chan error, 1)
	go func() {
		for i := range 50 {
			if err := os.WriteFile(filepath.Join(mp, fmt.Sprint("f", i%5)), []byte("x"), 0o644); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("writes through the mount stalled while the hook invalidated")
	}
}

type hookFunc func(r *policy.Request)

func (h hookFunc) Before(ctx context.Context, r *policy.Request) error { return nil }
func (h hookFunc) After(ctx context.Context, r *policy.Request, err error) {
	if r.Op.Writes() {
		h(r)
	}
}

// TestMmapShared: a shared writable mapping of a file in the mount writes
// through to the Dir once synced. The mapping is made by a child process: a page
// fault on a mapping served by this very process would stall the Go runtime
// (a faulting thread cannot be preempted while the server waits to be
// scheduled).
func TestMmapShared(t *testing.T) {
	d, _ := dir.New(memory.New())
	mp, _ := mountT(t, d, Options{})
	p := filepath.Join(mp, "m")
	if err := os.WriteFile(p, make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), "FUSEEXPORT_MMAP_CHILD="+p)
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	b, err := d.ReadFile(bg, "m")
	if err != nil || len(b) != 8192 || string(b[4096:4102]) != "mapped" {
		t.Fatalf("after msync the Dir holds %d bytes, %q, %v", len(b), b[4096:4102], err)
	}
}

func TestMain(m *testing.M) {
	if p := os.Getenv("FUSEEXPORT_SERVE_CHILD"); p != "" {
		serveChild(p)
	}
	if p := os.Getenv("FUSEEXPORT_MMAP_CHILD"); p != "" {
		if err := mmapWrite(p); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func mmapWrite(p string) error {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap MAP_SHARED: %w", err)
	}
	copy(m[4096:], "mapped")
	if err := unix.Msync(m, unix.MS_SYNC); err != nil {
		return err
	}
	return unix.Munmap(m)
}

// serveChild mounts a memory Dir holding "hello" on p, says "ready" on stdout,
// and serves until SIGINT or SIGTERM, as capfs mount does.
func serveChild(p string) {
	d, _ := dir.New(memory.New())
	if err := d.WriteFile(bg, "hello", []byte("hi"), 0o644); err != nil {
		os.Exit(2)
	}
	s, err := Mount(p, d, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(bg, os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Println("ready")
	if err := s.Serve(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// startServeChild starts serveChild on a fresh mount point and waits for it.
func startServeChild(t *testing.T) (string, *exec.Cmd) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("FUSE is not usable here: %v", err)
	}
	mp := t.TempDir()
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), "FUSEEXPORT_SERVE_CHILD="+mp)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		c.Process.Kill()
		c.Wait()
		t.Fatalf("child: %q, %v", line, err)
	}
	if b, err := os.ReadFile(filepath.Join(mp, "hello")); err != nil || string(b) != "hi" {
		t.Fatalf("reading the child's mount: %q, %v", b, err)
	}
	return mp, c
}

func mounted(mp string) bool {
	b, _ := os.ReadFile("/proc/self/mounts")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == mp {
			return true
		}
	}
	return false
}

// TestSignalUnmounts: SIGTERM and SIGINT make a serving process unmount and
// exit 0, leaving no mount behind.
func TestSignalUnmounts(t *testing.T) {
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		mp, c := startServeChild(t)
		if err := c.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(); err != nil {
			t.Errorf("%v: child exited with %v", sig, err)
		}
		if mounted(mp) {
			t.Errorf("%v: %s is still mounted", sig, mp)
			_ = detach(mp)
		}
	}
}

// TestStaleMount: a server killed with SIGKILL leaves a dead mount; CheckStale
// finds it, Mount refuses it, ClearStale detaches it and a new mount works.
func TestStaleMount(t *testing.T) {
	mp, c := startServeChild(t)
	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if !mounted(mp) {
		t.Skip("the kernel removed the mount with its server; nothing stale to find")
	}
	t.Cleanup(func() { _ = detach(mp) })
	if err := CheckStale(mp); !errors.Is(err, ErrStaleMount) {
		t.Fatalf("CheckStale = %v; want ErrStaleMount", err)
	}
	d, _ := dir.New(memory.New())
	if _, err := Mount(mp, d, Options{}); !errors.Is(err, ErrStaleMount) {
		t.Fatalf("Mount on the stale mount point = %v; want ErrStaleMount", err)
	}
	if err := ClearStale(mp); err != nil {
		t.Fatal(err)
	}
	if mounted(mp) || CheckStale(mp) != nil {
		t.Fatal("still stale after ClearStale")
	}
	s, err := Mount(mp, d, Options{})
	if err != nil {
		t.Fatalf("Mount after ClearStale: %v", err)
	}
	if err := s.Close(time.Second); err != nil {
		t.Fatal(err)
	}
}
