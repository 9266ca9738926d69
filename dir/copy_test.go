package dir_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

func TestCopy(t *testing.T) {
	d, _, _ := newTree(t)
	must(t, d.Chmod(bg, "a.txt", 0o600))
	must(t, d.Copy(bg, "a.txt", "a2.txt"))
	if readString(t, d, "a2.txt") != "alpha" {
		t.Fatal("file copy")
	}
	if fi, _ := d.Stat(bg, "a2.txt"); fi.Mode().Perm() != 0o600 {
		t.Fatalf("copy perm %v", fi.Mode())
	}
	// Copying over an existing file replaces it.
	must(t, d.Copy(bg, "dir/b.txt", "a2.txt"))
	if readString(t, d, "a2.txt") != "beta" {
		t.Fatal("copy over a file")
	}
	// A symlink is copied as a link.
	must(t, d.Copy(bg, "link", "link2"))
	if target, err := d.Readlink(bg, "link2"); err != nil || target != "dir/b.txt" {
		t.Fatalf("copied link: %q, %v", target, err)
	}
	// A directory, recursively, links inside kept as links.
	must(t, d.Symlink(bg, "c.go", "dir/sub/cl"))
	must(t, d.Copy(bg, "dir", "dircopy"))
	var got []string
	must(t, d.Walk(bg, "dircopy", func(p string, de fs.DirEntry, err error) error {
		got = append(got, fmt.Sprintf("%s:%v", p, de.Type()))
		return err
	}))
	want := []string{"dircopy:d---------", "dircopy/b.txt:----------", "dircopy/sub:d---------", "dircopy/sub/c.go:----------", "dircopy/sub/cl:L---------", "dircopy/sub/deep:d---------", "dircopy/sub/deep/d.go:----------", "dircopy/sub/deep/e.txt:----------"}
	if !slices.Equal(got, want) {
		t.Fatalf("copied tree:\n got %q\nwant %q", got, want)
	}
	if readString(t, d, "dircopy/sub/deep/d.go") != "package deep\n" || readString(t, d, "dircopy/sub/cl") != "package c\n" {
		t.Fatal("copied contents")
	}
	// The copy is independent.
	must(t, d.WriteFile(bg, "dircopy/b.txt", []byte("changed"), 0o644))
	if readString(t, d, "dir/b.txt") != "beta" {
		t.Fatal("copy shares contents with the source")
	}

	wantCode(t, d.Copy(bg, "dir", "dircopy"), vfs.CodeExists)
	wantCode(t, d.Copy(bg, "dir", "dir/sub/inside"), vfs.CodeInvalidPath)
	wantCode(t, d.Copy(bg, "missing", "x"), vfs.CodeNotFound)
	wantCode(t, d.Copy(bg, "a.txt", "../x"), vfs.CodeOutside)
	wantCode(t, d.Copy(bg, "a.txt", "/"), vfs.CodeExists)

	// A link whose target would climb out of the tree from its new place is
	// copied as data (never followed); in a Sub, where it would climb into
	// the parent's tree, it is refused and nothing is created.
	must(t, d.Symlink(bg, "../a.txt", "dir/up"))
	must(t, d.Copy(bg, "dir/up", "up0"))
	if got, err := d.Readlink(bg, "up0"); err != nil || got != "../a.txt" {
		t.Fatalf("copied link = %q, %v", got, err)
	}
	_, err := d.ReadFile(bg, "up0")
	wantCode(t, err, vfs.CodeOutside)
	must(t, d.Symlink(bg, "../../a.txt", "dir/sub/up2"))
	sub, err := d.Sub(bg, "dir")
	must(t, err)
	wantCode(t, sub.Copy(bg, "up", "up0"), vfs.CodeOutside)
	wantCode(t, sub.Copy(bg, "sub", "s2"), vfs.CodeOutside)
	for _, n := range []string{"dir/up0", "dir/s2"} {
		if ok, _ := d.Exists(bg, n); ok {
			t.Fatalf("refused Copy created %s", n)
		}
	}
}

// failingCopy makes OpenFile for writing fail on one name, to break a copy midway.
type failingCopy struct {
	vfs.Backend
	name string
}

func (f failingCopy) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	if p.Base() == f.name && flag&0x3 != 0 {
		return nil, vfs.NewError(vfs.CodeQuota, "open", p, "test quota")
	}
	return f.Backend.OpenFile(ctx, p, flag, perm)
}

func TestCopyRollsBack(t *testing.T) {
	m := memory.New()
	seedBackend(t, m)
	d, _ := dir.New(failingCopy{m, "d.go"})
	err := d.Copy(bg, "dir", "copy")
	wantCode(t, err, vfs.CodeQuota)
	if ok, _ := d.Exists(bg, "copy"); ok {
		t.Fatal("a failed Copy left its partial destination")
	}
}

