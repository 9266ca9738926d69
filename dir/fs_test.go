package dir_test

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// fsTree is a tree without symlinks to directories (fstest walks them as files).
func fsTree(t *testing.T) *dir.Dir {
	t.Helper()
	d, _ := dir.New(memory.New())
	for name, body := range map[string]string{
		"hello.txt":          "hello, world\n",
		"a/b/c.go":           "package c\n",
		"a/b/d.go":           "package c // d\n",
		"a/readme.md":        "# a\n",
		"x/y/z/deep.txt":     "deep",
		"x/y/z/deeper/w.txt": "",
		"big.bin":            string(make([]byte, 70000)),
	} {
		if i := lastSlash(name); i > 0 {
			must(t, d.MkdirAll(bg, name[:i]))
		}
		must(t, d.WriteFile(bg, name, []byte(body), 0o644))
	}
	must(t, d.MkdirAll(bg, "empty/dir"))
	must(t, d.Symlink(bg, "a/readme.md", "readme-link"))
	return d
}

func TestFSTestFS(t *testing.T) {
	d := fsTree(t)
	if err := fstest.TestFS(d.FS(), "hello.txt", "a/b/c.go", "a/b/d.go", "a/readme.md", "x/y/z/deep.txt", "empty/dir", "readme-link"); err != nil {
		t.Fatal(err)
	}
	sub, err := d.Sub(bg, "a")
	must(t, err)
	if err := fstest.TestFS(sub.FS(), "b/c.go", "b/d.go", "readme.md"); err != nil {
		t.Fatal(err)
	}
	fsub, err := fs.Sub(d.FS(), "x/y")
	must(t, err)
	if err := fstest.TestFS(fsub, "z/deep.txt", "z/deeper/w.txt"); err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(d.ReadOnly().FS(), "hello.txt"); err != nil {
		t.Fatal(err)
	}
}

func TestFSErrorsAndNames(t *testing.T) {
	d := fsTree(t)
	fsys := d.FS()
	for _, name := range []string{"/hello.txt", "../x", "a/../hello.txt", "a/", "", "./hello.txt"} {
		_, err := fsys.Open(name)
		var pe *fs.PathError
		if !errors.As(err, &pe) || !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("Open(%q) = %v, want *fs.PathError with fs.ErrInvalid", name, err)
		}
	}
	_, err := fsys.Open("missing")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open(missing) = %v", err)
	}
	_, err = fs.ReadFile(fsys, "a")
	if !errors.Is(err, fs.ErrInvalid) {
		t.Fatalf("ReadFile(dir) = %v", err)
	}
	if target, err := fs.ReadLink(fsys, "readme-link"); err != nil || target != "a/readme.md" {
		t.Fatalf("ReadLink = %q, %v", target, err)
	}
	fi, err := fs.Lstat(fsys, "readme-link")
	must(t, err)
	if fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("Lstat mode %v", fi.Mode())
	}
	matches, err := fs.Glob(fsys, "a/*/*.go")
	must(t, err)
	if !slices.Equal(matches, []string{"a/b/c.go", "a/b/d.go"}) {
		t.Fatalf("fs.Glob = %q", matches)
	}
	if _, err := fs.Glob(fsys, "a/["); err == nil {
		t.Fatal("bad pattern not reported")
	}
	// Walking through the view.
	var walked []string
	must(t, fs.WalkDir(fsys, "x", func(p string, de fs.DirEntry, err error) error {
		walked = append(walked, p)
		return err
	}))
	if !slices.Equal(walked, []string{"x", "x/y", "x/y/z", "x/y/z/deep.txt", "x/y/z/deeper", "x/y/z/deeper/w.txt"}) {
		t.Fatalf("WalkDir = %q", walked)
	}
}

