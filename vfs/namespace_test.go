package vfs_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
)

// Helpers shared by the namespace and read-only tests; prefixed "ns" so they cannot
// collide with other test files of package vfs_test.

var nsCtx = context.Background()

func nsP(s string) vfs.Path { return vfs.MustParse(s) }

func nsMust(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func nsWantCode(t testing.TB, err error, code vfs.Code) {
	t.Helper()
	if got := vfs.CodeOf(err); got != code {
		t.Errorf("error %v: code %q, want %q", err, got, code)
	}
}

// nsWantErr checks an error's code and its Path and Dest.
func nsWantErr(t testing.TB, err error, code vfs.Code, path, dest string) {
	t.Helper()
	var e *vfs.Error
	if !errors.As(err, &e) {
		t.Errorf("error %v (%T): want *vfs.Error %s at %q", err, err, code, path)
		return
	}
	if e.Code != code || e.Path != path || e.Dest != dest {
		t.Errorf("error %v: got %s %q -> %q, want %s %q -> %q", err, e.Code, e.Path, e.Dest, code, path, dest)
	}
}

func nsWrite(t testing.TB, b vfs.Backend, name, data string) {
	t.Helper()
	f, err := b.OpenFile(nsCtx, nsP(name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	nsMust(t, err)
	if _, err := io.WriteString(f, data); err != nil {
		t.Fatal(err)
	}
	nsMust(t, f.Close())
}

func nsRead(t testing.TB, b vfs.Backend, name string) string {
	t.Helper()
	f, err := b.OpenFile(nsCtx, nsP(name), os.O_RDONLY, 0)
	nsMust(t, err)
	defer f.Close()
	data, err := io.ReadAll(f)
	nsMust(t, err)
	return string(data)
}

func nsMkdirs(t testing.TB, b vfs.Backend, names ...string) {
	t.Helper()
	for _, name := range names {
		nsMust(t, b.Mkdir(nsCtx, nsP(name), 0o755))
	}
}

// nsNames lists entry names, a directory's with a trailing slash.
func nsNames(ents []vfs.DirEntry) string {
	var s []string
	for _, e := range ents {
		if e.Type.IsDir() {
			s = append(s, e.Name+"/")
		} else {
			s = append(s, e.Name)
		}
	}
	return strings.Join(s, " ")
}

func nsList(t testing.TB, b vfs.Backend, name string) string {
	t.Helper()
	p := vfs.Root
	if name != "." {
		p = nsP(name)
	}
	ents, err := b.ReadDir(nsCtx, p)
	nsMust(t, err)
	return nsNames(ents)
}

func nsExists(t testing.TB, b vfs.Backend, name string) bool {
	t.Helper()
	_, err := b.Lstat(nsCtx, nsP(name))
	if err == nil {
		return true
	}
	if vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Fatalf("Lstat(%s): %v", name, err)
	}
	return false
}

func nsMount(t testing.TB, n *vfs.Namespace, at string, b vfs.Backend, opts vfs.MountOptions) {
	t.Helper()
	p := vfs.Root
	if at != "." {
		p = nsP(at)
	}
	nsMust(t, n.Mount(p, b, opts))
}

func nsMountPaths(n *vfs.Namespace) string {
	var s []string
	for _, m := range n.Mounts() {
		s = append(s, m.Path.String())
	}
	return strings.Join(s, " ")
}

// memWith returns a memory backend holding the given files (name=content) and
// directories (name ending in "/").
func memWith(t testing.TB, specs ...string) *memory.FS {
	t.Helper()
	m := memory.New()
	for _, s := range specs {
		if dir, ok := strings.CutSuffix(s, "/"); ok {
			nsMkdirs(t, m, dir)
			continue
		}
		name, data, _ := strings.Cut(s, "=")
		nsWrite(t, m, name, data)
	}
	return m
}

const synthMode = fs.ModeDir | 0o555

func TestNamespaceEmpty(t *testing.T) {
	for name, n := range map[string]*vfs.Namespace{"new": vfs.NewNamespace(), "zero": new(vfs.Namespace)} {
		t.Run(name, func(t *testing.T) {
			info, err := n.Stat(nsCtx, vfs.Root)
			nsMust(t, err)
			if info.Mode != synthMode || info.Name != "." {
				t.Errorf("root Stat = %q %v, want . %v", info.Name, info.Mode, synthMode)
			}
			if got := nsList(t, n, "."); got != "" {
				t.Errorf("root lists %q", got)
			}
			if f := n.Features(); !f.ReadOnly || f.Persistent || f.Symlinks {
				t.Errorf("Features = %+v", f)
			}
			if len(n.Mounts()) != 0 {
				t.Errorf("Mounts = %v", n.Mounts())
			}
			nsWantErr(t, n.Mkdir(nsCtx, nsP("a"), 0o755), vfs.CodeReadOnly, "a", "")
			_, err = n.OpenFile(nsCtx, nsP("a"), os.O_WRONLY|os.O_CREATE, 0o644)
			nsWantErr(t, err, vfs.CodeReadOnly, "a", "")
			_, err = n.Stat(nsCtx, nsP("a"))
			nsWantErr(t, err, vfs.CodeNotFound, "a", "")
			_, err = n.ReadDir(nsCtx, nsP("a/b"))
			nsWantErr(t, err, vfs.CodeNotFound, "a/b", "")
			nsWantErr(t, n.Remove(nsCtx, vfs.Root), vfs.CodeReadOnly, ".", "")
			nsWantErr(t, n.Mkdir(nsCtx, vfs.Root, 0o755), vfs.CodeExists, ".", "")
			_, err = n.Sub(nsCtx, nsP("a"))
			nsWantErr(t, err, vfs.CodeNotFound, "a", "")
			sub, err := n.Sub(nsCtx, vfs.Root)
			nsMust(t, err)
			if got := nsList(t, sub, "."); got != "" {
				t.Errorf("Sub of an empty namespace lists %q", got)
			}
		})
	}
}

func TestNamespaceLongestPrefix(t *testing.T) {
	n := vfs.NewNamespace()
	mems := map[string]*memory.FS{}
	for _, at := range []string{".", "a", "ab", "a/b", "a/b/c/d"} {
		mems[at] = memWith(t, "who="+at)
		nsMount(t, n, at, mems[at], vfs.MountOptions{})
	}
	for path, want := range map[string]string{
		"who": ".", "a/who": "a", "ab/who": "ab", "a/b/who": "a/b", "a/b/c/d/who": "a/b/c/d",
	} {
		if got := nsRead(t, n, path); got != want {
			t.Errorf("read %s = %q, want %q", path, got, want)
		}
	}
	// "a/bc" belongs to mount "a", not to "a/b" nor "ab".
	nsWrite(t, n, "a/bc", "x")
	if !nsExists(t, mems["a"], "bc") || nsExists(t, mems["a/b"], "c") || nsExists(t, mems["ab"], "c") {
		t.Error("a/bc did not land in mount a only")
	}
	// "a/b/c" lies in mount a/b, above mount a/b/c/d: a synthetic directory there.
	info, err := n.Stat(nsCtx, nsP("a/b/c"))
	nsMust(t, err)
	if info.Mode != synthMode || info.Name != "c" {
		t.Errorf("Stat(a/b/c) = %q %v", info.Name, info.Mode)
	}
	info, err = n.Stat(nsCtx, nsP("a/b"))
	nsMust(t, err)
	if !info.Mode.IsDir() || info.Name != "b" {
		t.Errorf("Stat(a/b) = %q %v", info.Name, info.Mode)
	}
	if got := nsList(t, n, "a"); got != "b/ bc who" {
		t.Errorf("a lists %q", got)
	}
	if got := nsList(t, n, "."); got != "a/ ab/ who" {
		t.Errorf("root lists %q", got)
	}
}

func TestNamespaceSynthetic(t *testing.T) {
	n := vfs.NewNamespace()
	m := memWith(t, "f=data")
	nsMount(t, n, "x/y/z", m, vfs.MountOptions{})

	root, err := n.Stat(nsCtx, vfs.Root)
	nsMust(t, err)
	for _, name := range []string{"x", "x/y"} {
		for _, lstat := range []bool{false, true} {
			stat := n.Stat
			if lstat {
				stat = n.Lstat
			}
			info, err := stat(nsCtx, nsP(name))
			nsMust(t, err)
			if info.Mode != synthMode || info.Name != nsP(name).Base() || !info.ModTime.Equal(root.ModTime) {
				t.Errorf("stat %s = %+v, want synthetic dir with root's time %v", name, info, root.ModTime)
			}
		}
	}
	if root.ModTime.IsZero() {
		t.Error("NewNamespace's synthetic ModTime is zero")
	}
	for dir, want := range map[string]string{".": "x/", "x": "y/", "x/y": "z/", "x/y/z": "f"} {
		if got := nsList(t, n, dir); got != want {
			t.Errorf("%s lists %q, want %q", dir, got, want)
		}
	}
	for _, name := range []string{"q", "x/nope", "x/nope/deeper", "x/y/nope"} {
		_, err := n.Stat(nsCtx, nsP(name))
		nsWantErr(t, err, vfs.CodeNotFound, name, "")
		_, err = n.ReadDir(nsCtx, nsP(name))
		nsWantErr(t, err, vfs.CodeNotFound, name, "")
		_, err = n.OpenFile(nsCtx, nsP(name), os.O_RDONLY, 0)
		nsWantErr(t, err, vfs.CodeNotFound, name, "")
		_, err = n.Readlink(nsCtx, nsP(name))
		nsWantErr(t, err, vfs.CodeNotFound, name, "")
		nsWantErr(t, n.Chmod(nsCtx, nsP(name), 0o700), vfs.CodeNotFound, name, "")
	}

	now := time.Now()
	open := func(name string, flag int) error {
		f, err := n.OpenFile(nsCtx, nsP(name), flag, 0o644)
		if err == nil {
			f.Close()
		}
		return err
	}
	for _, c := range []struct {
		err        error
		code       vfs.Code
		path, dest string
	}{
		// Creating, removing or renaming inside a synthetic directory: read_only.
		{n.Mkdir(nsCtx, nsP("x/new"), 0o755), vfs.CodeReadOnly, "x/new", ""},
		{n.Mkdir(nsCtx, nsP("x/new/deeper"), 0o755), vfs.CodeReadOnly, "x/new/deeper", ""},
		{open("x/new", os.O_WRONLY|os.O_CREATE), vfs.CodeReadOnly, "x/new", ""},
		{open("x/y/new", os.O_RDWR|os.O_CREATE|os.O_EXCL), vfs.CodeReadOnly, "x/y/new", ""},
		{n.Symlink(nsCtx, "y", nsP("x/l")), vfs.CodeReadOnly, "x/l", ""},
		{n.Link(nsCtx, nsP("x/y/z/f"), nsP("x/h")), vfs.CodeReadOnly, "x/y/z/f", "x/h"},
		{n.Remove(nsCtx, nsP("x/nope")), vfs.CodeReadOnly, "x/nope", ""},
		{n.Rename(nsCtx, nsP("x/y/z/f"), nsP("x/f"), 0), vfs.CodeReadOnly, "x/y/z/f", "x/f"},
		// The synthetic directories themselves are fixed.
		{n.Remove(nsCtx, nsP("x")), vfs.CodeReadOnly, "x", ""},
		{n.Remove(nsCtx, nsP("x/y")), vfs.CodeReadOnly, "x/y", ""},
		{n.Remove(nsCtx, vfs.Root), vfs.CodeReadOnly, ".", ""},
		{n.Rename(nsCtx, nsP("x/y"), nsP("x/w"), 0), vfs.CodeReadOnly, "x/y", "x/w"},
		{n.Rename(nsCtx, nsP("x"), nsP("x/y/z/x"), 0), vfs.CodeReadOnly, "x", "x/y/z/x"},
		{n.Rename(nsCtx, nsP("x/y/z/f"), nsP("x/y"), vfs.RenameExchange), vfs.CodeReadOnly, "x/y/z/f", "x/y"},
		{n.Chmod(nsCtx, nsP("x"), 0o777), vfs.CodeReadOnly, "x", ""},
		{n.Chtimes(nsCtx, nsP("x/y"), now, now), vfs.CodeReadOnly, "x/y", ""},
		{open("x", os.O_WRONLY), vfs.CodeReadOnly, "x", ""},
		{open("x", os.O_RDONLY|os.O_TRUNC), vfs.CodeReadOnly, "x", ""},
		{n.Link(nsCtx, nsP("x"), nsP("x/y/z/x")), vfs.CodeReadOnly, "x", "x/y/z/x"},
		// Creating where a namespace directory stands: already_exists.
		{n.Mkdir(nsCtx, nsP("x"), 0o755), vfs.CodeExists, "x", ""},
		{n.Mkdir(nsCtx, nsP("x/y"), 0o755), vfs.CodeExists, "x/y", ""},
		{n.Mkdir(nsCtx, nsP("x/y/z"), 0o755), vfs.CodeExists, "x/y/z", ""},
		{n.Symlink(nsCtx, "t", nsP("x")), vfs.CodeExists, "x", ""},
		{n.Link(nsCtx, nsP("x/y/z/f"), nsP("x/y")), vfs.CodeExists, "x/y/z/f", "x/y"},
		{open("x", os.O_WRONLY|os.O_CREATE|os.O_EXCL), vfs.CodeExists, "x", ""},
	} {
		nsWantErr(t, c.err, c.code, c.path, c.dest)
	}
	_, err = n.Readlink(nsCtx, nsP("x"))
	nsWantErr(t, err, vfs.CodeInvalidPath, "x", "")
	if got := nsList(t, m, "."); got != "f" {
		t.Errorf("refused calls changed the mount: it lists %q", got)
	}

	// A MkdirAll in the style of os.MkdirAll (already_exists is fine) works through
	// synthetic parents, and the deep mount is writable.
	for _, p := range []string{"x", "x/y", "x/y/z", "x/y/z/new", "x/y/z/new/deeper"} {
		if err := n.Mkdir(nsCtx, nsP(p), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			t.Errorf("mkdir %s: %v", p, err)
		}
	}
	if !nsExists(t, m, "new/deeper") {
		t.Error("mkdir under the mount did not reach it")
	}
	nsWrite(t, n, "x/y/z/g", "g")
	if got := nsRead(t, m, "g"); got != "g" {
		t.Errorf("mount holds g = %q", got)
	}

	// A synthetic directory opens read-only as a directory.
	f, err := n.OpenFile(nsCtx, nsP("x/y"), os.O_RDONLY, 0)
	nsMust(t, err)
	info, err := f.Stat()
	nsMust(t, err)
	if info.Mode != synthMode || info.Name != "y" {
		t.Errorf("open synthetic: Stat = %+v", info)
	}
	_, err = f.Read(make([]byte, 4))
	nsWantErr(t, err, vfs.CodeIsDir, "x/y", "")
	_, err = f.ReadAt(make([]byte, 4), 0)
	nsWantErr(t, err, vfs.CodeIsDir, "x/y", "")
	_, err = f.Write([]byte("x"))
	nsWantErr(t, err, vfs.CodeReadOnly, "x/y", "")
	_, err = f.WriteAt([]byte("x"), 0)
	nsWantErr(t, err, vfs.CodeReadOnly, "x/y", "")
	nsWantErr(t, f.Truncate(0), vfs.CodeReadOnly, "x/y", "")
	if off, err := f.Seek(0, io.SeekStart); off != 0 || err != nil {
		t.Errorf("Seek = %d, %v", off, err)
	}
	nsMust(t, f.Sync())
	nsMust(t, f.Close())
	nsWantCode(t, f.Close(), vfs.CodeClosed)
	_, err = f.Stat()
	nsWantCode(t, err, vfs.CodeClosed)
	_, err = f.Read(make([]byte, 4))
	nsWantCode(t, err, vfs.CodeClosed)
	_, err = f.Seek(0, io.SeekStart)
	nsWantCode(t, err, vfs.CodeClosed)
	_, err = f.Write([]byte("x"))
	nsWantCode(t, err, vfs.CodeClosed)
	if !errors.Is(f.Sync(), fs.ErrClosed) {
		t.Error("Sync after Close does not match fs.ErrClosed")
	}

	if n.Features().ReadOnly {
		t.Error("a namespace with a writable mount reports ReadOnly")
	}
}

func TestNamespaceListingMerged(t *testing.T) {
	base := memWith(t, "b=b", "m=shadowed file", "z/", "z/a=a", "z/zz=zz", "q=a file", "s/", "s/real=r")
	nsMust(t, base.Symlink(nsCtx, "s", nsP("sl")))
	n := vfs.NewNamespace()
	nsMount(t, n, ".", base, vfs.MountOptions{})
	nsMount(t, n, "m", memWith(t, "inner=i"), vfs.MountOptions{})
	nsMount(t, n, "c/d", memory.New(), vfs.MountOptions{})
	nsMount(t, n, "z/k", memory.New(), vfs.MountOptions{})
	nsMount(t, n, "z/zz", memory.New(), vfs.MountOptions{})
	nsMount(t, n, "q/r", memory.New(), vfs.MountOptions{})
	nsMount(t, n, "sl/t", memory.New(), vfs.MountOptions{})

	for dir, want := range map[string]string{
		".":  "b c/ m/ q/ s/ sl/ z/",
		"z":  "a k/ zz/",
		"m":  "inner",
		"c":  "d/",
		"q":  "r/",
		"sl": "real t/", // the covering mount's directory (through the link) plus the mount
	} {
		if got := nsList(t, n, dir); got != want {
			t.Errorf("%s lists %q, want %q", dir, got, want)
		}
	}
	// A mount point reads as its backend's root, named after the mount.
	for _, stat := range []func(context.Context, vfs.Path) (vfs.Info, error){n.Stat, n.Lstat} {
		info, err := stat(nsCtx, nsP("m"))
		nsMust(t, err)
		if !info.Mode.IsDir() || info.Name != "m" {
			t.Errorf("stat m = %q %v", info.Name, info.Mode)
		}
		// A directory above a mount that the covering mount has is that directory.
		info, err = stat(nsCtx, nsP("z"))
		nsMust(t, err)
		if info.Mode != fs.ModeDir|0o755 || info.Name != "z" {
			t.Errorf("stat z = %q %v, want the base backend's directory", info.Name, info.Mode)
		}
		// Ones the covering mount lacks (c) or has as a file (q) are synthetic.
		for _, name := range []string{"c", "q"} {
			info, err = stat(nsCtx, nsP(name))
			nsMust(t, err)
			if info.Mode != synthMode || info.Name != name {
				t.Errorf("stat %s = %q %v, want synthetic", name, info.Name, info.Mode)
			}
		}
	}
	// Writes next to a mount in a real directory reach the covering backend.
	nsWrite(t, n, "z/new", "n")
	if got := nsRead(t, base, "z/new"); got != "n" {
		t.Errorf("base z/new = %q", got)
	}
	// Inside synthetic ones they are refused, and the shadowed file is untouched.
	_, err := n.OpenFile(nsCtx, nsP("c/new"), os.O_WRONLY|os.O_CREATE, 0o644)
	nsWantErr(t, err, vfs.CodeReadOnly, "c/new", "")
	nsWantErr(t, n.Mkdir(nsCtx, nsP("q/new"), 0o755), vfs.CodeReadOnly, "q/new", "")
	nsWantErr(t, n.Symlink(nsCtx, "r", nsP("q/l")), vfs.CodeReadOnly, "q/l", "")
	nsWantErr(t, n.Link(nsCtx, nsP("b"), nsP("c/b")), vfs.CodeReadOnly, "b", "c/b")
	nsWantErr(t, n.Rename(nsCtx, nsP("b"), nsP("q/b"), 0), vfs.CodeReadOnly, "b", "q/b")
	nsWantErr(t, n.Chmod(nsCtx, nsP("q"), 0o700), vfs.CodeReadOnly, "q", "")
	_, err = n.Readlink(nsCtx, nsP("q"))
	nsWantErr(t, err, vfs.CodeInvalidPath, "q", "")
	f, err := n.OpenFile(nsCtx, nsP("q"), os.O_RDONLY, 0)
	nsMust(t, err)
	_, err = f.Read(make([]byte, 8))
	nsWantErr(t, err, vfs.CodeIsDir, "q", "")
	nsMust(t, f.Close())
	if got := nsRead(t, base, "q"); got != "a file" {
		t.Errorf("shadowed file q = %q", got)
	}
	// A real directory above a mount opens as the backend's directory.
	f, err = n.OpenFile(nsCtx, nsP("z"), os.O_RDONLY, 0)
	nsMust(t, err)
	info, err := f.Stat()
	nsMust(t, err)
	if info.Mode != fs.ModeDir|0o755 {
		t.Errorf("open z: mode %v", info.Mode)
	}
	nsMust(t, f.Close())
	// Chmod on it reaches the backend.
	nsMust(t, n.Chmod(nsCtx, nsP("z"), 0o700))
	if info, _ := base.Stat(nsCtx, nsP("z")); info.Mode.Perm() != 0o700 {
		t.Errorf("chmod z: base has %v", info.Mode)
	}
}

func TestNamespaceShadowing(t *testing.T) {
	base := memWith(t, "m/", "m/secret=s", "m/both=base")
	mnt := memWith(t, "both=mount")
	n := vfs.NewNamespace()
	nsMount(t, n, ".", base, vfs.MountOptions{})
	nsMount(t, n, "m", mnt, vfs.MountOptions{})
	_, err := n.Stat(nsCtx, nsP("m/secret"))
	nsWantErr(t, err, vfs.CodeNotFound, "m/secret", "")
	if got := nsRead(t, n, "m/both"); got != "mount" {
		t.Errorf("m/both = %q", got)
	}
	nsWrite(t, n, "m/new", "n")
	if !nsExists(t, mnt, "new") || nsExists(t, base, "m/new") {
		t.Error("a write under the mount point did not land in the mount only")
	}
	nsMust(t, n.Unmount(nsP("m")))
	if got := nsRead(t, n, "m/secret"); got != "s" {
		t.Errorf("after unmount m/secret = %q", got)
	}
	if got := nsList(t, n, "m"); got != "both secret" {
		t.Errorf("after unmount m lists %q", got)
	}
}

func TestNamespaceMountPointsFixed(t *testing.T) {
	base := memWith(t, "f=f", "a/", "a/x=x")
	mnt := memWith(t, "g=g")
	n := vfs.NewNamespace()
	nsMount(t, n, ".", base, vfs.MountOptions{})
	nsMount(t, n, "m", mnt, vfs.MountOptions{})
	nsMount(t, n, "a/b", memory.New(), vfs.MountOptions{})
	before := roState(t, base) + "|" + roState(t, mnt)
	for _, c := range []struct {
		err        error
		code       vfs.Code
		path, dest string
	}{
		{n.Remove(nsCtx, nsP("m")), vfs.CodeReadOnly, "m", ""},
		{n.Remove(nsCtx, nsP("a")), vfs.CodeReadOnly, "a", ""},
		{n.Remove(nsCtx, nsP("a/b")), vfs.CodeReadOnly, "a/b", ""},
		{n.Remove(nsCtx, vfs.Root), vfs.CodeReadOnly, ".", ""},
		{n.Rename(nsCtx, nsP("m"), nsP("n"), 0), vfs.CodeReadOnly, "m", "n"},
		{n.Rename(nsCtx, nsP("f"), nsP("m"), 0), vfs.CodeReadOnly, "f", "m"},
		{n.Rename(nsCtx, nsP("f"), nsP("a"), 0), vfs.CodeReadOnly, "f", "a"},
		{n.Rename(nsCtx, nsP("a"), nsP("a2"), 0), vfs.CodeReadOnly, "a", "a2"},
		{n.Rename(nsCtx, nsP("m"), nsP("f"), vfs.RenameExchange), vfs.CodeReadOnly, "m", "f"},
		{n.Rename(nsCtx, nsP("f"), vfs.Root, 0), vfs.CodeReadOnly, "f", "."},
		{n.Mkdir(nsCtx, nsP("m"), 0o755), vfs.CodeExists, "m", ""},
		{n.Mkdir(nsCtx, nsP("a"), 0o755), vfs.CodeExists, "a", ""},
		{n.Symlink(nsCtx, "f", nsP("m")), vfs.CodeExists, "m", ""},
		{n.Link(nsCtx, nsP("f"), nsP("a")), vfs.CodeExists, "f", "a"},
		{n.Link(nsCtx, nsP("m"), nsP("m2")), vfs.CodeReadOnly, "m", "m2"},
	} {
		nsWantErr(t, c.err, c.code, c.path, c.dest)
	}
	if after := roState(t, base) + "|" + roState(t, mnt); after != before {
		t.Errorf("refused calls changed the backends:\n%s\n%s", before, after)
	}
	// Chmod and Chtimes on a mount point act on the mounted root.
	nsMust(t, n.Chmod(nsCtx, nsP("m"), 0o700))
	when := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	nsMust(t, n.Chtimes(nsCtx, nsP("m"), time.Time{}, when))
	info, err := mnt.Stat(nsCtx, vfs.Root)
	nsMust(t, err)
	if info.Mode.Perm() != 0o700 || !info.ModTime.Equal(when) {
		t.Errorf("mounted root after chmod/chtimes: %v %v", info.Mode, info.ModTime)
	}
	info, err = n.Stat(nsCtx, nsP("m"))
	nsMust(t, err)
	if info.Mode.Perm() != 0o700 || info.Name != "m" {
		t.Errorf("Stat(m) = %q %v", info.Name, info.Mode)
	}
	// A mount point opens as the mounted root, named after the mount.
	f, err := n.OpenFile(nsCtx, nsP("m"), os.O_RDONLY, 0)
	nsMust(t, err)
	info, err = f.Stat()
	nsMust(t, err)
	if !info.Mode.IsDir() || info.Name != "m" {
		t.Errorf("open m: Stat = %q %v", info.Name, info.Mode)
	}
	_, err = f.Read(make([]byte, 1))
	nsWantErr(t, err, vfs.CodeIsDir, "m", "")
	nsMust(t, f.Close())
}

func TestNamespaceCrossMount(t *testing.T) {
	base := memWith(t, "f=f")
	mnt := memWith(t, "g=g")
	nested := memory.New()
	n := vfs.NewNamespace()
	nsMount(t, n, ".", base, vfs.MountOptions{})
	nsMount(t, n, "m", mnt, vfs.MountOptions{})
	nsMount(t, n, "m/n", nested, vfs.MountOptions{})
	before := roState(t, base) + "|" + roState(t, mnt) + "|" + roState(t, nested)
	for _, c := range []struct {
		err      error
		from, to string
	}{
		{n.Rename(nsCtx, nsP("f"), nsP("m/f"), 0), "f", "m/f"},
		{n.Rename(nsCtx, nsP("m/g"), nsP("g"), 0), "m/g", "g"},
		{n.Rename(nsCtx, nsP("m/g"), nsP("m/n/g"), 0), "m/g", "m/n/g"},
		{n.Rename(nsCtx, nsP("f"), nsP("m/g"), vfs.RenameExchange), "f", "m/g"},
		{n.Rename(nsCtx, nsP("f"), nsP("m/g"), vfs.RenameNoReplace), "f", "m/g"},
		{n.Link(nsCtx, nsP("f"), nsP("m/f")), "f", "m/f"},
		{n.Link(nsCtx, nsP("m/g"), nsP("m/n/g")), "m/g", "m/n/g"},
	} {
		nsWantErr(t, c.err, vfs.CodeCrossMount, c.from, c.to)
		if !errors.Is(c.err, vfs.ErrCrossMount) {
			t.Errorf("%v does not match vfs.ErrCrossMount", c.err)
		}
	}
	if after := roState(t, base) + "|" + roState(t, mnt) + "|" + roState(t, nested); after != before {
		t.Errorf("cross-mount calls changed the backends:\n%s\n%s", before, after)
	}
	// Within one mount both work.
	nsMust(t, n.Rename(nsCtx, nsP("m/g"), nsP("m/h"), 0))
	nsMust(t, n.Link(nsCtx, nsP("m/h"), nsP("m/h2")))
	if got := nsList(t, mnt, "."); got != "h h2" {
		t.Errorf("mount lists %q", got)
	}
	info, err := n.Stat(nsCtx, nsP("m/h2"))
	nsMust(t, err)
	if info.Nlink != 2 {
		t.Errorf("m/h2 Nlink = %d", info.Nlink)
	}
}

func TestNamespaceReadOnlyMount(t *testing.T) {
	base := memory.New()
	ro := memWith(t, "f=data", "d/", "d/g=g")
	nsMust(t, ro.Symlink(nsCtx, "f", nsP("l")))
	n := vfs.NewNamespace()
	nsMount(t, n, ".", base, vfs.MountOptions{})
	nsMount(t, n, "ro", ro, vfs.MountOptions{ReadOnly: true})
	before := roState(t, ro)

	now := time.Now()
	type check struct {
		err        error
		path, dest string
	}
	checks := []check{
		{n.Mkdir(nsCtx, nsP("ro/new"), 0o755), "ro/new", ""},
		{n.Remove(nsCtx, nsP("ro/f")), "ro/f", ""},
		{n.Remove(nsCtx, nsP("ro/d/g")), "ro/d/g", ""},
		{n.Rename(nsCtx, nsP("ro/f"), nsP("ro/f2"), 0), "ro/f", "ro/f2"},
		{n.Symlink(nsCtx, "f", nsP("ro/l2")), "ro/l2", ""},
		{n.Link(nsCtx, nsP("ro/f"), nsP("ro/f3")), "ro/f", "ro/f3"},
		{n.Chmod(nsCtx, nsP("ro/f"), 0o600), "ro/f", ""},
		{n.Chmod(nsCtx, nsP("ro"), 0o700), "ro", ""},
		{n.Chtimes(nsCtx, nsP("ro/d"), now, now), "ro/d", ""},
	}
	for _, flag := range []int{os.O_WRONLY, os.O_RDWR, os.O_CREATE, os.O_TRUNC, os.O_APPEND,
		os.O_WRONLY | os.O_CREATE | os.O_EXCL, os.O_RDWR | os.O_APPEND | os.O_TRUNC} {
		for _, name := range []string{"ro/f", "ro/l", "ro/d/new"} {
			f, err := n.OpenFile(nsCtx, nsP(name), flag, 0o644)
			if f != nil {
				t.Errorf("OpenFile(%s, %#x) returned a file", name, flag)
				f.Close()
			}
			checks = append(checks, check{err, name, ""})
		}
	}
	for _, c := range checks {
		nsWantErr(t, c.err, vfs.CodeReadOnly, c.path, c.dest)
	}
	// Reads work; a file opened for reading refuses writes, addressed in the namespace.
	if got := nsRead(t, n, "ro/l"); got != "data" {
		t.Errorf("read ro/l = %q", got)
	}
	f, err := n.OpenFile(nsCtx, nsP("ro/f"), os.O_RDONLY, 0)
	nsMust(t, err)
	_, err = f.Write([]byte("x"))
	nsWantErr(t, err, vfs.CodeReadOnly, "ro/f", "")
	nsWantErr(t, f.Truncate(0), vfs.CodeReadOnly, "ro/f", "")
	nsMust(t, f.Close())
	if after := roState(t, ro); after != before {
		t.Errorf("read-only mount changed:\n%s\n%s", before, after)
	}
	// The rest of the namespace stays writable.
	nsWrite(t, n, "w", "w")
	mounts := n.Mounts()
	if len(mounts) != 2 || !mounts[1].Options.ReadOnly || !mounts[1].Features.ReadOnly ||
		mounts[0].Options.ReadOnly || mounts[0].Features.ReadOnly || mounts[1].Path.String() != "ro" {
		t.Errorf("Mounts = %+v", mounts)
	}
	if n.Features().ReadOnly {
		t.Error("namespace reports ReadOnly with a writable root")
	}
	sub, err := n.Sub(nsCtx, nsP("ro/d"))
	nsMust(t, err)
	if !sub.Features().ReadOnly {
		t.Error("Sub inside a read-only mount is writable")
	}
	nsWantErr(t, sub.Remove(nsCtx, nsP("g")), vfs.CodeReadOnly, "g", "")
	// The original backend is not changed by the mount option.
	nsWrite(t, ro, "direct", "ok")
}

func TestNamespaceErrorPaths(t *testing.T) {
	mnt := memWith(t, "a/", "f=data")
	n := vfs.NewNamespace()
	nsMount(t, n, ".", memory.New(), vfs.MountOptions{})
	nsMount(t, n, "m", mnt, vfs.MountOptions{})
	_, err := n.Stat(nsCtx, nsP("m/a/missing"))
	nsWantErr(t, err, vfs.CodeNotFound, "m/a/missing", "")
	_, err = n.Lstat(nsCtx, nsP("m/f/x"))
	nsWantErr(t, err, vfs.CodeNotDir, "m/f/x", "")
	_, err = n.ReadDir(nsCtx, nsP("m/f"))
	nsWantErr(t, err, vfs.CodeNotDir, "m/f", "")
	_, err = n.Readlink(nsCtx, nsP("m/f"))
	nsWantErr(t, err, vfs.CodeInvalidPath, "m/f", "")
	nsWantErr(t, n.Mkdir(nsCtx, nsP("m/a"), 0o755), vfs.CodeExists, "m/a", "")
	nsWantErr(t, n.Remove(nsCtx, nsP("m/nope")), vfs.CodeNotFound, "m/nope", "")
	nsWantErr(t, n.Rename(nsCtx, nsP("m/nope"), nsP("m/x"), 0), vfs.CodeNotFound, "m/nope", "m/x")
	nsWantErr(t, n.Link(nsCtx, nsP("m/nope"), nsP("m/x")), vfs.CodeNotFound, "m/nope", "m/x")
	nsWantErr(t, n.Link(nsCtx, nsP("nope"), nsP("x")), vfs.CodeNotFound, "nope", "x")
	nsWantErr(t, n.Symlink(nsCtx, "t", nsP("m/f")), vfs.CodeExists, "m/f", "")
	nsWantErr(t, n.Chmod(nsCtx, nsP("m/nope"), 0o700), vfs.CodeNotFound, "m/nope", "")
	nsWantErr(t, n.Chtimes(nsCtx, nsP("m/nope"), time.Time{}, time.Time{}), vfs.CodeNotFound, "m/nope", "")
	_, err = n.OpenFile(nsCtx, nsP("m/f"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	nsWantErr(t, err, vfs.CodeExists, "m/f", "")
	_, err = n.OpenFile(nsCtx, nsP("m/nope/x"), os.O_WRONLY|os.O_CREATE, 0o644)
	nsWantErr(t, err, vfs.CodeNotFound, "m/nope/x", "")
	_, err = n.Sub(nsCtx, nsP("m/f"))
	nsWantErr(t, err, vfs.CodeNotDir, "m/f", "")
	_, err = n.Stat(nsCtx, vfs.MustParse("m/f/"))
	nsWantErr(t, err, vfs.CodeNotDir, "m/f", "")

	// Files opened under a mount carry namespace paths in their errors.
	f, err := n.OpenFile(nsCtx, nsP("m/f"), os.O_RDONLY, 0)
	nsMust(t, err)
	_, err = f.Write([]byte("x")) // memory: not open for writing
	nsWantErr(t, err, vfs.CodePermission, "m/f", "")
	b := make([]byte, 2)
	if n, err := f.Read(b); n != 2 || err != nil || string(b) != "da" {
		t.Errorf("Read = %d %v %q", n, err, b)
	}
	if n, err := f.ReadAt(b, 3); n != 1 || err != io.EOF {
		t.Errorf("ReadAt at the end = %d %v, want 1 io.EOF", n, err)
	}
	if off, err := f.Seek(0, io.SeekEnd); off != 4 || err != nil {
		t.Errorf("Seek = %d %v", off, err)
	}
	_, err = f.Seek(-10, io.SeekStart)
	if e := (*vfs.Error)(nil); errors.As(err, &e) && e.Path != "m/f" {
		t.Errorf("Seek error addressed %q", e.Path)
	} else if err == nil {
		t.Error("Seek to a negative offset succeeded")
	}
	info, err := f.Stat()
	nsMust(t, err)
	if info.Name != "f" || info.Size != 4 {
		t.Errorf("file Stat = %+v", info)
	}
	nsMust(t, f.Sync())
	nsMust(t, f.Close())
	_, err = f.Read(b)
	nsWantErr(t, err, vfs.CodeClosed, "m/f", "")
	_, err = f.WriteAt(b, 0)
	nsWantErr(t, err, vfs.CodeClosed, "m/f", "")
	nsWantErr(t, f.Truncate(0), vfs.CodeClosed, "m/f", "")
	_, err = f.Stat()
	nsWantErr(t, err, vfs.CodeClosed, "m/f", "")

	// A writable handle works through the wrapper.
	f, err = n.OpenFile(nsCtx, nsP("m/w"), os.O_RDWR|os.O_CREATE, 0o644)
	nsMust(t, err)
	if _, err := f.WriteAt([]byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("!")); err != nil {
		t.Fatal(err)
	}
	nsMust(t, f.Truncate(3))
	nsMust(t, f.Close())
	if got := nsRead(t, mnt, "w"); got != "!el" { // WriteAt leaves the offset at 0
		t.Errorf("m/w = %q", got)
	}
}

func TestNamespaceSymlinkConfinement(t *testing.T) {
	base := memWith(t, "secret=base secret", "m/", "m/shadowed=base shadowed")
	nsMust(t, base.Symlink(nsCtx, "m/shadowed", nsP("toshadowed")))
	nsMust(t, base.Symlink(nsCtx, "m/f", nsP("tomount")))
	mnt := memWith(t, "f=mount f", "d/")
	for link, target := range map[string]string{
		"up": "../secret", "abs": "/secret", "in": "f", "d/dd": "../..", "d/back": "../f",
	} {
		nsMust(t, mnt.Symlink(nsCtx, target, nsP(link)))
	}
	n := vfs.NewNamespace()
	nsMount(t, n, ".", base, vfs.MountOptions{})
	nsMount(t, n, "m", mnt, vfs.MountOptions{})

	for _, name := range []string{"m/up", "m/abs", "m/d/dd/secret", "m/d/dd"} {
		_, err := n.Stat(nsCtx, nsP(name))
		nsWantErr(t, err, vfs.CodeOutside, name, "")
		_, err = n.OpenFile(nsCtx, nsP(name), os.O_RDONLY, 0)
		nsWantErr(t, err, vfs.CodeOutside, name, "")
	}
	_, err := n.OpenFile(nsCtx, nsP("m/up"), os.O_WRONLY|os.O_CREATE, 0o644)
	nsWantErr(t, err, vfs.CodeOutside, "m/up", "")
	for name, want := range map[string]string{"m/in": "mount f", "m/d/back": "mount f", "tomount": "mount f"} {
		if got := nsRead(t, n, name); got != want {
			t.Errorf("read %s = %q, want %q", name, got, want)
		}
	}
	// A link in the base backend resolves through the namespace: its target lands
	// in the mount that serves it, never in the base's own shadowed entries
	// (THREATS line 56).
	_, err = n.Stat(nsCtx, nsP("toshadowed"))
	nsWantErr(t, err, vfs.CodeNotFound, "toshadowed", "")
	_, err = n.OpenFile(nsCtx, nsP("toshadowed"), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("create through toshadowed: %v", err)
	}
	if got := nsRead(t, n, "m/shadowed"); got != "" {
		t.Errorf("m/shadowed = %q, want the new empty file in the mount", got)
	}
	if got := nsRead(t, base, "m/shadowed"); got != "base shadowed" {
		t.Errorf("the base's shadowed file changed: %q", got)
	}
	// A link created through the namespace is stored verbatim and confined on use.
	nsMust(t, n.Symlink(nsCtx, "../secret", nsP("m/new")))
	if s, err := n.Readlink(nsCtx, nsP("m/new")); err != nil || s != "../secret" {
		t.Errorf("Readlink(m/new) = %q, %v", s, err)
	}
	_, err = n.Stat(nsCtx, nsP("m/new"))
	nsWantErr(t, err, vfs.CodeOutside, "m/new", "")
	// Sub inside the mount: ".." at its root stays beneath it.
	sub, err := n.Sub(nsCtx, nsP("m/d"))
	nsMust(t, err)
	_, err = sub.Stat(nsCtx, nsP("back"))
	nsWantErr(t, err, vfs.CodeOutside, "back", "")
}

func TestNamespaceSub(t *testing.T) {
	base := memWith(t, "top/", "top/t=t")
	mnt := memWith(t, "d/", "d/f=f")
	n := vfs.NewNamespace()
	nsMount(t, n, ".", base, vfs.MountOptions{})
	nsMount(t, n, "m", mnt, vfs.MountOptions{})
	nsMount(t, n, "c/e", memWith(t, "e=e"), vfs.MountOptions{})
	nsMount(t, n, "top/k", memWith(t, "k=k"), vfs.MountOptions{})
	nsMount(t, n, "p/q/r", memWith(t, "r=r"), vfs.MountOptions{})

	// Inside a mount with nothing mounted below: the mount's own Sub, pinned.
	s, err := n.Sub(nsCtx, nsP("m/d"))
	nsMust(t, err)
	if _, ok := s.(*vfs.Namespace); ok {
		t.Error("Sub inside a plain mount returned a Namespace")
	}
	nsWrite(t, s, "g", "g")
	if got := nsRead(t, n, "m/d/g"); got != "g" {
		t.Errorf("m/d/g = %q", got)
	}
	nsMust(t, n.Rename(nsCtx, nsP("m/d"), nsP("m/d2"), 0))
	if got := nsList(t, s, "."); got != "f g" {
		t.Errorf("pinned Sub after rename lists %q", got)
	}
	// A mount point with no mount below: its backend, rooted there.
	s, err = n.Sub(nsCtx, nsP("m"))
	nsMust(t, err)
	if got := nsList(t, s, "."); got != "d2/" {
		t.Errorf("Sub(m) lists %q", got)
	}

	// At or above mount points: a snapshot namespace re-based at the path.
	for _, c := range []struct{ at, mounts, list string }{
		{".", ". c/e m p/q/r top/k", "c/ m/ p/ top/"},
		{"c", "e", "e/"},
		{"top", ". k", "k/ t"},
		{"p", "q/r", "q/"},
		{"p/q", "r", "r/"},
	} {
		at := vfs.Root
		if c.at != "." {
			at = nsP(c.at)
		}
		s, err := n.Sub(nsCtx, at)
		nsMust(t, err)
		sn, ok := s.(*vfs.Namespace)
		if !ok {
			t.Errorf("Sub(%s) = %T, want a *vfs.Namespace", c.at, s)
			continue
		}
		if got := nsMountPaths(sn); got != c.mounts {
			t.Errorf("Sub(%s) mounts %q, want %q", c.at, got, c.mounts)
		}
		if got := nsList(t, sn, "."); got != c.list {
			t.Errorf("Sub(%s) lists %q, want %q", c.at, got, c.list)
		}
	}
	// Where the covering mount has no directory, the snapshot's root is synthetic.
	s, err = n.Sub(nsCtx, nsP("p"))
	nsMust(t, err)
	info, err := s.Stat(nsCtx, vfs.Root)
	nsMust(t, err)
	if info.Mode != synthMode {
		t.Errorf("Sub(p) root mode %v", info.Mode)
	}
	if got := nsRead(t, s, "q/r/r"); got != "r" {
		t.Errorf("Sub(p) q/r/r = %q", got)
	}
	// Where it has one, the snapshot's root is that directory: writes reach it.
	top, err := n.Sub(nsCtx, nsP("top"))
	nsMust(t, err)
	nsWrite(t, top, "new", "n")
	if got := nsRead(t, base, "top/new"); got != "n" {
		t.Errorf("base top/new = %q", got)
	}
	if got := nsRead(t, top, "k/k"); got != "k" {
		t.Errorf("Sub(top) k/k = %q", got)
	}
	// The snapshot does not see later mounts or unmounts, and vice versa.
	c, err := n.Sub(nsCtx, nsP("c"))
	nsMust(t, err)
	nsMount(t, n, "c/x", memory.New(), vfs.MountOptions{})
	nsMust(t, n.Unmount(nsP("c/e")))
	if got := nsList(t, c, "."); got != "e/" {
		t.Errorf("snapshot lists %q after the parent changed", got)
	}
	nsMust(t, c.(*vfs.Namespace).Unmount(nsP("e")))
	if got := nsList(t, n, "c"); got != "x/" {
		t.Errorf("parent lists c = %q after the snapshot changed", got)
	}
	// Errors.
	_, err = n.Sub(nsCtx, nsP("nope"))
	nsWantErr(t, err, vfs.CodeNotFound, "nope", "")
	_, err = n.Sub(nsCtx, nsP("c/nope"))
	nsWantErr(t, err, vfs.CodeNotFound, "c/nope", "")
	_, err = n.Sub(nsCtx, nsP("top/t"))
	nsWantErr(t, err, vfs.CodeNotDir, "top/t", "")
}

func TestNamespaceNested(t *testing.T) {
	inner := vfs.NewNamespace()
	iroot := memWith(t, "f=inner f")
	x := memWith(t, "g=x g")
	nsMount(t, inner, ".", iroot, vfs.MountOptions{})
	nsMount(t, inner, "x", x, vfs.MountOptions{})
	outer := vfs.NewNamespace()
	nsMount(t, outer, ".", memWith(t, "o=o"), vfs.MountOptions{})
	nsMount(t, outer, "in", inner, vfs.MountOptions{})
	nsMount(t, outer, "ro", inner, vfs.MountOptions{ReadOnly: true})

	if got := nsRead(t, outer, "in/x/g"); got != "x g" {
		t.Errorf("in/x/g = %q", got)
	}
	nsWrite(t, outer, "in/x/new", "n")
	if got := nsRead(t, x, "new"); got != "n" {
		t.Errorf("x/new = %q", got)
	}
	for dir, want := range map[string]string{".": "in/ o ro/", "in": "f x/", "ro/x": "g new"} {
		if got := nsList(t, outer, dir); got != want {
			t.Errorf("%s lists %q, want %q", dir, got, want)
		}
	}
	info, err := outer.Stat(nsCtx, nsP("in/x"))
	nsMust(t, err)
	if info.Name != "x" || !info.Mode.IsDir() {
		t.Errorf("Stat(in/x) = %+v", info)
	}
	_, err = outer.Stat(nsCtx, nsP("in/x/missing"))
	nsWantErr(t, err, vfs.CodeNotFound, "in/x/missing", "")
	nsWantErr(t, outer.Rename(nsCtx, nsP("in/f"), nsP("in/x/f"), 0), vfs.CodeCrossMount, "in/f", "in/x/f")
	nsWantErr(t, outer.Rename(nsCtx, nsP("in/f"), nsP("f"), 0), vfs.CodeCrossMount, "in/f", "f")
	nsWantErr(t, outer.Remove(nsCtx, nsP("in/x")), vfs.CodeReadOnly, "in/x", "")
	nsWantErr(t, outer.Mkdir(nsCtx, nsP("ro/x/d"), 0o755), vfs.CodeReadOnly, "ro/x/d", "")
	f, err := outer.OpenFile(nsCtx, nsP("in/x/g"), os.O_RDONLY, 0)
	nsMust(t, err)
	_, err = f.Write([]byte("x"))
	nsWantErr(t, err, vfs.CodePermission, "in/x/g", "")
	nsMust(t, f.Close())
	// The inner namespace is live: a later mount in it shows through.
	nsMount(t, inner, "y", memWith(t, "y=y"), vfs.MountOptions{})
	if got := nsRead(t, outer, "in/y/y"); got != "y" {
		t.Errorf("in/y/y = %q", got)
	}
	// Sub through both levels.
	s, err := outer.Sub(nsCtx, nsP("in/x"))
	nsMust(t, err)
	if got := nsList(t, s, "."); got != "g new" {
		t.Errorf("Sub(in/x) lists %q", got)
	}
	s, err = outer.Sub(nsCtx, nsP("ro"))
	nsMust(t, err)
	if !s.Features().ReadOnly {
		t.Error("Sub of a read-only namespace mount is writable")
	}
	nsWantErr(t, s.Remove(nsCtx, nsP("f")), vfs.CodeReadOnly, "f", "")
}

func TestNamespaceSelfMount(t *testing.T) {
	n := vfs.NewNamespace()
	nsMount(t, n, ".", memWith(t, "f=f"), vfs.MountOptions{})
	nsWantErr(t, n.Mount(nsP("self"), n, vfs.MountOptions{}), vfs.CodeInvalidPath, "self", "")
	nsWantErr(t, n.Mount(nsP("ro"), vfs.ReadOnly(n), vfs.MountOptions{}), vfs.CodeInvalidPath, "ro", "")
	empty := vfs.NewNamespace()
	nsWantErr(t, empty.Mount(vfs.Root, empty, vfs.MountOptions{}), vfs.CodeInvalidPath, ".", "")

	a, b := vfs.NewNamespace(), vfs.NewNamespace()
	nsMount(t, n, "a", a, vfs.MountOptions{})
	nsMount(t, a, "b", vfs.ReadOnly(b), vfs.MountOptions{})
	nsWantErr(t, a.Mount(nsP("n"), n, vfs.MountOptions{}), vfs.CodeInvalidPath, "n", "")
	nsWantErr(t, b.Mount(vfs.Root, n, vfs.MountOptions{ReadOnly: true}), vfs.CodeInvalidPath, ".", "")
	nsWantErr(t, b.Mount(nsP("x"), vfs.ReadOnly(a), vfs.MountOptions{}), vfs.CodeInvalidPath, "x", "")
	if got := nsMountPaths(b); got != "" {
		t.Errorf("refused mounts left %q in b", got)
	}

	// A snapshot of the namespace is a different namespace: mounting it is fine and
	// finite, because it does not see itself.
	snap, err := n.Sub(nsCtx, vfs.Root)
	nsMust(t, err)
	nsMount(t, n, "snap", snap, vfs.MountOptions{})
	if got := nsList(t, n, "snap"); got != "a/ f" {
		t.Errorf("snap lists %q", got)
	}
	_, err = n.Stat(nsCtx, nsP("snap/snap"))
	nsWantErr(t, err, vfs.CodeNotFound, "snap/snap", "")
	// But the snapshot cannot then take the namespace in.
	nsWantErr(t, snap.(*vfs.Namespace).Mount(nsP("n"), n, vfs.MountOptions{}), vfs.CodeInvalidPath, "n", "")

	// Two namespaces mounted into each other at once: exactly one mount succeeds.
	for range 20 {
		p, q := vfs.NewNamespace(), vfs.NewNamespace()
		errs := make([]error, 2)
		var wg sync.WaitGroup
		wg.Go(func() { errs[0] = p.Mount(vfs.Root, q, vfs.MountOptions{}) })
		wg.Go(func() { errs[1] = q.Mount(vfs.Root, p, vfs.MountOptions{}) })
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("mutual mounts: %v, %v; want exactly one refused", errs[0], errs[1])
		}
		// Whichever won, lookups terminate.
		_, err := p.Stat(nsCtx, nsP("x"))
		nsWantCode(t, err, vfs.CodeNotFound)
	}
}

func TestNamespaceMountUnmount(t *testing.T) {
	n := vfs.NewNamespace()
	base := memory.New()
	mnt := memWith(t, "f=f")
	nsMount(t, n, ".", base, vfs.MountOptions{})
	nsMount(t, n, "m/", mnt, vfs.MountOptions{}) // a directory mark is ignored
	nsWantErr(t, n.Mount(nsP("m"), memory.New(), vfs.MountOptions{}), vfs.CodeExists, "m", "")
	nsWantErr(t, n.Mount(vfs.Root, memory.New(), vfs.MountOptions{}), vfs.CodeExists, ".", "")
	nsWantErr(t, n.Mount(nsP("z"), nil, vfs.MountOptions{}), vfs.CodeInvalidPath, "z", "")
	if got := nsMountPaths(n); got != ". m" {
		t.Errorf("Mounts = %q", got)
	}

	f, err := n.OpenFile(nsCtx, nsP("m/f"), os.O_RDWR|os.O_APPEND, 0)
	nsMust(t, err)
	nsMust(t, n.Unmount(nsP("m")))
	nsWantErr(t, n.Unmount(nsP("m")), vfs.CodeNotFound, "m", "")
	nsWantErr(t, n.Unmount(nsP("nope")), vfs.CodeNotFound, "nope", "")
	_, err = n.Stat(nsCtx, nsP("m"))
	nsWantErr(t, err, vfs.CodeNotFound, "m", "")
	// A file opened before the unmount keeps working on its backend.
	if _, err := f.Write([]byte("+")); err != nil {
		t.Fatal(err)
	}
	nsMust(t, f.Close())
	if got := nsRead(t, mnt, "f"); got != "f+" {
		t.Errorf("f = %q", got)
	}
	// Unmounting the root leaves a synthetic root; mounting again works.
	nsMust(t, n.Unmount(vfs.Root))
	info, err := n.Stat(nsCtx, vfs.Root)
	nsMust(t, err)
	if info.Mode != synthMode {
		t.Errorf("root after unmount: %v", info.Mode)
	}
	nsMount(t, n, "m", mnt, vfs.MountOptions{})
	if got := nsRead(t, n, "m/f"); got != "f+" {
		t.Errorf("remounted m/f = %q", got)
	}
}

func TestNamespaceMountsSorted(t *testing.T) {
	n := vfs.NewNamespace()
	for _, at := range []string{"b", "a-c", "a/b", ".", "a", "a/b/c", "a.b"} {
		nsMount(t, n, at, memory.New(), vfs.MountOptions{})
	}
	if got, want := nsMountPaths(n), ". a a/b a/b/c a-c a.b b"; got != want {
		t.Errorf("Mounts = %q, want %q", got, want)
	}
	if got := nsList(t, n, "."); got != "a/ a-c/ a.b/ b/" {
		t.Errorf("root lists %q", got)
	}
}

// featBackend overrides a backend's features.
type featBackend struct {
	vfs.Backend
	f vfs.Features
}

func (b featBackend) Features() vfs.Features { return b.f }

func TestNamespaceFeatures(t *testing.T) {
	n := vfs.NewNamespace()
	nsMount(t, n, "a", featBackend{memory.New(), vfs.Features{Persistent: true, Chmod: true}}, vfs.MountOptions{ReadOnly: true})
	want := vfs.Features{ReadOnly: true, Persistent: true, Chmod: true}
	if got := n.Features(); got != want {
		t.Errorf("one read-only persistent mount: %+v, want %+v", got, want)
	}
	nsMount(t, n, "b", featBackend{memory.New(), vfs.Features{Symlinks: true, HardLinks: true, CaseInsensitive: true, Chtimes: true}}, vfs.MountOptions{})
	want = vfs.Features{Symlinks: true, HardLinks: true, Chmod: true, Chtimes: true, CaseInsensitive: true}
	if got := n.Features(); got != want {
		t.Errorf("mixed mounts: %+v, want %+v", got, want)
	}
}

// TestNamespaceConcurrent mounts and unmounts while other goroutines look paths up;
// run it with -race.
func TestNamespaceConcurrent(t *testing.T) {
	n := vfs.NewNamespace()
	nsMount(t, n, ".", memWith(t, "f=data"), vfs.MountOptions{})
	const rounds = 200
	var wg sync.WaitGroup
	for i := range 2 {
		at := nsP("x/" + string(rune('0'+i)))
		wg.Go(func() {
			m := memWith(t, "g=g")
			for range rounds {
				if err := n.Mount(at, m, vfs.MountOptions{}); err != nil {
					t.Error(err)
					return
				}
				if err := n.Unmount(at); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range rounds {
				if _, err := n.Stat(nsCtx, nsP("f")); err != nil {
					t.Error(err)
					return
				}
				ents, err := n.ReadDir(nsCtx, vfs.Root)
				if err != nil {
					t.Error(err)
					return
				}
				names := strings.Fields(nsNames(ents))
				if !slices.IsSorted(names) || slices.Compact(slices.Clone(names)) == nil || len(slices.Compact(slices.Clone(names))) != len(names) {
					t.Errorf("root lists %v", names)
				}
				if !slices.Contains(names, "f") {
					t.Errorf("root lists %v, without f", names)
				}
				for _, p := range []string{"x/0/g", "x/1", "x"} {
					if _, err := n.Stat(nsCtx, nsP(p)); err != nil && vfs.CodeOf(err) != vfs.CodeNotFound {
						t.Errorf("Stat(%s): %v", p, err)
					}
				}
				if _, err := n.ReadDir(nsCtx, nsP("x")); err != nil && vfs.CodeOf(err) != vfs.CodeNotFound {
					t.Errorf("ReadDir(x): %v", err)
				}
				_ = n.Mounts()
				_ = n.Features()
			}
		})
	}
	wg.Wait()
	if got := nsMountPaths(n); got != "." {
		t.Errorf("after the churn Mounts = %q", got)
	}
}

// TestNamespaceLookupAllocs checks that routing a call costs no allocation beyond
// the backend's own.
func TestNamespaceLookupAllocs(t *testing.T) {
	mnt := memWith(t, "a/", "a/b/", "a/b/c=c")
	n := vfs.NewNamespace()
	nsMount(t, n, ".", memory.New(), vfs.MountOptions{})
	nsMount(t, n, "s/m", mnt, vfs.MountOptions{})
	nsMount(t, n, "s/o", memory.New(), vfs.MountOptions{})
	nsMount(t, n, "t", memory.New(), vfs.MountOptions{})
	direct := testing.AllocsPerRun(50, func() {
		if _, err := mnt.Stat(nsCtx, nsP("a/b/c")); err != nil {
			t.Fatal(err)
		}
	})
	p := nsP("s/m/a/b/c")
	through := testing.AllocsPerRun(50, func() {
		if _, err := n.Stat(nsCtx, p); err != nil {
			t.Fatal(err)
		}
	})
	if through > direct {
		t.Errorf("Stat through the namespace allocates %v times, the backend alone %v", through, direct)
	}
}

// faultyBackend fails Stat and ReadDir with a foreign error that names a host path.
type faultyBackend struct{ vfs.Backend }

var errHost = &fs.PathError{Op: "stat", Path: "/host/secret/dir", Err: errors.New("device on fire")}

func (faultyBackend) Stat(context.Context, vfs.Path) (vfs.Info, error) { return vfs.Info{}, errHost }
func (faultyBackend) ReadDir(context.Context, vfs.Path) ([]vfs.DirEntry, error) {
	return nil, errHost
}

func TestNamespaceBackendErrors(t *testing.T) {
	base := memWith(t, "z/", "z/f=f", "gone/")
	n := vfs.NewNamespace()
	nsMount(t, n, ".", base, vfs.MountOptions{})
	nsMount(t, n, "z/k", memory.New(), vfs.MountOptions{})
	nsMount(t, n, "c/d", memory.New(), vfs.MountOptions{})
	nsMount(t, n, "bad", faultyBackend{memory.New()}, vfs.MountOptions{})
	nsMount(t, n, "gone/x", memory.New(), vfs.MountOptions{})

	// Foreign errors become *Error values addressed in the namespace, with no host path.
	for _, name := range []string{"bad", "bad/x"} {
		_, err := n.Stat(nsCtx, nsP(name))
		nsWantErr(t, err, vfs.CodeIO, name, "")
		if strings.Contains(err.Error(), "/host") {
			t.Errorf("error leaks a host path: %v", err)
		}
	}
	_, err := n.ReadDir(nsCtx, nsP("bad"))
	nsWantErr(t, err, vfs.CodeIO, "bad", "")

	// A canceled context reaches the backend behind a namespace directory too.
	ctx, cancel := context.WithCancel(nsCtx)
	cancel()
	_, err = n.Stat(ctx, nsP("z"))
	nsWantErr(t, err, vfs.CodeCanceled, "z", "")
	_, err = n.ReadDir(ctx, nsP("z"))
	nsWantErr(t, err, vfs.CodeCanceled, "z", "")
	_, err = n.OpenFile(ctx, nsP("z"), os.O_RDONLY, 0)
	nsWantErr(t, err, vfs.CodeCanceled, "z", "")
	nsWantErr(t, n.Chmod(ctx, nsP("z"), 0o700), vfs.CodeCanceled, "z", "")

	// Removing inside a mount works; removing or renaming inside a directory the
	// covering mount lacks is read_only, like creating there.
	nsMust(t, n.Remove(nsCtx, nsP("z/f")))
	if nsExists(t, base, "z/f") {
		t.Error("z/f survived Remove")
	}
	nsWantErr(t, n.Remove(nsCtx, nsP("c/nope")), vfs.CodeReadOnly, "c/nope", "")
	nsWantErr(t, n.Remove(nsCtx, nsP("z/nope")), vfs.CodeNotFound, "z/nope", "")
	nsWantErr(t, n.Rename(nsCtx, nsP("c/nope"), nsP("y"), 0), vfs.CodeReadOnly, "c/nope", "y")
	nsWantErr(t, n.Rename(nsCtx, nsP("z/nope"), nsP("y"), 0), vfs.CodeNotFound, "z/nope", "y")
	nsWantErr(t, n.Link(nsCtx, nsP("z"), nsP("c/l")), vfs.CodeReadOnly, "z", "c/l")
	// A namespace directory whose backend directory vanishes becomes synthetic.
	nsMust(t, base.Remove(nsCtx, nsP("gone")))
	info, err := n.Stat(nsCtx, nsP("gone"))
	nsMust(t, err)
	if info.Mode != synthMode {
		t.Errorf("gone: %v", info.Mode)
	}
	if got := nsList(t, n, "gone"); got != "x/" {
		t.Errorf("gone lists %q", got)
	}
	nsWantErr(t, n.Mkdir(nsCtx, nsP("gone/y"), 0o755), vfs.CodeReadOnly, "gone/y", "")
}

// BenchmarkNamespaceStat compares Stat on a memory backend directly with the same
// Stat through a namespace (the backend at the root, or at a nested mount among
// others).
func BenchmarkNamespaceStat(b *testing.B) {
	mnt := memWith(b, "a/", "a/b/", "a/b/c=c")
	root := vfs.NewNamespace()
	nsMount(b, root, ".", mnt, vfs.MountOptions{})
	deep := vfs.NewNamespace()
	nsMount(b, deep, ".", memory.New(), vfs.MountOptions{})
	for _, at := range []string{"s/o", "s/m/x", "t", "u/v/w"} {
		nsMount(b, deep, at, memory.New(), vfs.MountOptions{})
	}
	nsMount(b, deep, "s/m", mnt, vfs.MountOptions{})
	for _, c := range []struct {
		name string
		b    vfs.Backend
		p    vfs.Path
	}{
		{"direct", mnt, nsP("a/b/c")},
		{"root-mount", root, nsP("a/b/c")},
		{"nested-mount", deep, nsP("s/m/a/b/c")},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.b.Stat(nsCtx, c.p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
