//go:build linux

package physical

import (
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/internal/testenv"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// withoutReopen forces the fallback of opens: check by name, then open by name and
// check the handle again, as without a verified /proc.
func withoutReopen() Option { return func(c *config) { c.noReopen = true } }

// openPaths are the two ways an open can go with the openat2 resolver: through a
// checked O_PATH handle reopened by its /proc/self/fd entry, and the fallback.
var openPaths = []struct {
	name string
	opts []Option
}{
	{"reopen", []Option{WithResolver(ResolverOpenat2)}},
	{"fallback", []Option{WithResolver(ResolverOpenat2), withoutReopen()}},
}

// needReopen skips t unless f reopens through /proc (openat2 and a verified /proc),
// and fails it if f was told not to but does.
func needReopen(t *testing.T, f *FS, want bool) {
	t.Helper()
	if got := f.reopens(); got != want {
		if want {
			t.Skip("no verified /proc/self/fd here: opens take the fallback")
		}
		t.Fatal("withoutReopen: the backend still reopens through /proc")
	}
}

// TestConformanceOpenPaths runs the suite over both open paths, so that each is
// held to the same contract whichever the machine would pick: once as is, once
// with escaping links planted by the host (as TestConformancePlanted).
func TestConformanceOpenPaths(t *testing.T) {
	planted := maps.Clone(replaceSkips)
	planted["Threats/27-readlink-returns-stored-text"] = "this run's Readlink is the planting wrapper's; TestReadlink covers the backend's"
	for _, o := range openPaths {
		newFS := func(t *testing.T) *FS {
			f := newTestFS(t, o.opts...)
			needReopen(t, f, o.name == "reopen")
			return f
		}
		t.Run(o.name, func(t *testing.T) {
			vfstest.TestBackend(t, vfstest.Config{
				New:                     func(t *testing.T) vfs.Backend { return newFS(t) },
				RejectsEscapingSymlinks: true,
				Skip:                    replaceSkips,
			})
		})
		t.Run(o.name+"/planted", func(t *testing.T) {
			vfstest.TestBackend(t, vfstest.Config{
				New:  func(t *testing.T) vfs.Backend { return planting{newFS(t)} },
				Skip: planted,
			})
		})
	}
}

// TestProcFdDir checks the verified handle: a procfs directory listing this
// process's descriptors, through which a handle reopens to the same inode.
func TestProcFdDir(t *testing.T) {
	pfd := procFdDir()
	if pfd < 0 {
		if _, err := os.Stat("/proc/self/fd"); err == nil {
			if _, err := New(t.TempDir(), WithResolver(ResolverOpenat2)); err == nil {
				t.Fatal("procFdDir found no /proc/self/fd, though there is one and openat2 works")
			}
		}
		t.Skip("no verified /proc/self/fd here")
	}
	if !isProcfs(pfd) {
		t.Fatal("procFdDir is not on procfs")
	}
	if procFdDir() != pfd {
		t.Fatal("procFdDir opened a second handle")
	}
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	opath, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(opath)
	fd, err := procReopen(pfd, opath, unix.O_RDONLY)
	if err != nil {
		t.Fatalf("procReopen: %v", err)
	}
	f := os.NewFile(uintptr(fd), "reopened")
	defer f.Close()
	if b, err := io.ReadAll(f); err != nil || string(b) != "data" {
		t.Fatalf("read through the reopened handle: %q, %v", b, err)
	}
	var a, b unix.Stat_t
	if err := unix.Fstat(opath, &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(fd, &b); err != nil {
		t.Fatal(err)
	}
	if a.Dev != b.Dev || a.Ino != b.Ino {
		t.Fatal("the reopened handle names another inode")
	}
}

// TestFileType: Files know their type without a Stat (vfs.TypedFile), on every
// open path: fs.ModeDir for a directory, 0 for a regular file, whether opened for
// reading, writing, or created; and it agrees with Stat.
func TestFileType(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		if err := os.MkdirAll(h.in("d/e"), 0o755); err != nil {
			t.Fatal(err)
		}
		h.writeHost(h.in("d/f"), "F")
		h.plant("e", "d/le")
		h.plant("f", "d/lf")
		f := newAt(t, h.root, opts...)
		ctx := t.Context()
		for _, c := range []struct {
			path string
			flag int
			want fs.FileMode
		}{
			{"", os.O_RDONLY, fs.ModeDir},
			{"d", os.O_RDONLY, fs.ModeDir},
			{"d/e/", os.O_RDONLY, fs.ModeDir},
			{"d/le", os.O_RDONLY, fs.ModeDir},
			{"d/f", os.O_RDONLY, 0},
			{"d/lf", os.O_RDONLY, 0},
			{"d/f", os.O_RDWR, 0},
			{"d/f", os.O_WRONLY | os.O_APPEND, 0},
			{"d/new", os.O_RDWR | os.O_CREATE, 0},
			{"d/new2", os.O_WRONLY | os.O_CREATE | os.O_EXCL, 0},
			{"d/lf", os.O_WRONLY | os.O_CREATE | os.O_TRUNC, 0},
		} {
			q := vfs.Root
			if c.path != "" {
				q = P(c.path)
			}
			h, err := f.OpenFile(ctx, q, c.flag, 0o644)
			if err != nil {
				t.Errorf("OpenFile(%q, %#x): %v", c.path, c.flag, err)
				continue
			}
			tf, ok := h.(vfs.TypedFile)
			if !ok {
				t.Fatalf("OpenFile(%q) returned a %T, not a vfs.TypedFile", c.path, h)
			}
			info, err := h.Stat()
			if got := tf.Type(); got != c.want || err != nil || info.Mode.Type() != got {
				t.Errorf("OpenFile(%q, %#x): Type() = %v, Stat() = %v, %v; want %v", c.path, c.flag, got, info.Mode, err, c.want)
			}
			h.Close()
		}
	})
}

