package vfs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/capfs/capfs/vfs"
)

var allCodes = []vfs.Code{
	vfs.CodeOutside, vfs.CodeInvalidPath, vfs.CodePermission, vfs.CodeReadOnly, vfs.CodeRevoked,
	vfs.CodeNotFound, vfs.CodeExists, vfs.CodeNotDir, vfs.CodeIsDir, vfs.CodeNotEmpty,
	vfs.CodeTooLarge, vfs.CodeQuota, vfs.CodeTooManyLinks, vfs.CodeNotRegular, vfs.CodeCrossMount,
	vfs.CodeConflict, vfs.CodeClosed, vfs.CodeNotSupported, vfs.CodeIO, vfs.CodeCanceled,
}

// TestPathErrorReadsBack: every code's PathError is an *fs.PathError naming the
// operation and the guest's path, os.IsNotExist/IsExist/IsPermission agree with
// errors.Is, and Errno maps the errno back to the code except where the doc of
// PathError says it does not.
func TestPathErrorReadsBack(t *testing.T) {
	lossy := map[vfs.Code]vfs.Code{
		vfs.CodeRevoked:    vfs.CodePermission,
		vfs.CodeOutside:    vfs.CodePermission,
		vfs.CodeNotRegular: vfs.CodeInvalidPath,
		vfs.CodeClosed:     vfs.CodePermission,
		vfs.CodeConflict:   vfs.CodeIO,
		vfs.CodeCanceled:   vfs.CodeIO,
	}
	for _, c := range allCodes {
		err := vfs.PathError("open", "/a/b", vfs.NewError(c, "Open", vfs.MustParse("x/y"), "detail"))
		pe, ok := errors.AsType[*fs.PathError](err)
		if !ok || pe.Op != "open" || pe.Path != "/a/b" || pe.Err != c.Errno() {
			t.Errorf("%s: %#v", c, err)
			continue
		}
		for _, s := range []struct {
			sentinel error
			os       func(error) bool
		}{{fs.ErrNotExist, os.IsNotExist}, {fs.ErrExist, os.IsExist}, {fs.ErrPermission, os.IsPermission}} {
			if s.os(err) != errors.Is(err, s.sentinel) {
				t.Errorf("%s: os dialect %v, errors.Is %v for %v", c, s.os(err), errors.Is(err, s.sentinel), s.sentinel)
			}
		}
		want := c
		if l, ok := lossy[c]; ok {
			want = l
		}
		if got := vfs.CodeOf(vfs.Errno("open", vfs.Root, err)); got != want {
			t.Errorf("%s reads back as %s, want %s", c, got, want)
		}
	}
	if err := vfs.PathError("read", "f", io.EOF); err != io.EOF {
		t.Errorf("io.EOF became %v", err)
	}
	if err := vfs.PathError("read", "f", nil); err != nil {
		t.Errorf("nil became %v", err)
	}
}

// TestReaddressTo: an *Error keeps its code, cause and Op and takes the
// layer's paths; a foreign error goes through Errno with the given op.
func TestReaddressTo(t *testing.T) {
	inner := &vfs.Error{Code: vfs.CodeNotDir, Op: "lstat", Path: "q", Err: syscall.ENOTDIR}
	err := vfs.ReaddressTo(inner, "rename", vfs.MustParse("m/a"), vfs.MustParse("m/b"))
	e, ok := errors.AsType[*vfs.Error](err)
	if !ok || e.Code != vfs.CodeNotDir || e.Op != "lstat" || e.Path != "m/a" || e.Dest != "m/b" || !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("re-addressed: %#v", err)
	}
	if inner.Path != "q" {
		t.Errorf("the original changed: %#v", inner)
	}
	err = vfs.ReaddressTo(&fs.PathError{Op: "open", Path: "/host/secret", Err: syscall.ENOENT}, "open", vfs.MustParse("g"))
	if e, ok := errors.AsType[*vfs.Error](err); !ok || e.Code != vfs.CodeNotFound || e.Op != "open" || e.Path != "g" || e.Dest != "" || strings.Contains(err.Error(), "/host") {
		t.Errorf("foreign: %v", err)
	}
	if vfs.CodeOf(vfs.ReaddressTo(context.Canceled, "open", vfs.Root)) == "" {
		t.Error("a foreign error stayed foreign")
	}
	if vfs.ReaddressTo(nil, "open", vfs.Root) != nil {
		t.Error("nil became an error")
	}
}

// TestReopAndGuestError: Reop changes only the Op; GuestError shows the guest's
// path printable.
func TestReopAndGuestError(t *testing.T) {
	e := vfs.GuestError(vfs.CodeTooLarge, "ReadJSON", "a\x00b", "", "big")
	if e.Path != `a\x00b` || e.Message() != "big" {
		t.Errorf("GuestError: %#v", e)
	}
	long := vfs.GuestError(vfs.CodeNotDir, "op", strings.Repeat("x", 600), "", "")
	if len(long.Path) >= 600 || !strings.HasSuffix(long.Path, "…") {
		t.Errorf("a long path is not cut: %d bytes", len(long.Path))
	}
	err := vfs.Reop(e, "WriteJSON")
	if r, ok := errors.AsType[*vfs.Error](err); !ok || r.Op != "WriteJSON" || r.Path != e.Path || r.Code != e.Code {
		t.Errorf("Reop: %#v", err)
	}
	if vfs.Reop(io.EOF, "x") != io.EOF {
		t.Error("Reop changed a foreign error")
	}
}

func TestUnder(t *testing.T) {
	w := vfs.MustParse("w/x")
	for _, c := range []struct {
		p          vfs.Path
		path, dest string
		want, wd   string
	}{
		{w, "a/b", "", "w/x/a/b", ""},
		{w, ".", "c", "w/x", "w/x/c"},
		{w, "", "", "w/x", ""},
		{vfs.Root, "a", "b", "a", "b"},
	} {
		err := vfs.Readdress(vfs.NewError(vfs.CodeNotFound, "open", vfs.Root, ""), "", c.path, c.dest)
		got, ok := vfs.Under(err, c.p).(*vfs.Error)
		if !ok || got.Path != c.want || got.Dest != c.wd || got.Op != "open" || got.Code != vfs.CodeNotFound {
			t.Errorf("Under(%q, %q -> %q) = %v, want path %q dest %q", c.p, c.path, c.dest, got, c.want, c.wd)
		}
	}
	plain := errors.New("plain")
	if vfs.Under(plain, w) != plain {
		t.Error("a plain error was changed")
	}
}

func TestMessageOf(t *testing.T) {
	e := vfs.NewError(vfs.CodeNotFound, "open", vfs.MustParse("a/b"), "no such thing")
	if got := vfs.MessageOf(fmt.Errorf("wrapped: %w", e)); got != "no such thing" {
		t.Errorf("MessageOf = %q", got)
	}
	if got := vfs.MessageOf(errors.New("plain")); got != "" {
		t.Errorf("MessageOf(plain) = %q", got)
	}
}
