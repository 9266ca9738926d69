package vfs_test

import (
	"errors"
	"io"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/capfs/capfs/internal/hostfd"
	"github.com/capfs/capfs/vfs"
)

// failing is a File whose every call fails with code, addressed to the path
// the inner layer knows ("inner/x"), and whose Read fails with io.EOF.
type failing struct{ code vfs.Code }

func (f failing) err(op string) error {
	return vfs.NewError(f.code, op, vfs.MustParse("inner/x"), "")
}

func (f failing) Read([]byte) (int, error)           { return 0, io.EOF }
func (f failing) ReadAt([]byte, int64) (int, error)  { return 0, f.err("read") }
func (f failing) Write([]byte) (int, error)          { return 0, f.err("write") }
func (f failing) WriteAt([]byte, int64) (int, error) { return 0, f.err("write") }
func (f failing) Seek(int64, int) (int64, error)     { return 0, f.err("seek") }
func (f failing) Close() error                       { return f.err("close") }
func (f failing) Stat() (vfs.Info, error)            { return vfs.Info{}, f.err("stat") }
func (f failing) Truncate(int64) error               { return f.err("truncate") }
func (f failing) Sync() error                        { return f.err("sync") }

// fileCalls calls every method of a File that returns an error, by op.
var fileCalls = map[string]func(vfs.File) error{
	"read":     func(f vfs.File) error { _, err := f.ReadAt(nil, 0); return err },
	"write":    func(f vfs.File) error { _, err := f.Write(nil); return err },
	"writeat":  func(f vfs.File) error { _, err := f.WriteAt(nil, 0); return err },
	"seek":     func(f vfs.File) error { _, err := f.Seek(0, io.SeekStart); return err },
	"close":    func(f vfs.File) error { return f.Close() },
	"stat":     func(f vfs.File) error { _, err := f.Stat(); return err },
	"truncate": func(f vfs.File) error { return f.Truncate(0) },
	"sync":     func(f vfs.File) error { return f.Sync() },
}

// Every error of an addressed File names the caller's path and keeps its
// code and operation; io.EOF passes as it is; Fix sees each error first.
func TestAddressFileReaddressesErrors(t *testing.T) {
	var fixed int
	fix := func(err error) error {
		fixed++
		if vfs.CodeOf(err) == vfs.CodeReadOnly {
			e, _ := errors.AsType[*vfs.Error](err)
			return vfs.NewError(vfs.CodePermission, e.Op, vfs.Root, "mapped")
		}
		return err
	}
	f := vfs.AddressFile(failing{vfs.CodeReadOnly}, vfs.FileAddress{Path: vfs.MustParse("a/b"), Fix: fix})
	for name, call := range fileCalls {
		err := call(f)
		e, ok := errors.AsType[*vfs.Error](err)
		if !ok || e.Path != "a/b" || e.Code != vfs.CodePermission || e.Message() != "mapped" {
			t.Errorf("%s: %v, want fs_permission_denied (mapped) on a/b", name, err)
		}
		if want := name; want != "writeat" && e != nil && e.Op != want {
			t.Errorf("%s: op %q, want the inner file's", name, e.Op)
		}
	}
	if fixed != len(fileCalls) {
		t.Errorf("Fix saw %d errors, want %d", fixed, len(fileCalls))
	}
	if _, err := f.Read(nil); err != io.EOF {
		t.Errorf("Read: %v, want io.EOF as it is", err)
	}
	if fixed != len(fileCalls) {
		t.Errorf("Fix saw io.EOF")
	}
	g := vfs.AddressFile(failing{vfs.CodeNotFound}, vfs.FileAddress{Path: vfs.MustParse("c")})
	if err := g.Sync(); vfs.CodeOf(err) != vfs.CodeNotFound || err.(*vfs.Error).Path != "c" {
		t.Errorf("Sync without Fix: %v, want not_found on c", err)
	}
	if vfs.AddressFile(nil, vfs.FileAddress{}) != nil {
		t.Error("AddressFile(nil) is not nil")
	}
}

// optFile is a File over failing with some of the optional File interfaces,
// each answering a fixed value and counting its calls.
type optFile struct {
	failing
	calls map[string]int
}

// Stat answers a regular file named as the inner layer knows it.
func (f *optFile) Stat() (vfs.Info, error) { return vfs.Info{Name: "x", Size: 5}, nil }

type (
	withType     struct{ *optFile }
	withOpenStat struct{ *optFile }
	withHostFd   struct{ *optFile }
)

func (f withType) Type() fs.FileMode { f.calls["TypedFile"]++; return fs.ModeDir }

func (f withOpenStat) OpenStat() (vfs.Info, bool) {
	f.calls["OpenStater"]++
	return vfs.Info{Name: "x", Size: 5}, true
}

func (f withHostFd) HostFd(hostfd.Token) (int, bool) { f.calls["hostfd.Filer"]++; return 7, true }

