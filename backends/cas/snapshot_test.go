package cas

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/physical"
	capdir "github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// counting counts the files a snapshot opens.
type counting struct {
	vfs.Backend
	opens atomic.Int64
}

func (c *counting) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	c.opens.Add(1)
	return c.Backend.OpenFile(ctx, p, flag, perm)
}

// writeTree writes n files under root with mtimes in the past.
func writeTree(t testing.TB, root string, n int) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	for i := range n {
		p := filepath.Join(root, fmt.Sprintf("d%d/s%d/f%d.txt", i%7, i%3, i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, old, old)
	}
	os.Symlink("d0/s0/f0.txt", filepath.Join(root, "link"))
	os.WriteFile(filepath.Join(root, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.Chtimes(filepath.Join(root, "run.sh"), old, old)
	// Change times cannot be set: let them age past the stat cache's racy window.
	time.Sleep(1100 * time.Millisecond)
}

func TestSnapshotStatCacheThroughDir(t *testing.T) {
	host := t.TempDir()
	writeTree(t, host, 200)
	pb, err := physical.New(host)
	if err != nil {
		t.Fatal(err)
	}
	c := &counting{Backend: pb}
	d, _ := capdir.New(c)
	s := newStore(t)
	opts := SnapshotOptions{StatCache: "test"}
	d1, err := s.Snapshot(bg, d.Backend(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := c.opens.Load(); n != 201 {
		t.Fatalf("cold snapshot opened %d files, want 201", n)
	}
	c.opens.Store(0)
	d2, err := s.Snapshot(bg, d.Backend(), opts)
	if err != nil || d2 != d1 {
		t.Fatalf("re-snapshot = %s, %v; want %s", d2, err, d1)
	}
	if n := c.opens.Load(); n != 0 {
		t.Fatalf("re-snapshot of an unchanged tree opened %d files", n)
	}
	// Change one file (size and mtime), chmod another: exactly those are re-read.
	p := filepath.Join(host, "d1/s1/f1.txt")
	os.WriteFile(p, []byte("changed!!\n"), 0o644)
	os.Chmod(filepath.Join(host, "d2/s2/f2.txt"), 0o755)
	d3, err := s.Snapshot(bg, d.Backend(), opts)
	if err != nil || d3 == d1 {
		t.Fatalf("snapshot after a change = %s, %v", d3, err)
	}
	if n := c.opens.Load(); n != 2 {
		t.Fatalf("snapshot after changing 2 files opened %d", n)
	}
	// Same result as a snapshot without any cache, and as the host walker.
	s2 := newStore(t)
	if d4, _ := s2.Snapshot(bg, d.Backend(), SnapshotOptions{}); d4 != d3 {
		t.Fatalf("uncached snapshot %s != cached %s", d4, d3)
	}
	if d5, err := s2.SnapshotHost(bg, host, SnapshotOptions{}); err != nil || d5 != d3 {
		t.Fatalf("host snapshot %s, %v != %s", d5, err, d3)
	}
	f := mount(t, s, d3)
	info, _ := f.Stat(bg, P("d2/s2/f2.txt"))
	if info.Mode != 0o755 {
		t.Errorf("chmod +x not recorded: %v", info.Mode)
	}
}

func TestSnapshotHostStatCache(t *testing.T) {
	host := t.TempDir()
	writeTree(t, host, 100)
	mkfifo(t, filepath.Join(host, "fifo"))
	s := newStore(t)
	var skipped []string
	opts := SnapshotOptions{Skipped: func(p string, _ fs.FileMode) { skipped = append(skipped, p) }}
	d1, err := s.SnapshotHost(bg, host, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 1 || skipped[0] != "fifo" {
		t.Errorf("skipped %v, want [fifo]", skipped)
	}
	c := s.loadStatCache("host:" + host)
	files, dirs := 0, 0
	for k := range c.old {
		if strings.HasPrefix(k, "\x00") {
			dirs++
		} else {
			files++
		}
	}
	if files != 101 || dirs != 29 {
		t.Fatalf("stat cache holds %d file and %d directory records, want 101 and 29", files, dirs)
	}
	// Same size, same mtime, new content: the inode's change time gives it away.
	p := filepath.Join(host, "d3/s0/f3.txt")
	fi, _ := os.Stat(p)
	os.WriteFile(p, []byte("file X\n"), 0o644)
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	d2, err := s.SnapshotHost(bg, host, opts)
	if err != nil || d2 == d1 {
		t.Fatalf("a same-size same-mtime change was missed: %s, %v", d2, err)
	}
	b, err := readFile(mount(t, s, d2), "d3/s0/f3.txt")
	if err != nil || b != "file X\n" {
		t.Fatalf("read %q, %v", b, err)
	}
}

func readFile(b vfs.Backend, p string) (string, error) {
	d, _ := capdir.New(b)
	data, err := d.ReadFile(bg, p)
	return string(data), err
}

func TestSnapshotHostRefusesSwappedLink(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644)
	host := t.TempDir()
	os.Symlink(outside, filepath.Join(host, "l"))
	s := newStore(t)
	d, err := s.SnapshotHost(bg, host, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := mount(t, s, d)
	if target, err := f.Readlink(bg, P("l")); err != nil || target != outside {
		t.Fatalf("link recorded as %q, %v", target, err)
	}
	// The recorded link is not followed out of the tree.
	if _, err := f.Stat(bg, P("l/secret")); vfs.CodeOf(err) != vfs.CodeOutside {
		t.Fatalf("stat through an absolute link: %v", err)
	}
	// The walker never follows a symlink: a directory replaced by a link is
	// refused when reached.
	h := &hostSourceForTest{}
	if err := h.check(t, host, outside); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotConcurrentWithChanges snapshots a tree while it changes: every
// snapshot either fails cleanly or yields a tree whose files are each one
// complete version.
func TestSnapshotConcurrentWithChanges(t *testing.T) {
	host := t.TempDir()
	writeTree(t, host, 50)
	s := newStore(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := filepath.Join(host, fmt.Sprintf("d%d/s%d/f%d.txt", i%7, i%3, i%50))
			tmp := p + ".tmp"
			os.WriteFile(tmp, []byte(fmt.Sprintf("version %d\n", i)), 0o644)
			os.Rename(tmp, p)
			time.Sleep(200 * time.Microsecond)
		}
	})
	for range 4 {
		d, err := s.SnapshotHost(bg, host, SnapshotOptions{})
		if err != nil {
			continue
		}
		if err := s.VerifyTree(bg, d); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

// refusing is a backend that refuses (fs_permission_denied) to list, stat or
// open what its deny set names, as a Dir's policy does.
type refusing struct {
	vfs.Backend
	list, stat, open string
}

func (r refusing) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	if p.String() == r.list {
		return nil, vfs.NewError(vfs.CodePermission, "readdir", p, "denied")
	}
	return r.Backend.ReadDir(ctx, p)
}

func (r refusing) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	if p.String() == r.stat {
		return vfs.Info{}, vfs.NewError(vfs.CodePermission, "lstat", p, "denied")
	}
	return r.Backend.Lstat(ctx, p)
}

func (r refusing) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	if p.String() == r.open {
		return nil, vfs.NewError(vfs.CodePermission, "open", p, "denied")
	}
	return r.Backend.OpenFile(ctx, p, flag, perm)
}

func TestSnapshotLeavesOutRefused(t *testing.T) {
	m := build(t, "keep=k", "secret/", "secret/key=s", "hidden=h", "sealed=x", "d/", "d/ok=ok")
	s := newStore(t)
	var mu sync.Mutex
	var denied []string
	d, err := s.Snapshot(bg, refusing{m, "secret", "hidden", "sealed"}, SnapshotOptions{Denied: func(p string, _ error) {
		mu.Lock()
		denied = append(denied, p)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := snap(t, s, build(t, "keep=k", "d/", "d/ok=ok"))
	if d != want {
		t.Errorf("snapshot %s, want the tree without the refused entries %s", d, want)
	}
	if len(denied) != 3 {
		t.Errorf("denied %v, want secret, hidden and sealed", denied)
	}
}

// TestSnapshotDirPolicyRefusals: a snapshot through a Dir with the default
// policy (one listing with status per directory) leaves out and reports what
// the policy hides, a file and a whole directory, and gives the digest the
// per-entry way gives (the same Dir's view with its listing-with-status
// hidden).
func TestSnapshotDirPolicyRefusals(t *testing.T) {
	host := t.TempDir()
	for name, data := range map[string]string{"main.go": "package main\n", ".env": "SECRET=1\n", ".ssh/id_rsa": "KEY\n", "sub/ok.txt": "ok\n", "sub/server.pem": "PEM\n"} {
		p := filepath.Join(host, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pb, err := physical.New(host)
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Close()
	d, _ := capdir.New(pb, capdir.WithPolicy(policy.Defaults()))
	if _, ok := d.Backend().(vfs.DirInfoReader); !ok {
		t.Fatal("a Dir's view lists no status: this test would not test the one-pass way")
	}
	var mu sync.Mutex
	var denied []string
	opts := SnapshotOptions{Denied: func(p string, _ error) {
		mu.Lock()
		denied = append(denied, p)
		mu.Unlock()
	}}
	s := newStore(t)
	got, err := s.Snapshot(bg, d.Backend(), opts)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(denied)
	if want := []string{".env", ".ssh", "sub/server.pem"}; !slices.Equal(denied, want) {
		t.Errorf("denied %q, want %q", denied, want)
	}
	denied = nil
	slow, err := newStore(t).Snapshot(bg, struct{ vfs.Backend }{d.Backend()}, opts)
	if err != nil || slow != got {
		t.Errorf("per-entry snapshot %s, %v; the one-pass one %s", slow, err, got)
	}
	want := snap(t, s, build(t, "main.go=package main\n", "sub/", "sub/ok.txt=ok\n"))
	if got != want {
		t.Errorf("snapshot %s, want the tree without the hidden entries %s", got, want)
	}
}

// TestRepairDropsStatCache: after Verify's repair removes a corrupt directory
// blob, the next snapshot stores it again (the stat cache, which would say it is
// stored, is gone).
func TestRepairDropsStatCache(t *testing.T) {
	host := t.TempDir()
	writeTree(t, host, 20)
	s := newStore(t)
	d1, err := s.SnapshotHost(bg, host, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SnapshotHost(bg, host, SnapshotOptions{}); err != nil { // records every directory
		t.Fatal(err)
	}
	f := mount(t, s, d1)
	info, _ := f.Stat(bg, P("d1/s1"))
	sub := info.Sys.(*Entry).Digest
	os.WriteFile(s.blobPath(sub), []byte{0, 'x'}, 0o600)
	rep, err := s.Verify(bg, true)
	if err != nil || len(rep.Corrupt) != 1 {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
	d2, err := s.SnapshotHost(bg, host, SnapshotOptions{})
	if err != nil || d2 != d1 {
		t.Fatalf("snapshot after repair = %s, %v", d2, err)
	}
	if err := s.VerifyTree(bg, d2); err != nil {
		t.Fatalf("the repaired directory was not stored again: %v", err)
	}
}
