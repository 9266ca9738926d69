package vfs_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
)

// roFixture returns a memory backend holding d/, d/f ("data"), l -> d/f.
func roFixture(t *testing.T) *memory.FS {
	t.Helper()
	m := memory.New()
	nsMust(t, m.Mkdir(nsCtx, nsP("d"), 0o755))
	nsWrite(t, m, "d/f", "data")
	nsMust(t, m.Symlink(nsCtx, "d/f", nsP("l")))
	return m
}

// roState describes a backend's tree (names, modes, sizes, contents, mtimes, link
// targets) so a test can tell that a refused call changed nothing.
func roState(t *testing.T, b vfs.Backend) string {
	t.Helper()
	var out string
	var walk func(p vfs.Path)
	walk = func(p vfs.Path) {
		ents, err := b.ReadDir(nsCtx, p)
		nsMust(t, err)
		for _, e := range ents {
			c, err := p.Child(e.Name)
			nsMust(t, err)
			info, err := b.Lstat(nsCtx, c)
			nsMust(t, err)
			out += c.String() + " " + info.Mode.String() + " " + info.ModTime.String()
			switch {
			case e.Type.IsDir():
				out += "\n"
				walk(c)
			case e.Type&fs.ModeSymlink != 0:
				s, err := b.Readlink(nsCtx, c)
				nsMust(t, err)
				out += " -> " + s + "\n"
			default:
				out += " " + nsRead(t, b, c.String()) + "\n"
			}
		}
	}
	walk(vfs.Root)
	return out
}

