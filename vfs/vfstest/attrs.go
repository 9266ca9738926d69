package vfstest

import (
	"context"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/capfs/capfs/vfs"
)

// Lchtimes reaches the wrapped backend's own ([vfs.LinkTimer]), or the vfs
// fallback, and checks its error.
func (c *checked) Lchtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	return c.check("Lchtimes("+p.String()+")", vfs.Lchtimes(ctx, c.b, p, atime, mtime))
}

// StatFS reaches the wrapped backend's own ([vfs.StatFSer]), or the vfs
// fallback, and checks its error.
func (c *checked) StatFS(ctx context.Context, p vfs.Path) (vfs.FSStat, error) {
	st, err := vfs.StatFS(ctx, c.b, p)
	return st, c.check("StatFS("+p.String()+")", err)
}

// Chmod forwards to the wrapped File ([vfs.AttrFile]) and checks its error.
func (f *checkedFile) Chmod(mode fs.FileMode) error {
	return f.checkErr("Chmod", f.f.(vfs.AttrFile).Chmod(mode), false)
}

// Chtimes forwards to the wrapped File ([vfs.AttrFile]) and checks its error.
func (f *checkedFile) Chtimes(atime, mtime time.Time) error {
	return f.checkErr("Chtimes", f.f.(vfs.AttrFile).Chtimes(atime, mtime), false)
}

// attrTime is the time the Attrs checks set.
var attrTime = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

// testAttrs checks what a backend's optional status changes do, where it
// has them: [vfs.LinkTimer] sets a symlink's own time and not its target's;
// [vfs.AttrFile] changes the mode and time of the file a File opened after
// its name is gone, and fails with closed once the File is closed;
// [vfs.StatFSer] answers for an existing path (Free at most Total) and
// not_found for a missing one. Each part is skipped where the backend
// answers not_supported (a File may: a layer beneath may lack AttrFile).
func testAttrs(t *testing.T, cfg Config) {
	t.Run("LinkTimes", func(t *testing.T) {
		f := newFx(t, cfg, symlinks)
		f.seed("f=x", "l -> f")
		before, err := f.b.Stat(f.ctx, p("f"))
		if err != nil {
			t.Fatal(err)
		}
		err = vfs.Lchtimes(f.ctx, f.b, p("l"), time.Time{}, attrTime)
		if vfs.CodeOf(err) == vfs.CodeNotSupported {
			t.Skip("the backend sets no symlink's times (vfs.LinkTimer)")
		}
		if err != nil {
			t.Fatal(err)
		}
		if li, err := f.b.Lstat(f.ctx, p("l")); err != nil || !li.ModTime.Equal(attrTime) {
			t.Errorf("Lstat(l) after Lchtimes: %v, %v; want mtime %v", li.ModTime, err, attrTime)
		}
		if fi, err := f.b.Stat(f.ctx, p("f")); err != nil || !fi.ModTime.Equal(before.ModTime) {
			t.Errorf("the target's mtime changed: %v, %v (was %v)", fi.ModTime, err, before.ModTime)
		}
		wantErrCode(t, vfs.Lchtimes(f.ctx, f.b, p("missing"), time.Time{}, attrTime), vfs.CodeNotFound)
	})
	t.Run("FileAttrs", func(t *testing.T) { testFileAttrs(t, cfg) })
	t.Run("StatFS", func(t *testing.T) {
		f := newFx(t, cfg)
		f.seed("f=x")
		st, err := vfs.StatFS(f.ctx, f.b, p("f"))
		if vfs.CodeOf(err) == vfs.CodeNotSupported {
			t.Skip("the backend reports no capacity (vfs.StatFSer)")
		}
		if err != nil || st.Total <= 0 || st.Free < 0 || st.Free > st.Total {
			t.Errorf("StatFS(f) = %+v, %v", st, err)
		}
		_, err = vfs.StatFS(f.ctx, f.b, p("missing"))
		wantErrCode(t, err, vfs.CodeNotFound)
	})
}

// testFileAttrs is testAttrs' vfs.AttrFile part.
func testFileAttrs(t *testing.T, cfg Config) {
	f := newFx(t, cfg)
	f.seed("f=x")
	h, err := f.b.OpenFile(f.ctx, p("f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, ok := h.(vfs.AttrFile); !ok {
		t.Skip("the backend's Files change no status (vfs.AttrFile)")
	}
	if err := f.b.Remove(f.ctx, p("f")); err != nil {
		t.Fatal(err)
	}
	err = vfs.FileChmod(h, 0o600)
	if vfs.CodeOf(err) == vfs.CodeNotSupported {
		t.Skip("the backend's Files change no status (vfs.AttrFile answers not_supported)")
	}
	if err != nil {
		t.Errorf("Chmod of an open file with no name: %v", err)
	}
	if err := vfs.FileChtimes(h, time.Time{}, attrTime); err != nil {
		t.Errorf("Chtimes of an open file with no name: %v", err)
	}
	if info, err := h.Stat(); err != nil || info.Mode.Perm() != 0o600 || !info.ModTime.Equal(attrTime) {
		t.Errorf("Stat after Chmod and Chtimes: %v %v, %v; want 0600 and %v", info.Mode, info.ModTime, err, attrTime)
	}
	h.Close()
	wantErrCode(t, vfs.FileChmod(h, 0o644), vfs.CodeClosed)
}

// wantErrCode fails t unless err has code.
func wantErrCode(t *testing.T, err error, code vfs.Code) {
	t.Helper()
	if vfs.CodeOf(err) != code {
		t.Errorf("got %v, want %s", err, code)
	}
}
