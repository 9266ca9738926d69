package vfstest

import (
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// testErrors provokes every error code a backend must produce and checks each error
// in full: a *vfs.Error itself (not wrapped), the expected Code, an Op, the path as
// the caller named it, the io/fs sentinel, and no host path. (The checked wrapper
// applies the generic part of these checks to every call of every group.)
func testErrors(t *testing.T, cfg Config) {
	f := newFx(t, cfg)
	raw := f.b.(*checked).b // call the backend directly: this group reports itself
	markers := hostMarkers(raw)
	ctx := f.ctx
	f.seed("f=F", "d/", "d/x=X", "e/")

	check := func(what string, err error, code vfs.Code, path string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: succeeded; want %s", what, code)
			return
		}
		if v := contractViolation(err, markers); v != "" {
			t.Errorf("%s: %s", what, v)
			return
		}
		e := err.(*vfs.Error)
		if e.Code != code {
			t.Errorf("%s: code %s (%v); want %s", what, e.Code, err, code)
		}
		if e.Path != path {
			t.Errorf("%s: Path %q (%v); want the caller's path %q", what, e.Path, err, path)
		}
	}
	_, err := raw.Stat(ctx, p("missing"))
	check("Stat(missing)", err, vfs.CodeNotFound, "missing")
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, vfs.ErrNotFound) {
		t.Errorf("Stat(missing): errors.Is(fs.ErrNotExist / vfs.ErrNotFound) false for %v", err)
	}
	_, err = raw.Lstat(ctx, p("d/missing/y"))
	check("Lstat(d/missing/y)", err, vfs.CodeNotFound, "d/missing/y")
	err = raw.Mkdir(ctx, p("d"), 0o755)
	check("Mkdir(d)", err, vfs.CodeExists, "d")
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("Mkdir(d): errors.Is(fs.ErrExist) false for %v", err)
	}
	_, err = raw.OpenFile(ctx, p("f"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	check("OpenFile(f, O_EXCL)", err, vfs.CodeExists, "f")
	check("Remove(d)", raw.Remove(ctx, p("d")), vfs.CodeNotEmpty, "d")
	_, err = raw.ReadDir(ctx, p("f"))
	check("ReadDir(f)", err, vfs.CodeNotDir, "f")
	_, err = raw.OpenFile(ctx, p("f/x"), os.O_RDONLY, 0)
	check("OpenFile(f/x)", err, vfs.CodeNotDir, "f/x")
	_, err = raw.OpenFile(ctx, p("d"), os.O_WRONLY, 0)
	check("OpenFile(d, O_WRONLY)", err, vfs.CodeIsDir, "d")
	check("Rename(e, e/in)", raw.Rename(ctx, p("e"), p("e/in"), 0), vfs.CodeInvalidPath, "e")

	// Errors from a Sub name paths relative to the sub.
	sub, err := raw.Sub(ctx, p("d"))
	if err == nil {
		_, err = sub.Stat(ctx, p("nope"))
		check("Sub(d).Stat(nope)", err, vfs.CodeNotFound, "nope")
	} else {
		t.Errorf("Sub(d): %v", err)
	}

	// A closed File: every call fails with closed, matching fs.ErrClosed.
	h, err := raw.OpenFile(ctx, p("f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("OpenFile(f): %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	buf := make([]byte, 1)
	closedCalls := map[string]error{"Close": h.Close(), "Sync": h.Sync(), "Truncate": h.Truncate(0)}
	_, closedCalls["Read"] = h.Read(buf)
	_, closedCalls["ReadAt"] = h.ReadAt(buf, 0)
	_, closedCalls["Write"] = h.Write(buf)
	_, closedCalls["WriteAt"] = h.WriteAt(buf, 0)
	_, closedCalls["Seek"] = h.Seek(0, 0)
	_, closedCalls["Stat"] = h.Stat()
	for name, err := range closedCalls {
		if err == nil {
			t.Errorf("%s on a closed file succeeded", name)
			continue
		}
		if v := contractViolation(err, markers); v != "" {
			t.Errorf("%s on a closed file: %s", name, v)
		} else if vfs.CodeOf(err) != vfs.CodeClosed || !errors.Is(err, fs.ErrClosed) {
			t.Errorf("%s on a closed file: %v; want closed, matching fs.ErrClosed", name, err)
		}
	}
	if got := f.read("f"); got != "F" {
		t.Errorf("calls on a closed handle changed the file: %q", got)
	}
	if f.feat.Symlinks {
		f.seed("loop -> loop")
		_, err = raw.Stat(ctx, p("loop"))
		check("Stat(loop)", err, vfs.CodeTooManyLinks, "loop")
		f.plant("/outside", "absl")
		_, err = raw.Stat(ctx, p("absl/x"))
		check("Stat(absl/x)", err, vfs.CodeOutside, "absl/x")
		if !errors.Is(err, fs.ErrPermission) {
			t.Errorf("path_outside_sandbox must match fs.ErrPermission: %v", err)
		}
	}
}