func TestReadOnlyRefusesEveryMutation(t *testing.T) {
	m := roFixture(t)
	ro := vfs.ReadOnly(m)
	before := roState(t, m)
	now := time.Now()
	checks := []struct {
		name string
		err  error
		path string
		dest string
	}{
		{"mkdir new", ro.Mkdir(nsCtx, nsP("new"), 0o755), "new", ""},
		{"mkdir existing", ro.Mkdir(nsCtx, nsP("d"), 0o755), "d", ""},
		{"remove file", ro.Remove(nsCtx, nsP("d/f")), "d/f", ""},
		{"remove link", ro.Remove(nsCtx, nsP("l")), "l", ""},
		{"rename", ro.Rename(nsCtx, nsP("d/f"), nsP("g"), 0), "d/f", "g"},
		{"rename exchange", ro.Rename(nsCtx, nsP("d"), nsP("l"), vfs.RenameExchange), "d", "l"},
		{"symlink", ro.Symlink(nsCtx, "d", nsP("l2")), "l2", ""},
		{"link", ro.Link(nsCtx, nsP("d/f"), nsP("h")), "d/f", "h"},
		{"chmod", ro.Chmod(nsCtx, nsP("d/f"), 0o600), "d/f", ""},
		{"chmod via link", ro.Chmod(nsCtx, nsP("l"), 0o600), "l", ""},
		{"chtimes", ro.Chtimes(nsCtx, nsP("d"), now, now), "d", ""},
	}
	for _, flag := range []int{
		os.O_WRONLY, os.O_RDWR, os.O_CREATE, os.O_TRUNC, os.O_APPEND,
		os.O_WRONLY | os.O_CREATE | os.O_TRUNC, os.O_RDWR | os.O_APPEND,
		os.O_CREATE | os.O_EXCL, os.O_RDONLY | os.O_TRUNC,
	} {
		for _, name := range []string{"d/f", "l", "d/new"} {
			f, err := ro.OpenFile(nsCtx, nsP(name), flag, 0o644)
			if f != nil {
				t.Errorf("OpenFile(%s, %#x) returned a file", name, flag)
				f.Close()
			}
			checks = append(checks, struct {
				name string
				err  error
				path string
				dest string
			}{"open " + name, err, name, ""})
		}
	}
	for _, c := range checks {
		nsWantCode(t, c.err, vfs.CodeReadOnly)
		var e *vfs.Error
		if errors.As(c.err, &e) && (e.Path != c.path || e.Dest != c.dest) {
			t.Errorf("%s: error addressed %q -> %q, want %q -> %q", c.name, e.Path, e.Dest, c.path, c.dest)
		}
		if !errors.Is(c.err, fs.ErrPermission) {
			t.Errorf("%s: %v does not match fs.ErrPermission", c.name, c.err)
		}
	}
	if after := roState(t, m); after != before {
		t.Errorf("refused mutations changed the tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestReadOnlyReadsPassThrough(t *testing.T) {
	m := roFixture(t)
	ro := vfs.ReadOnly(m)
	if got := nsRead(t, ro, "d/f"); got != "data" {
		t.Errorf("read d/f = %q", got)
	}
	if got := nsRead(t, ro, "l"); got != "data" {
		t.Errorf("read through link = %q", got)
	}
	info, err := ro.Stat(nsCtx, nsP("l"))
	nsMust(t, err)
	if !info.Mode.IsRegular() || info.Size != 4 {
		t.Errorf("Stat(l) = %v size %d", info.Mode, info.Size)
	}
	info, err = ro.Lstat(nsCtx, nsP("l"))
	nsMust(t, err)
	if info.Mode&fs.ModeSymlink == 0 {
		t.Errorf("Lstat(l) mode %v, want a symlink", info.Mode)
	}
	s, err := ro.Readlink(nsCtx, nsP("l"))
	nsMust(t, err)
	if s != "d/f" {
		t.Errorf("Readlink = %q", s)
	}
	ents, err := ro.ReadDir(nsCtx, vfs.Root)
	nsMust(t, err)
	if got := nsNames(ents); got != "d/ l" {
		t.Errorf("ReadDir = %q", got)
	}
	// Errors of reads are the inner backend's, unchanged.
	_, err = ro.Stat(nsCtx, nsP("d/missing"))
	nsWantErr(t, err, vfs.CodeNotFound, "d/missing", "")
	_, err = ro.OpenFile(nsCtx, nsP("d/missing"), os.O_RDONLY, 0)
	nsWantErr(t, err, vfs.CodeNotFound, "d/missing", "")
	// O_EXCL without O_CREATE is not a write.
	f, err := ro.OpenFile(nsCtx, nsP("d/f"), os.O_RDONLY|os.O_EXCL, 0)
	nsMust(t, err)
	nsMust(t, f.Close())
}

func TestReadOnlyFile(t *testing.T) {
	m := roFixture(t)
	ro := vfs.ReadOnly(m)
	f, err := ro.OpenFile(nsCtx, nsP("d/f"), os.O_RDONLY, 0)
	nsMust(t, err)
	_, err = f.Write([]byte("x"))
	nsWantErr(t, err, vfs.CodeReadOnly, "d/f", "")
	_, err = f.WriteAt([]byte("x"), 0)
	nsWantErr(t, err, vfs.CodeReadOnly, "d/f", "")
	nsWantErr(t, f.Truncate(0), vfs.CodeReadOnly, "d/f", "")
	b := make([]byte, 8)
	n, err := f.ReadAt(b, 1)
	if n != 3 || string(b[:n]) != "ata" || (err != nil && err != io.EOF) {
		t.Errorf("ReadAt = %d %q %v", n, b[:n], err)
	}
	if _, err := f.Seek(2, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(f)
	nsMust(t, err)
	if string(rest) != "ta" {
		t.Errorf("read after seek = %q", rest)
	}
	info, err := f.Stat()
	nsMust(t, err)
	if info.Size != 4 {
		t.Errorf("Stat size %d", info.Size)
	}
	nsMust(t, f.Sync())
	nsMust(t, f.Close())
	_, err = f.Write([]byte("x"))
	nsWantCode(t, err, vfs.CodeClosed)
	nsWantCode(t, f.Truncate(0), vfs.CodeClosed)
	_, err = f.Read(b)
	nsWantCode(t, err, vfs.CodeClosed)
	if got := nsRead(t, m, "d/f"); got != "data" {
		t.Errorf("content changed to %q", got)
	}

	// A directory opened read-only is wrapped too.
	d, err := ro.OpenFile(nsCtx, nsP("d"), os.O_RDONLY, 0)
	nsMust(t, err)
	defer d.Close()
	_, err = d.Write([]byte("x"))
	nsWantCode(t, err, vfs.CodeReadOnly)
}

func TestReadOnlyFeaturesAndIdempotence(t *testing.T) {
	m := memory.New()
	ro := vfs.ReadOnly(m)
	want := m.Features()
	if want.ReadOnly {
		t.Fatal("memory backend reports ReadOnly")
	}
	want.ReadOnly = true
	if got := ro.Features(); got != want {
		t.Errorf("Features = %+v, want %+v", got, want)
	}
	if again := vfs.ReadOnly(ro); again != ro {
		t.Errorf("ReadOnly(ReadOnly(b)) = %p, want the same wrapper %p", again, ro)
	}
	if twice := vfs.ReadOnly(vfs.ReadOnly(m)); twice.Features() != want {
		t.Errorf("features of a double wrap = %+v", twice.Features())
	}
}

func TestReadOnlySub(t *testing.T) {
	m := roFixture(t)
	ro := vfs.ReadOnly(m)
	sub, err := ro.Sub(nsCtx, nsP("d"))
	nsMust(t, err)
	if !sub.Features().ReadOnly {
		t.Error("Sub of a read-only backend is not read-only")
	}
	if got := nsRead(t, sub, "f"); got != "data" {
		t.Errorf("read f through Sub = %q", got)
	}
	nsWantErr(t, sub.Mkdir(nsCtx, nsP("x"), 0o755), vfs.CodeReadOnly, "x", "")
	nsWantErr(t, sub.Remove(nsCtx, nsP("f")), vfs.CodeReadOnly, "f", "")
	_, err = sub.OpenFile(nsCtx, nsP("f"), os.O_WRONLY|os.O_TRUNC, 0)
	nsWantErr(t, err, vfs.CodeReadOnly, "f", "")
	subsub, err := sub.Sub(nsCtx, vfs.Root)
	nsMust(t, err)
	nsWantCode(t, subsub.Remove(nsCtx, nsP("f")), vfs.CodeReadOnly)
	// Sub errors are the inner backend's.
	_, err = ro.Sub(nsCtx, nsP("d/f"))
	nsWantErr(t, err, vfs.CodeNotDir, "d/f", "")
	if got := nsRead(t, m, "d/f"); got != "data" {
		t.Errorf("content changed to %q", got)
	}
}

// hostBackend is a Backend that claims a host path.
type hostBackend struct{ vfs.Backend }

func (hostBackend) HostPath() (string, bool) { return "/srv/tree", true }

func TestReadOnlyHostPath(t *testing.T) {
	h, ok := vfs.ReadOnly(hostBackend{memory.New()}).(vfs.HostPather)
	if !ok {
		t.Fatal("ReadOnly result is not a HostPather")
	}
	if p, ok := h.HostPath(); !ok || p != "/srv/tree" {
		t.Errorf("HostPath = %q, %v", p, ok)
	}
	if p, ok := vfs.ReadOnly(memory.New()).(vfs.HostPather).HostPath(); ok || p != "" {
		t.Errorf("HostPath of a memory backend = %q, %v", p, ok)
	}
}