// TestCreateAndTruncate pins what O_CREATE and O_TRUNC do on every open path
// (the O_CREAT|O_EXCL trial, the reopen, the fallback): a new file gets exactly
// perm, an existing one keeps its mode and contents (unless O_TRUNC empties it),
// O_EXCL never opens what exists (a dangling link included), and O_CREATE
// through a dangling link creates its target.
func TestCreateAndTruncate(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		if err := os.Mkdir(h.in("d"), 0o755); err != nil {
			t.Fatal(err)
		}
		h.writeHost(h.in("d/keep"), "old contents")
		h.writeHost(h.in("d/trunc"), "old contents")
		if err := os.Chmod(h.in("d/keep"), 0o640); err != nil {
			t.Fatal(err)
		}
		h.plant("target", "d/dangling")
		f := newAt(t, h.root, opts...)
		ctx := t.Context()

		if err := writeAll(ctx, f, "d/keep", os.O_RDWR|os.O_CREATE, ""); err != nil {
			t.Fatal(err)
		}
		if err := writeAll(ctx, f, "d/trunc", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, "new"); err != nil {
			t.Fatal(err)
		}
		nf, err := f.OpenFile(ctx, P("d/new"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o604)
		if err != nil {
			t.Fatal(err)
		}
		nf.Close()
		_, err = f.OpenFile(ctx, P("d/keep"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		wantCode(t, err, vfs.CodeExists, "O_EXCL on an existing file")
		_, err = f.OpenFile(ctx, P("d/dangling"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		wantCode(t, err, vfs.CodeExists, "O_EXCL on a dangling link")
		_, err = f.OpenFile(ctx, P("d/missing/x"), os.O_WRONLY|os.O_CREATE, 0o644)
		wantCode(t, err, vfs.CodeNotFound, "O_CREATE in a missing directory")
		_, err = f.OpenFile(ctx, P("d/new2/"), os.O_WRONLY|os.O_CREATE, 0o644)
		wantCode(t, err, vfs.CodeIsDir, "O_CREATE with a trailing slash")
		_, err = f.OpenFile(ctx, P("d"), os.O_WRONLY|os.O_CREATE, 0o644)
		wantCode(t, err, vfs.CodeIsDir, "O_CREATE on a directory")
		if err := writeAll(ctx, f, "d/dangling", os.O_WRONLY|os.O_CREATE, "through"); err != nil {
			t.Fatalf("O_CREATE through a dangling link: %v", err)
		}

		for name, want := range map[string]struct {
			data string
			perm fs.FileMode
		}{
			"d/keep":   {"old contents", 0o640},
			"d/trunc":  {"new", 0o644},
			"d/new":    {"", 0o604},
			"d/target": {"through", 0o644},
		} {
			fi, err := os.Lstat(h.in(name))
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			data, _ := os.ReadFile(h.in(name))
			if string(data) != want.data || fi.Mode() != want.perm {
				t.Errorf("%s = %q, %v; want %q, %v", name, data, fi.Mode(), want.data, want.perm)
			}
		}
		if _, err := os.Lstat(h.in("d/new2")); !os.IsNotExist(err) {
			t.Errorf("d/new2 exists after a failed create: %v", err)
		}
	})
}

// TestReopenNeverOpensSwappedFIFO races opens of a regular file against a host
// that keeps exchanging it with a FIFO (renameat2 RENAME_EXCHANGE), and watches
// the FIFO with inotify, which reports every real open (IN_OPEN) but none of an
// O_PATH handle. Through the reopen path the backend opens only the inode it
// checked, so the FIFO is never opened; every open either refuses with
// not_regular_file or yields the regular file. (The fallback path can open the
// swapped-in FIFO once, non-blocking, before refusing it: see the package
// documentation.)
func TestReopenNeverOpensSwappedFIFO(t *testing.T) {
	h := newHost(t)
	h.writeHost(h.in("f"), "data")
	if err := unix.Mkfifo(h.in("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newAt(t, h.root, WithResolver(ResolverOpenat2))
	needReopen(t, f, true)
	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Skipf("no inotify: %v", err)
	}
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, h.in("fifo"), unix.IN_OPEN); err != nil {
		t.Skipf("cannot watch the FIFO: %v", err)
	}
	ctx := t.Context()
	refused, opened := 0, 0
	testenv.Exchanging(t, h.root, [][2]string{{"f", "fifo"}}, func() {
		returns(t, "opens racing a FIFO swap", func() {
			for i := range 2000 {
				flag := []int{os.O_RDONLY, os.O_RDWR, os.O_WRONLY | os.O_APPEND}[i%3]
				fh, err := f.OpenFile(ctx, P("f"), flag, 0)
				if err != nil {
					if code := vfs.CodeOf(err); code != vfs.CodeNotRegular {
						t.Errorf("OpenFile(f, %#x): %v; want success or not_regular_file", flag, err)
					}
					refused++
					continue
				}
				opened++
				if typ := fh.(vfs.TypedFile).Type(); typ != 0 {
					t.Errorf("OpenFile(f) opened a %v", typ)
				}
				if info, err := fh.Stat(); err != nil || !info.Mode.IsRegular() {
					t.Errorf("OpenFile(f) opened %v, %v; want the regular file", info.Mode, err)
				}
				fh.Close()
			}
		})
	})
	buf := make([]byte, 4096)
	if n, err := unix.Read(in, buf); n > 0 {
		t.Fatalf("the FIFO was opened (%d bytes of inotify events)", n)
	} else if err != unix.EAGAIN {
		t.Fatalf("reading inotify events: %v", err)
	}
	t.Logf("%d opens of the regular file, %d refusals of the FIFO", opened, refused)
}

// TestRenameLinkSameParent: Rename and Link with both names in one directory
// (resolved once, through a link) act on that directory, and errors still name
// both paths.
func TestRenameLinkSameParent(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		if err := os.MkdirAll(h.in("r/s"), 0o755); err != nil {
			t.Fatal(err)
		}
		h.writeHost(h.in("r/a"), "A")
		h.plant("r", "lr")
		f := newAt(t, h.root, opts...)
		ctx := t.Context()
		if err := f.Rename(ctx, P("lr/a"), P("lr/b"), 0); err != nil {
			t.Fatalf("Rename(lr/a, lr/b): %v", err)
		}
		if err := f.Link(ctx, P("lr/b"), P("lr/c")); err != nil {
			t.Fatalf("Link(lr/b, lr/c): %v", err)
		}
		if err := f.Rename(ctx, P("r/b"), P("r/s"), vfs.RenameNoReplace); vfs.CodeOf(err) != vfs.CodeExists {
			t.Errorf("Rename(r/b, r/s, NoReplace) = %v; want already_exists", err)
		}
		err := f.Rename(ctx, P("nodir/a"), P("nodir/b"), 0)
		var e *vfs.Error
		if !errors.As(err, &e) || e.Code != vfs.CodeNotFound || e.Path != "nodir/a" || e.Dest != "nodir/b" {
			t.Errorf("Rename(nodir/a, nodir/b) = %#v; want not_found naming both paths", err)
		}
		for name, want := range map[string]string{"r/b": "A", "r/c": "A"} {
			if data, err := os.ReadFile(h.in(name)); err != nil || string(data) != want {
				t.Errorf("%s = %q, %v; want %q", name, data, err, want)
			}
		}
		if _, err := os.Lstat(h.in("r/a")); !os.IsNotExist(err) {
			t.Errorf("r/a still exists: %v", err)
		}
		if _, err := os.Lstat(h.in("lr")); err != nil {
			t.Errorf("the link lr was touched: %v", err)
		}
	})
}
