package aferodir_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/go-git/go-billy/v5"
	"github.com/spf13/afero"

	"github.com/capfs/capfs/aferodir"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/billyfs"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
)

// adapter is the part of afero.Fs and billy.Filesystem the error table calls.
type adapter struct {
	stat   func(name string) error
	create func(name string) error // O_CREATE|O_EXCL
	write  func(name string) error // O_WRONLY
	remove func(name string) error
}

// fileSystem is what afero.Fs and billy.Filesystem share, F being their file
// type.
type fileSystem[F any] interface {
	Stat(name string) (os.FileInfo, error)
	OpenFile(name string, flag int, perm os.FileMode) (F, error)
	Remove(name string) error
}

func adapterOf[F any](v fileSystem[F]) adapter {
	open := func(n string, flag int) error { _, err := v.OpenFile(n, flag, 0o644); return err }
	return adapter{
		stat:   func(n string) error { _, err := v.Stat(n); return err },
		create: func(n string) error { return open(n, os.O_WRONLY|os.O_CREATE|os.O_EXCL) },
		write:  func(n string) error { return open(n, os.O_WRONLY) },
		remove: v.Remove,
	}
}

func aferoAdapter(d *dir.Dir) adapter { return adapterOf[afero.File](aferodir.New(d)) }

func billyAdapter(d *dir.Dir) adapter { return adapterOf[billy.File](billyfs.New(d)) }

// TestAdapterErrors: both adapters return errors that the os dialect
// (os.IsNotExist, os.IsExist, os.IsPermission) and the errors.Is dialect
// understand alike: an *fs.PathError with the operation, the guest's name (never
// the host path) and the errno of the capfs code.
func TestAdapterErrors(t *testing.T) {
	host := t.TempDir()
	b, err := physical.New(host)
	if err != nil {
		t.Fatal(err)
	}
	deny := policy.Func(func(_ context.Context, r *policy.Request) policy.Decision {
		if strings.HasPrefix(r.Path, "secret") {
			return policy.Decision{Effect: policy.Deny, Rule: "deny:secret"}
		}
		return policy.Decision{Effect: policy.Allow, Rule: "default"}
	})
	d, _ := dir.New(b, dir.WithPolicy(deny))
	ctx := context.Background()
	if err := d.MkdirAll(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile(ctx, "f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		call  func(a adapter) error
		op    string
		path  string
		errno syscall.Errno
		is    error // the io/fs sentinel it is, or nil for none of the three
		ro    bool
	}{
		{"not_found", func(a adapter) error { return a.stat("d/missing") }, "stat", "d/missing", syscall.ENOENT, fs.ErrNotExist, false},
		{"exists", func(a adapter) error { return a.create("/f") }, "open", "/f", syscall.EEXIST, fs.ErrExist, false},
		{"permission", func(a adapter) error { return a.stat("secret") }, "stat", "secret", syscall.EACCES, fs.ErrPermission, false},
		{"read-only", func(a adapter) error { return a.remove("f") }, "remove", "f", syscall.EROFS, nil, true},
		{"not_dir", func(a adapter) error { return a.stat("f/x") }, "stat", "f/x", syscall.ENOTDIR, nil, false},
		{"is_dir", func(a adapter) error { return a.write("d") }, "open", "d", syscall.EISDIR, nil, false},
	}
	adapters := map[string]func(*dir.Dir) adapter{"afero": aferoAdapter, "billy": billyAdapter}
	for an, mk := range adapters {
		for _, c := range cases {
			t.Run(an+"/"+c.name, func(t *testing.T) {
				dd := d
				if c.ro {
					dd = d.ReadOnly()
				}
				err := c.call(mk(dd))
				checkPathError(t, err, c.op, c.path, c.errno, host)
				for _, s := range []struct {
					sentinel error
					os       func(error) bool
				}{{fs.ErrNotExist, os.IsNotExist}, {fs.ErrExist, os.IsExist}, {fs.ErrPermission, os.IsPermission}} {
					want := s.sentinel == c.is
					if s.os(err) != want || errors.Is(err, s.sentinel) != want {
						t.Errorf("%v: os.Is %v, errors.Is %v for %v; want %v", err, s.os(err), errors.Is(err, s.sentinel), s.sentinel, want)
					}
				}
			})
		}
	}
}

func checkPathError(t *testing.T, err error, op, path string, errno syscall.Errno, host string) {
	t.Helper()
	pe, ok := errors.AsType[*fs.PathError](err)
	if !ok {
		t.Fatalf("%T %v: not an *fs.PathError", err, err)
	}
	if pe.Op != op || pe.Path != path || !errors.Is(err, errno) {
		t.Errorf("%v: want op %q, path %q, errno %v", err, op, path, errno)
	}
	if strings.Contains(err.Error(), host) {
		t.Errorf("%v names the host path %s", err, host)
	}
}
