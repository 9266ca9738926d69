package sqlite

import (
	"fmt"
	"os"
	"testing"

	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

func TestRemoveAll(t *testing.T) {
	f, name := newFS(t)
	must(t, vfstest.MkdirAll(bg, f, P("nm/a/b/c"), 0o755))
	for i := range 50 {
		must(t, vfstest.WriteFile(bg, f, P(fmt.Sprintf("nm/a/b/f%d", i)), make([]byte, 1000*i)))
	}
	must(t, vfstest.WriteFile(bg, f, P("keep"), []byte("outside")))
	must(t, f.Link(bg, P("keep"), P("nm/a/keep-link")))
	must(t, f.Link(bg, P("nm/a/b/f1"), P("nm/a/b/c/f1-again")))
	must(t, f.Symlink(bg, "../../keep", P("nm/a/b/link")))
	open, err := f.OpenFile(bg, P("nm/a/b/f7"), os.O_RDONLY, 0)
	must(t, err)
	used := f.Usage()
	must(t, f.RemoveAll(bg, P("nm")))
	if _, err := f.Lstat(bg, P("nm")); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Fatalf("nm after RemoveAll: %v", err)
	}
	// The open file still reads; the hard link's other name survives.
	b := make([]byte, 7000)
	if n, err := open.ReadAt(b, 0); n != 7000 || err != nil {
		t.Fatalf("open file after RemoveAll: %d, %v", n, err)
	}
	if info, err := f.Stat(bg, P("keep")); err != nil || info.Nlink != 1 {
		t.Fatalf("keep: %+v, %v", info, err)
	}
	must(t, open.Close())
	if err := f.RemoveAll(bg, P("nm")); err != nil {
		t.Fatalf("RemoveAll of a missing path: %v", err)
	}
	if err := f.RemoveAll(bg, vfs.Root); vfs.CodeOf(err) != vfs.CodeInvalidPath {
		t.Fatalf("RemoveAll of the root: %v", err)
	}
	if f.Usage() >= used {
		t.Fatalf("usage %d, was %d", f.Usage(), used)
	}
	usage := f.Usage()
	f = reopen(t, f, name)
	if f.Usage() != usage {
		t.Fatalf("usage %d after reopen, %d before", f.Usage(), usage)
	}
	if n := countRows(t, name, "inode"); n != 2 {
		t.Fatalf("%d inode rows, want 2 (root, keep)", n)
	}
	if n := countRows(t, name, "dentry"); n != 1 {
		t.Fatalf("%d dentry rows, want 1", n)
	}
}