// crossMount is a backend whose renames between its two top-level directories fail
// with cross_mount, as across a Namespace's mounts.
type crossMount struct{ vfs.Backend }

func top(p vfs.Path) string { return p.Elems()[0] }

func (c crossMount) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	if !from.IsRoot() && !to.IsRoot() && top(from) != top(to) {
		return vfs.NewError(vfs.CodeCrossMount, "rename", from, "")
	}
	return c.Backend.Rename(ctx, from, to, flags)
}

func TestMove(t *testing.T) {
	d, _, _ := newTree(t)
	must(t, d.Move(bg, "a.txt", "dir/a.txt"))
	if readString(t, d, "dir/a.txt") != "alpha" {
		t.Fatal("move")
	}
	if ok, _ := d.Exists(bg, "a.txt"); ok {
		t.Fatal("source still there")
	}
	must(t, d.Move(bg, "dir/a.txt", "dir/b.txt")) // replaces a file
	if readString(t, d, "dir/b.txt") != "alpha" {
		t.Fatal("move over a file")
	}
	wantCode(t, d.Move(bg, "dir", "dir/sub/x"), vfs.CodeInvalidPath)
	wantCode(t, d.Move(bg, "missing", "x"), vfs.CodeNotFound)
	wantCode(t, d.Move(bg, "dir", "../x"), vfs.CodeOutside)
	wantCode(t, d.Move(bg, "/", "x"), vfs.CodeInvalidPath)
	err := d.Move(bg, "../x", "y")
	wantCode(t, err, vfs.CodeOutside)
	if e := err.(*vfs.Error); e.Path != "../x" || e.Op != "Move" {
		t.Fatalf("error %+v", e)
	}
	err = d.Move(bg, "dir", `a\b`)
	wantCode(t, err, vfs.CodeInvalidPath)
	if e := err.(*vfs.Error); e.Path != "dir" || e.Dest != `a\b` {
		t.Fatalf("error %+v", e)
	}
}

func TestMoveAcrossMounts(t *testing.T) {
	m := memory.New()
	seedBackend(t, m)
	d, _ := dir.New(crossMount{m})
	err := d.Move(bg, "dir", "other/dir")
	wantCode(t, err, vfs.CodeCrossMount)
	if e := err.(*vfs.Error); e.Path != "dir" || e.Dest != "other/dir" {
		t.Fatalf("cross_mount error addressed to %q -> %q", e.Path, e.Dest)
	}
	wantList(t, d, "dir", "b.txt", "sub")

	must(t, d.Move(bg, "dir", "other/dir", dir.AllowCopy()))
	if ok, _ := d.Exists(bg, "dir"); ok {
		t.Fatal("source kept after copy-move")
	}
	if readString(t, d, "other/dir/sub/deep/d.go") != "package deep\n" {
		t.Fatal("moved contents")
	}
	must(t, d.Move(bg, "a.txt", "empty/a.txt", dir.AllowCopy()))
	if readString(t, d, "empty/a.txt") != "alpha" {
		t.Fatal("moved file")
	}
}

// TestAtomicWrite runs readers against a writer that alternates two payloads:
// every read must see one payload whole.
func TestAtomicWrite(t *testing.T) {
	d, _ := dir.New(memory.New())
	p1 := bytes.Repeat([]byte("1"), 64<<10)
	p2 := bytes.Repeat([]byte("2"), 48<<10)
	must(t, d.WriteFile(bg, "f", p1, 0o644))
	f, err := d.OpenFile(bg, "f")
	must(t, err)
	const writes = 200
	var done atomic.Bool
	var wg sync.WaitGroup
	var bad atomic.Int64
	var reads atomic.Int64
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !done.Load() || i == 0; i++ {
				var b []byte
				var err error
				if i%2 == 0 {
					b, err = d.ReadFile(bg, "f")
				} else {
					b, err = f.ReadBytes(bg)
				}
				reads.Add(1)
				if err != nil || !(bytes.Equal(b, p1) || bytes.Equal(b, p2)) {
					bad.Add(1)
				}
			}
		}()
	}
	for i := 0; i < writes; i++ {
		payload := p1
		if i%2 == 0 {
			payload = p2
		}
		if i%3 == 0 {
			must(t, f.WriteBytes(bg, payload))
		} else {
			must(t, d.WriteFile(bg, "f", payload, 0o644))
		}
	}
	done.Store(true)
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Fatalf("%d of %d reads saw a torn or missing file", n, reads.Load())
	}
	names, err := d.List(bg, "")
	must(t, err)
	if !slices.Equal(names, []string{"f"}) {
		t.Fatalf("leftovers: %q", names)
	}
}
