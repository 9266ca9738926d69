package cas

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"testing"
	"testing/fstest"
	"time"

	"github.com/capfs/capfs/backends/memory"
	capdir "github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

var testTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func openOverlay(t testing.TB, s *Store, d Digest, opts ...memory.Option) *Overlay {
	t.Helper()
	o, err := s.OpenOverlay(bg, d, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// TestOverlayConformance runs the whole suite over overlays of the empty tree.
func TestOverlayConformance(t *testing.T) {
	s := newStore(t)
	empty := snap(t, s, build(t))
	vfstest.TestBackend(t, vfstest.Config{New: func(t *testing.T) vfs.Backend { return openOverlay(t, s, empty) }})
}

// TestOverlayConformanceWhiteouts runs the suite over overlays of a full tree
// whose every entry was removed first: every lookup, listing and creation of
// the suite goes through whiteouts over base entries with the names it uses.
func TestOverlayConformanceWhiteouts(t *testing.T) {
	s := newStore(t)
	base := snap(t, s, build(t, "a=base a", "b=base b", "f=base f", "d/", "d/e/", "d/e/y=y", "x/", "x/y=y",
		"link=base link", "sub/", "sub/f=f", "l->f", "dir/", "dir/file=z"))
	vfstest.TestBackend(t, vfstest.Config{New: func(t *testing.T) vfs.Backend {
		o := openOverlay(t, s, base)
		removeAll(t, o, vfs.Root)
		if es, err := o.ReadDir(bg, vfs.Root); err != nil || len(es) != 0 {
			t.Fatalf("whited-out root lists %v, %v", es, err)
		}
		return o
	}})
}

func removeAll(t *testing.T, b vfs.Backend, p vfs.Path) {
	t.Helper()
	es, err := b.ReadDir(bg, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		cp, _ := p.Child(e.Name)
		if e.Type == fs.ModeDir {
			removeAll(t, b, cp)
		}
		if err := b.Remove(bg, cp); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOverlayCommit(t *testing.T) {
	s := newStore(t)
	base := snap(t, s, build(t, goldenSpec...))
	o := openOverlay(t, s, base)
	if d, err := o.Commit(bg, ""); err != nil || d != base {
		t.Fatalf("commit of an unchanged overlay = %s, %v; want %s", d, err, base)
	}
	if o.encoded != 0 {
		t.Errorf("an unchanged commit encoded %d directories", o.encoded)
	}
	if err := vfstest.WriteFile(bg, o, P("bar"), []byte("changed")); err != nil {
		t.Fatal(err)
	}
	if err := o.Remove(bg, P("a")); err != nil {
		t.Fatal(err)
	}
	d, err := o.Commit(bg, "edited")
	if err != nil || d == base || o.Base() != d {
		t.Fatalf("commit = %s, %v", d, err)
	}
	if o.encoded != 1 {
		t.Errorf("a commit changing the root only encoded %d directories, want 1", o.encoded)
	}
	if r, _ := s.Root("edited"); r != d {
		t.Fatalf("root edited = %s, want %s", r, d)
	}
	want := snap(t, s, build(t, "bar=changed", "empty/", "foo/", "foo/baz*=#!/bin/sh\n", "link->foo/baz"))
	if d != want {
		t.Fatalf("committed %s, want %s", d, want)
	}
	// The base is untouched.
	if got, _ := readFile(mount(t, s, base), "bar"); got != "hello" {
		t.Fatalf("base changed: %q", got)
	}
	nf := mount(t, s, d)
	i1, _ := nf.Stat(bg, P("foo"))
	i2, _ := mount(t, s, base).Stat(bg, P("foo"))
	if i1.Sys.(*Entry).Digest != i2.Sys.(*Entry).Digest {
		t.Error("an unchanged subtree changed digest")
	}
	// Undoing the change gives the base's digest back.
	if err := vfstest.WriteFile(bg, o, P("bar"), []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := vfstest.WriteFile(bg, o, P("a"), nil); err != nil {
		t.Fatal(err)
	}
	if d, err := o.Commit(bg, ""); err != nil || d != base {
		t.Fatalf("commit after undoing = %s, %v; want the base %s", d, err, base)
	}
	if _, err := o.Commit(bg, "bad/name"); vfs.CodeOf(err) != vfs.CodeInvalidPath {
		t.Errorf("commit with an invalid name: %v", err)
	}
}

// TestOverlayCommitEqualsSnapshot edits an overlay in every way the view allows
// and checks the committed digest equals a fresh snapshot of the same view, and
// that untouched subtrees keep the base's digests.
func TestOverlayCommitEqualsSnapshot(t *testing.T) {
	s := newStore(t)
	base := snap(t, s, build(t, "keep/", "keep/a=1", "keep/deep/", "keep/deep/b=2",
		"edit/", "edit/x=x", "edit/y*=y", "edit/sub/", "edit/sub/z=z", "edit/ln->x",
		"mv/", "mv/in/", "mv/in/f=f", "gone/", "gone/g=g", "top=t"))
	o := openOverlay(t, s, base)
	ctx := bg
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(vfstest.WriteFile(ctx, o, P("edit/x"), []byte("x2")))
	must(o.Chmod(ctx, P("edit/x"), 0o755))
	must(o.Chmod(ctx, P("edit/y"), 0o644))
	must(o.Remove(ctx, P("edit/sub/z")))
	must(o.Symlink(ctx, "../top", P("edit/sub/up")))
	must(o.Remove(ctx, P("edit/ln")))
	must(o.Symlink(ctx, "y", P("edit/ln")))
	must(o.Rename(ctx, P("mv/in"), P("moved"), 0))
	must(o.Remove(ctx, P("gone/g")))
	must(o.Remove(ctx, P("gone")))
	must(o.Mkdir(ctx, P("new"), 0o700))
	must(vfstest.WriteFile(ctx, o, P("new/n"), []byte("n")))
	must(o.Link(ctx, P("top"), P("new/hard")))
	must(o.Mkdir(ctx, P("emptynew"), 0o755))

	d, err := o.Commit(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := snap(t, s, o); d != want {
		t.Fatalf("commit %s != snapshot of the same view %s", d, want)
	}
	// And the same content built from scratch.
	fresh := snap(t, s, build(t, "keep/", "keep/a=1", "keep/deep/", "keep/deep/b=2",
		"edit/", "edit/x*=x2", "edit/y=y", "edit/sub/", "edit/sub/up->../top", "edit/ln->y",
		"mv/", "moved/", "moved/f=f", "new/", "new/n=n", "new/hard=t", "emptynew/", "top=t"))
	if d != fresh {
		t.Fatalf("commit %s != snapshot of the same content built afresh %s", d, fresh)
	}
	bf, nf := mount(t, s, base), mount(t, s, d)
	for _, pair := range [][2]string{{"keep", "keep"}, {"keep/deep", "keep/deep"}, {"mv/in", "moved"}} {
		bi, _ := bf.Stat(ctx, P(pair[0]))
		ni, _ := nf.Stat(ctx, P(pair[1]))
		if bi.Sys.(*Entry).Digest != ni.Sys.(*Entry).Digest {
			t.Errorf("untouched subtree %s -> %s changed digest", pair[0], pair[1])
		}
	}
	// Only the changed directories were encoded: the root, edit, edit/sub, mv,
	// new, emptynew.
	if o.encoded != 6 {
		t.Errorf("encoded %d directories, want 6", o.encoded)
	}
}

// countingTree builds, directly in the store, a tree of dirs directories of
// files files each and returns its root. The files of one directory share their
// content ("file I\n"), so the tree is large but its blobs are few.
func countingTree(t testing.TB, s *Store, dirs, files int) Digest {
	t.Helper()
	var root Directory
	for i := range dirs {
		var sub Directory
		fd, err := s.PutBytes(bg, fmt.Appendf(nil, "file %d\n", i))
		if err != nil {
			t.Fatal(err)
		}
		for j := range files {
			sub.Files = append(sub.Files, FileNode{Name: fmt.Sprintf("f%05d", j), Digest: fd})
		}
		b, err := sub.Encode()
		if err != nil {
			t.Fatal(err)
		}
		sd, err := s.PutBytes(bg, b)
		if err != nil {
			t.Fatal(err)
		}
		root.Dirs = append(root.Dirs, DirNode{Name: fmt.Sprintf("d%03d", i), Digest: sd})
	}
	b, err := root.Encode()
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.PutBytes(bg, b)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestOverlayLazy opens an overlay over 20,000 files and counts the store's
// blob reads: none at open, and for a write and a commit only the directories
// on the path and the file written.
func TestOverlayLazy(t *testing.T) {
	s := newStore(t)
	base := countingTree(t, s, 40, 500)
	before := s.reads.Load()
	o := openOverlay(t, s, base)
	if n := s.reads.Load() - before; n != 0 {
		t.Fatalf("opening the overlay read %d blobs, want 0", n)
	}
	before = s.reads.Load()
	f, err := o.OpenFile(bg, P("d007/f00123"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("more\n")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// The root, d007, and the blob copied up.
	if n := s.reads.Load() - before; n != 3 {
		t.Errorf("a write copying up one file read %d blobs, want 3", n)
	}
	before = s.reads.Load()
	d, err := o.Commit(bg, "")
	if err != nil {
		t.Fatal(err)
	}
	if n := s.reads.Load() - before; n != 0 {
		t.Errorf("the commit read %d blobs, want 0 (directories cached, other files reused)", n)
	}
	if o.encoded != 2 {
		t.Errorf("the commit encoded %d directories, want 2", o.encoded)
	}
	got, err := readFile(mount(t, s, d), "d007/f00123")
	if err != nil || got != "file 7\nmore\n" {
		t.Errorf("committed file = %q, %v", got, err)
	}
	bi, _ := mount(t, s, base).Stat(bg, P("d008"))
	ni, _ := mount(t, s, d).Stat(bg, P("d008"))
	if bi.Sys.(*Entry).Digest != ni.Sys.(*Entry).Digest {
		t.Error("an untouched directory changed digest")
	}
	// Removing and renaming a whole base directory reads nothing beneath it.
	before = s.reads.Load()
	if err := o.Rename(bg, P("d010"), P("renamed"), 0); err != nil {
		t.Fatal(err)
	}
	if n := s.reads.Load() - before; n != 0 {
		t.Errorf("renaming a base directory read %d blobs", n)
	}
}

// TestOverlayBaseReads: reading through the overlay reads the base, and a handle
// opened before a copy-up keeps the old content.
func TestOverlayBaseReads(t *testing.T) {
	s := newStore(t)
	base := snap(t, s, build(t, goldenSpec...))
	o := openOverlay(t, s, base)
	r, err := o.OpenFile(bg, P("bar"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Write([]byte("x")); vfs.CodeOf(err) != vfs.CodePermission {
		t.Errorf("write through a read handle on a base file: %v", err)
	}
	if err := vfstest.WriteFile(bg, o, P("bar"), []byte("new")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 10)
	n, _ := r.ReadAt(b, 0)
	if string(b[:n]) != "hello" {
		t.Errorf("old handle reads %q", b[:n])
	}
	if got, _ := vfstest.ReadFile(bg, o, P("link")); string(got) != "#!/bin/sh\n" {
		t.Errorf("through the base link: %q", got)
	}
	i, err := o.Stat(bg, P("foo/baz"))
	if err != nil || i.Mode != 0o755 || i.Sys.(*Entry).Kind != "executable" {
		t.Errorf("base entry info = %+v, %v", i, err)
	}
	if _, err := s.OpenOverlay(bg, DigestOf([]byte("no such tree"))); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Errorf("overlay of a missing root: %v", err)
	}
}

// TestOverlayFSView runs testing/fstest over a Dir on an overlay with base
// files, copied-up and new files, a whiteout, a renamed directory and symlinks.
func TestOverlayFSView(t *testing.T) {
	s := newStore(t)
	base := snap(t, s, build(t, "a.txt=a", "run.sh*=#!", "dir/", "dir/keep.txt=k", "dir/sub/", "dir/sub/deep.txt=d",
		"old/", "old/x.txt=x", "link->a.txt"))
	o := openOverlay(t, s, base)
	if err := vfstest.WriteFile(bg, o, P("a.txt"), []byte("changed\n")); err != nil {
		t.Fatal(err)
	}
	if err := vfstest.WriteFile(bg, o, P("dir/sub/new.txt"), []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if err := o.Remove(bg, P("old/x.txt")); err != nil {
		t.Fatal(err)
	}
	if err := o.Rename(bg, P("dir/sub"), P("moved"), 0); err != nil {
		t.Fatal(err)
	}
	if err := o.Symlink(bg, "moved/deep.txt", P("ln")); err != nil {
		t.Fatal(err)
	}
	rd, _ := capdir.New(o)
	if err := fstest.TestFS(rd.FS(), "a.txt", "run.sh", "dir/keep.txt", "moved/deep.txt", "moved/new.txt", "link", "ln", "old"); err != nil {
		t.Fatal(err)
	}
}

// TestOverlaySubAndLocate: a Sub of a base directory writes into the overlay
// and stays pinned when the directory is renamed.
func TestOverlaySubAndLocate(t *testing.T) {
	s := newStore(t)
	base := snap(t, s, build(t, "dir/", "dir/sub/", "dir/sub/f=f"))
	o := openOverlay(t, s, base)
	sb, err := o.Sub(bg, P("dir/sub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := vfstest.WriteFile(bg, sb, P("g"), []byte("g")); err != nil {
		t.Fatal(err)
	}
	if err := o.Rename(bg, P("dir"), P("x"), 0); err != nil {
		t.Fatal(err)
	}
	if p, err := sb.(vfs.Locator).Locate(bg); err != nil || p.String() != "x/sub" {
		t.Fatalf("Locate = %v, %v; want x/sub", p, err)
	}
	if got, _ := vfstest.ReadFile(bg, o, P("x/sub/g")); string(got) != "g" {
		t.Errorf("write through the Sub: %q", got)
	}
	d, err := o.Commit(bg, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := snap(t, s, build(t, "x/", "x/sub/", "x/sub/f=f", "x/sub/g=g")); d != want {
		t.Errorf("commit %s, want %s", d, want)
	}
}

// TestOverlayQuotaAndClose: the memory options bound copy-ups, and a closed
// overlay refuses every call.
func TestOverlayQuotaAndClose(t *testing.T) {
	s := newStore(t)
	big := make([]byte, 64<<10)
	m := build(t)
	if err := vfstest.WriteFile(bg, m, P("big"), big); err != nil {
		t.Fatal(err)
	}
	base := snap(t, s, m)
	o := openOverlay(t, s, base, memory.WithQuota(16<<10))
	if err := o.Chmod(bg, P("big"), 0o755); vfs.CodeOf(err) != vfs.CodeQuota {
		t.Errorf("copying up a file over the quota: %v", err)
	}
	if i, err := o.Stat(bg, P("big")); err != nil || i.Mode != 0o644 {
		t.Errorf("after the failed copy-up: %+v, %v", i, err)
	}
	o.Close()
	if _, err := o.Stat(bg, P("big")); vfs.CodeOf(err) != vfs.CodeClosed {
		t.Errorf("stat after close: %v", err)
	}
	if _, err := o.Commit(bg, ""); vfs.CodeOf(err) != vfs.CodeClosed {
		t.Errorf("commit after close: %v", err)
	}
}

// TestOverlayConcurrentCommit races writers with commits: each commit is a
// tree in which every file holds one complete written value.
func TestOverlayConcurrentCommit(t *testing.T) {
	s := newStore(t)
	base := countingTree(t, s, 4, 20)
	o := openOverlay(t, s, base)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			p := P(fmt.Sprintf("d%03d/f%05d", i%4, i%20))
			val := []byte(fmt.Sprintf("value %d %s", i, string(make([]byte, 1000))))
			if err := vfstest.WriteFile(bg, o, p, val); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 5 {
		d, err := o.Commit(bg, "")
		if err != nil {
			t.Fatal(err)
		}
		f := mount(t, s, d)
		for i := range 4 {
			for j := range 20 {
				got, err := readFile(f, fmt.Sprintf("d%03d/f%05d", i, j))
				if err != nil {
					t.Fatal(err)
				}
				var k int
				_, serr := fmt.Sscanf(got, "value %d ", &k)
				whole := got == "" || got == fmt.Sprintf("file %d\n", i) ||
					serr == nil && len(got) == len(fmt.Sprintf("value %d ", k))+1000
				if !whole {
					t.Fatalf("torn file in a commit: %q", got)
				}
			}
		}
	}
	cancel()
	<-done
}
