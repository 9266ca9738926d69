package billyfs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/util"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
)

// TestCrossedBoundary: a name that leaves the root is refused with an
// *fs.PathError carrying the operation, the guest's path and EPERM (the errno
// of path_outside_sandbox) for which errors.Is(err, billy.ErrCrossedBoundary)
// and errors.Is(err, fs.ErrPermission) hold, as go-billy's chroot helper
// reports crossing; nothing is created outside.
func TestCrossedBoundary(t *testing.T) {
	d, _ := dir.New(memory.New())
	root := New(d)
	if err := util.WriteFile(root, "bar", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fsys, err := root.Chroot("foo")
	if err != nil {
		t.Fatal(err)
	}
	type call struct {
		op, path string
		do       func() error
	}
	calls := []call{
		{"open", "..", func() error { _, err := fsys.Create(".."); return err }},
		{"open", "/foo/../../bar", func() error { _, err := fsys.Create("/foo/../../bar"); return err }},
		{"open", "../bar", func() error { _, err := fsys.Open("../bar"); return err }},
		{"open", "../new", func() error { _, err := fsys.OpenFile("../new", os.O_CREATE|os.O_WRONLY, 0o644); return err }},
		{"open", "../x/new", func() error { _, err := fsys.Create("../x/new"); return err }},
		{"stat", "../bar", func() error { _, err := fsys.Stat("../bar"); return err }},
		{"lstat", "../bar", func() error { _, err := fsys.Lstat("../bar"); return err }},
		{"rename", "../bar", func() error { return fsys.Rename("../bar", "x") }},
		{"rename", "../moved", func() error { return fsys.Rename("x", "../moved") }},
		{"remove", "../bar", func() error { return fsys.Remove("../bar") }},
		{"readlink", "../bar", func() error { _, err := fsys.Readlink("../bar"); return err }},
		{"readdir", "..", func() error { _, err := fsys.ReadDir(".."); return err }},
		{"mkdir", "../d", func() error { return fsys.MkdirAll("../d", 0o755) }},
		{"symlink", "../l", func() error { return fsys.Symlink("x", "../l") }},
		{"tempfile", "../t", func() error { _, err := fsys.TempFile("../t", "p"); return err }},
		{"tempfile", "/../u", func() error { _, err := fsys.TempFile("/../u", "p"); return err }},
		{"chroot", "../c", func() error { _, err := fsys.Chroot("../c"); return err }},
	}
	if err := util.WriteFile(fsys, "x", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		checkCrossed(t, c.do(), c.op, c.path)
	}
	ents, err := root.ReadDir("/")
	if err != nil || len(ents) != 2 {
		t.Errorf("the root holds %d entries, %v; want bar and foo only", len(ents), err)
	}
	if ents, err := fsys.ReadDir("/"); err != nil || len(ents) != 1 {
		t.Errorf("the chroot holds %d entries, %v; want x only", len(ents), err)
	}
	if b, err := util.ReadFile(root, "bar"); err != nil || string(b) != "x" {
		t.Errorf("bar = %q, %v", b, err)
	}
}

// checkCrossed fails t unless err is the *fs.PathError of op on path, the
// boundary refusal: billy.ErrCrossedBoundary, fs.ErrPermission and EPERM.
func checkCrossed(t *testing.T, err error, op, path string) {
	t.Helper()
	pe, ok := err.(*fs.PathError)
	if !ok || pe.Op != op || pe.Path != path {
		t.Errorf("%s %s: %#v; want *fs.PathError{%s %s}", op, path, err, op, path)
		return
	}
	var errno syscall.Errno
	if !errors.Is(err, billy.ErrCrossedBoundary) || !errors.Is(err, fs.ErrPermission) ||
		!errors.As(err, &errno) || errno != syscall.EPERM {
		t.Errorf("%s %s: %v; want billy.ErrCrossedBoundary, fs.ErrPermission and EPERM", op, path, err)
	}
}