func TestGlob(t *testing.T) {
	d, _, _ := newTree(t)
	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"**/*.go", []string{"dir/sub/c.go", "dir/sub/deep/d.go"}},
		{"/**/*.go", []string{"dir/sub/c.go", "dir/sub/deep/d.go"}},
		{"./dir/*/*.go", []string{"dir/sub/c.go"}},
		{"dir/**/*.txt", []string{"dir/b.txt", "dir/sub/deep/e.txt"}},
		{"*.txt", []string{"a.txt"}},
		{"{a,dir/b}.txt", []string{"a.txt", "dir/b.txt"}},
		{"other/.*", []string{"other/.env"}},
		{"dir/sub/[cd]*", []string{"dir/sub/c.go", "dir/sub/deep"}},
		{"nothing*", []string{}},
		{"a.txt", []string{"a.txt"}},
		// dlink -> dir: "**" does not descend into it, but it can be matched.
		{"dl*", []string{"dlink"}},
	} {
		got, err := d.Glob(bg, tc.pattern)
		if err != nil {
			t.Errorf("Glob(%q): %v", tc.pattern, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Glob(%q) = %q, want %q", tc.pattern, got, tc.want)
		}
	}
	all, err := d.Glob(bg, "**")
	must(t, err)
	if slices.ContainsFunc(all, func(s string) bool { return len(s) > 6 && s[:6] == "dlink/" }) {
		t.Fatalf("** followed a symlink: %q", all)
	}
	if !slices.IsSorted(all) || !slices.Contains(all, "dir/sub/deep/e.txt") {
		t.Fatalf("Glob(**) = %q", all)
	}
	for pattern, code := range map[string]vfs.Code{
		"":         vfs.CodeInvalidPath,
		"[":        vfs.CodeInvalidPath,
		"{a,b":     vfs.CodeInvalidPath,
		"../*":     vfs.CodeOutside,
		"dir/../*": vfs.CodeOutside,
		"a\x00*":   vfs.CodeInvalidPath,
	} {
		_, err := d.Glob(bg, pattern)
		if vfs.CodeOf(err) != code {
			t.Errorf("Glob(%q) = %v, want %s", pattern, err, code)
		}
	}
	sub, err := d.Sub(bg, "dir/sub")
	must(t, err)
	got, err := sub.Glob(bg, "**/*.go")
	must(t, err)
	if !slices.Equal(got, []string{"c.go", "deep/d.go"}) {
		t.Fatalf("Sub Glob = %q", got)
	}
}

func TestWalk(t *testing.T) {
	d, _, _ := newTree(t)
	var got []string
	must(t, d.Walk(bg, "", func(p string, de fs.DirEntry, err error) error {
		must(t, err)
		got = append(got, p)
		if p == "other" {
			return fs.SkipDir
		}
		return nil
	}))
	want := []string{".", "a.txt", "dir", "dir/b.txt", "dir/sub", "dir/sub/c.go", "dir/sub/deep", "dir/sub/deep/d.go", "dir/sub/deep/e.txt", "dlink", "empty", "link", "other"}
	if !slices.Equal(got, want) {
		t.Fatalf("Walk:\n got %q\nwant %q", got, want)
	}
	// SkipAll, and errors from fn come back unchanged.
	n := 0
	must(t, d.Walk(bg, "dir", func(string, fs.DirEntry, error) error {
		n++
		if n == 2 {
			return fs.SkipAll
		}
		return nil
	}))
	if n != 2 {
		t.Fatalf("SkipAll: %d calls", n)
	}
	mine := errors.New("mine")
	if err := d.Walk(bg, "dir", func(string, fs.DirEntry, error) error { return mine }); err != mine {
		t.Fatalf("Walk returned %v, want the callback's error", err)
	}
	// A missing root is reported to fn.
	var rootErr error
	_ = d.Walk(bg, "missing", func(p string, de fs.DirEntry, err error) error {
		rootErr = err
		return err
	})
	wantCode(t, rootErr, vfs.CodeNotFound)
	// A symlink root is not followed.
	got = nil
	must(t, d.Walk(bg, "dlink", func(p string, de fs.DirEntry, err error) error {
		got = append(got, p)
		return err
	}))
	if !slices.Equal(got, []string{"dlink"}) {
		t.Fatalf("Walk(dlink) = %q", got)
	}
}

func TestWalkRevokedMidway(t *testing.T) {
	d, ctl, _ := newTree(t)
	err := d.Walk(bg, "", func(p string, de fs.DirEntry, err error) error {
		if p == "dir" {
			ctl.Revoke()
		}
		return err
	})
	wantCode(t, err, vfs.CodeRevoked)
}

func TestGlobAlternativesBounded(t *testing.T) {
	d, _, _ := newTree(t)
	_, err := d.Glob(bg, strings.Repeat("{a,b}", 30))
	wantCode(t, err, vfs.CodeInvalidPath)
	got, err := d.Glob(bg, strings.Repeat("{a,b}", 8)+"{.txt,}")
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("got %q", got)
	}
	// Escaped braces do not count.
	_, err = d.Glob(bg, strings.Repeat(`\{a,b\}`, 40))
	must(t, err)
}