// optFiles are the inner Files with each subset of the optional interfaces,
// by the names they have.
func optFiles() map[string]func(*optFile) vfs.File {
	type t = withType
	type s = withOpenStat
	type h = withHostFd
	return map[string]func(*optFile) vfs.File{
		"": func(o *optFile) vfs.File { return o },
		"TypedFile": func(o *optFile) vfs.File {
			return struct {
				*optFile
				t
			}{o, t{o}}
		},
		"OpenStater": func(o *optFile) vfs.File {
			return struct {
				*optFile
				s
			}{o, s{o}}
		},
		"hostfd.Filer": func(o *optFile) vfs.File {
			return struct {
				*optFile
				h
			}{o, h{o}}
		},
		"TypedFile OpenStater": func(o *optFile) vfs.File {
			return struct {
				*optFile
				t
				s
			}{o, t{o}, s{o}}
		},
		"TypedFile hostfd.Filer": func(o *optFile) vfs.File {
			return struct {
				*optFile
				t
				h
			}{o, t{o}, h{o}}
		},
		"OpenStater hostfd.Filer": func(o *optFile) vfs.File {
			return struct {
				*optFile
				s
				h
			}{o, s{o}, h{o}}
		},
		"TypedFile OpenStater hostfd.Filer": func(o *optFile) vfs.File {
			return struct {
				*optFile
				t
				s
				h
			}{o, t{o}, s{o}, h{o}}
		},
	}
}

// The optional File interfaces of vfs.OptionalFiles, by name.
func fileOptionals() map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for _, o := range vfs.OptionalFiles() {
		m[o.Name] = o.Type
	}
	return m
}

// An addressed File implements an optional File interface exactly when the
// File it wraps does, and each one it has reaches the wrapped File's method
// (with the address's name in OpenStat).
func TestAddressFileForwardsExactlyTheOptionals(t *testing.T) {
	for has, mk := range optFiles() {
		o := &optFile{failing: failing{vfs.CodeIO}, calls: map[string]int{}}
		inner := mk(o)
		f := vfs.AddressFile(inner, vfs.FileAddress{Path: vfs.MustParse("a/b"), Name: "b"})
		for name, typ := range fileOptionals() {
			in := reflect.TypeOf(inner).Implements(typ)
			if in != containsWord(has, name) {
				t.Fatalf("[%s] the test's inner file: %s is %v", has, name, in)
			}
			if got := reflect.TypeOf(f).Implements(typ); got != in {
				t.Errorf("[%s] the addressed file implements %s: %v, the inner file: %v", has, name, got, in)
			}
		}
		if tf, ok := f.(vfs.TypedFile); ok && (tf.Type() != fs.ModeDir || o.calls["TypedFile"] != 1) {
			t.Errorf("[%s] Type did not reach the inner file's", has)
		}
		if st, ok := f.(vfs.OpenStater); ok {
			info, ok := st.OpenStat()
			if !ok || info.Name != "b" || info.Size != 5 || o.calls["OpenStater"] != 1 {
				t.Errorf("[%s] OpenStat: %+v %v, want the inner file's status named b", has, info, ok)
			}
		}
		if fd, ok := hostfd.Of(f); ok != containsWord(has, "hostfd.Filer") || ok && (fd != 7 || o.calls["hostfd.Filer"] != 1) {
			t.Errorf("[%s] hostfd.Of: %d %v, want the inner file's", has, fd, ok)
		}
		if info, err := f.Stat(); err != nil || info.Name != "b" {
			t.Errorf("[%s] Stat: %+v %v, want name b", has, info, err)
		}
	}
}

// containsWord reports whether w is one of the words of s.
func containsWord(s, w string) bool { return slices.Contains(strings.Fields(s), w) }

// allOptionals is a wrapper implementing every optional File interface,
// forwarding each to the File it wraps.
type allOptionals struct{ vfs.File }

func (a allOptionals) Type() fs.FileMode { return a.File.(vfs.TypedFile).Type() }

func (a allOptionals) OpenStat() (vfs.Info, bool) { return a.File.(vfs.OpenStater).OpenStat() }

func (a allOptionals) HostFd(t hostfd.Token) (int, bool) { return a.File.(hostfd.Filer).HostFd(t) }

// noHostFd is a wrapper that withholds the host descriptor.
type noHostFd struct{ vfs.File }

func (a noHostFd) Type() fs.FileMode { return a.File.(vfs.TypedFile).Type() }

func (a noHostFd) OpenStat() (vfs.Info, bool) { return a.File.(vfs.OpenStater).OpenStat() }

// WrapFile keeps exactly the optional File interfaces both the wrapper and
// the wrapped File have, each answered by the wrapper's method.
func TestWrapFileKeepsWhatBothHave(t *testing.T) {
	for has, mk := range optFiles() {
		o := &optFile{failing: failing{vfs.CodeIO}, calls: map[string]int{}}
		inner := mk(o)
		all := vfs.WrapFile(allOptionals{inner}, inner)
		some := vfs.WrapFile(noHostFd{inner}, inner)
		for name, typ := range fileOptionals() {
			in := containsWord(has, name)
			if got := reflect.TypeOf(all).Implements(typ); got != in {
				t.Errorf("[%s] WrapFile(all) implements %s: %v, the inner file: %v", has, name, got, in)
			}
			want := in && name != "hostfd.Filer"
			if got := reflect.TypeOf(some).Implements(typ); got != want {
				t.Errorf("[%s] WrapFile(without a host descriptor) implements %s: %v, want %v", has, name, got, want)
			}
		}
		if fd, ok := hostfd.Of(all); ok != containsWord(has, "hostfd.Filer") || ok && (fd != 7 || o.calls["hostfd.Filer"] != 1) {
			t.Errorf("[%s] hostfd.Of: %d %v, want the inner file's", has, fd, ok)
		}
		if _, err := all.ReadAt(nil, 0); vfs.CodeOf(err) != vfs.CodeIO {
			t.Errorf("[%s] ReadAt: %v, want the inner file's io_error", has, err)
		}
	}
	for name, typ := range fileOptionals() {
		if f := vfs.WrapFile(allOptionals{}, nil); reflect.TypeOf(f).Implements(typ) {
			t.Errorf("WrapFile(w, nil) %T implements %s", f, name)
		}
	}
}
