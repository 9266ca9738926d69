package dir_test

import (
	"context"
	"io/fs"
	"os"
	"sync"
	"testing"

	"github.com/capfs/capfs/aferodir"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// permSpy records the mode every creating call hands the backend (its Subs too).
type permSpy struct {
	vfs.Backend
	mu    *sync.Mutex
	perms map[string]fs.FileMode
}

func (s *permSpy) note(p vfs.Path, perm fs.FileMode) {
	s.mu.Lock()
	s.perms[p.Base()] = perm
	s.mu.Unlock()
}

func (s *permSpy) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	if flag&os.O_CREATE != 0 {
		s.note(p, perm)
	}
	return s.Backend.OpenFile(ctx, p, flag, perm)
}

func (s *permSpy) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	s.note(p, perm)
	return s.Backend.Mkdir(ctx, p, perm)
}

func (s *permSpy) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	b, err := s.Backend.Sub(ctx, p)
	if err != nil {
		return nil, err
	}
	return &permSpy{Backend: b, mu: s.mu, perms: s.perms}, nil
}

// TestCreatePermsDropSetuid checks that no creating call a guest can make passes
// setuid or setgid to the backend, in either spelling, through any view, while the
// permission bits and sticky survive; and that the memory backend, which would
// store them, ends up without them.
func TestCreatePermsDropSetuid(t *testing.T) {
	spy := &permSpy{Backend: memory.New(), mu: new(sync.Mutex), perms: map[string]fs.FileMode{}}
	d, _ := dir.New(spy)
	must(t, d.MkdirAll(bg, "sub"))
	b := d.Backend()
	af := aferodir.New(d)
	const suidBits = fs.ModeSetuid | fs.ModeSetgid

	create := []struct {
		name string
		make func(name string, perm fs.FileMode) error
		dir  bool
	}{
		{"Dir.Open", func(name string, perm fs.FileMode) error {
			h, err := d.Open(bg, name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
			if err == nil {
				err = h.Close()
			}
			return err
		}, false},
		{"Backend.OpenFile", func(name string, perm fs.FileMode) error {
			f, err := b.OpenFile(bg, vfs.MustParse(name), os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
			if err == nil {
				err = f.Close()
			}
			return err
		}, false},
		{"Backend.Mkdir", func(name string, perm fs.FileMode) error {
			return b.Mkdir(bg, vfs.MustParse(name), perm)
		}, true},
		{"Afero.OpenFile", func(name string, perm fs.FileMode) error {
			f, err := af.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
			if err == nil {
				err = f.Close()
			}
			return err
		}, false},
		{"Afero.Mkdir", func(name string, perm fs.FileMode) error { return af.Mkdir(name, perm) }, true},
		{"Afero.MkdirAll", func(name string, perm fs.FileMode) error { return af.MkdirAll(name, perm) }, true},
	}
	modes := []struct {
		perm, want fs.FileMode
	}{
		{0o4755, 0o755},
		{0o2750, 0o750},
		{0o6777, 0o777},
		{fs.ModeSetuid | 0o700, 0o700},
		{fs.ModeSetgid | fs.ModeSetuid | 0o751, 0o751},
		{0o1777, fs.ModeSticky | 0o777},
		{fs.ModeSticky | fs.ModeSetuid | 0o4000 | 0o755, fs.ModeSticky | 0o755},
		{fs.ModeDir | fs.ModeSymlink | 0o640, 0o640},
	}
	for i, c := range create {
		for j, m := range modes {
			name := "sub/" + c.name + "-" + string(rune('a'+i)) + string(rune('a'+j))
			if err := c.make(name, m.perm); err != nil {
				t.Fatalf("%s(%q, %v): %v", c.name, name, m.perm, err)
			}
			spy.mu.Lock()
			got, ok := spy.perms[vfs.MustParse(name).Base()]
			spy.mu.Unlock()
			if !ok || got != m.want {
				t.Errorf("%s with %v: the backend was given %v (recorded %v), want %v", c.name, m.perm, got, ok, m.want)
			}
			fi, err := d.Stat(bg, name)
			if err != nil {
				t.Fatalf("stat %s: %v", name, err)
			}
			if fi.Mode()&suidBits != 0 || fi.Mode().Perm() != m.want.Perm() || fi.IsDir() != c.dir {
				t.Errorf("%s with %v: created %v", c.name, m.perm, fi.Mode())
			}
		}
	}
}
