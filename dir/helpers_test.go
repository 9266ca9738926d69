package dir_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

var bg = context.Background()

// seed is the tree most tests start from.
var seed = map[string]string{
	"a.txt":              "alpha",
	"dir/b.txt":          "beta",
	"dir/sub/c.go":       "package c\n",
	"dir/sub/deep/d.go":  "package deep\n",
	"dir/sub/deep/e.txt": "e",
	"other/x.md":         "# x\n",
	"other/.env":         "SECRET=1\n",
}

// newTree returns a root Dir and Control over a fresh memory backend holding seed,
// an empty directory "empty", and symlinks link -> dir/b.txt, dlink -> dir.
func newTree(t testing.TB, opts ...dir.Option) (*dir.Dir, *dir.Control, *memory.FS) {
	t.Helper()
	m := memory.New()
	seedBackend(t, m)
	d, c := dir.New(m, opts...)
	return d, c, m
}

func seedBackend(t testing.TB, b vfs.Backend) {
	t.Helper()
	d, _ := dir.New(b)
	for name, body := range seed {
		if i := lastSlash(name); i > 0 {
			must(t, d.MkdirAll(bg, name[:i]))
		}
		must(t, d.WriteFile(bg, name, []byte(body), 0o644))
	}
	must(t, d.MkdirAll(bg, "empty"))
	must(t, d.Symlink(bg, "dir/b.txt", "link"))
	must(t, d.Symlink(bg, "dir", "dlink"))
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantCode fails unless err is a *vfs.Error with code.
func wantCode(t testing.TB, err error, code vfs.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want %s", code)
	}
	var ve *vfs.Error
	if !errors.As(err, &ve) {
		t.Fatalf("got %T %v, want *vfs.Error %s", err, err, code)
	}
	if ve.Code != code {
		t.Fatalf("got %v (code %s), want code %s", err, ve.Code, code)
	}
}

func readString(t testing.TB, d *dir.Dir, name string) string {
	t.Helper()
	b, err := d.ReadFile(bg, name)
	if err != nil {
		t.Fatalf("ReadFile(%q): %v", name, err)
	}
	return string(b)
}

func wantList(t testing.TB, d *dir.Dir, path string, want ...string) {
	t.Helper()
	got, err := d.List(bg, path)
	if err != nil {
		t.Fatalf("List(%q): %v", path, err)
	}
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List(%q) = %q, want %q", path, got, want)
	}
}

// recorder is a Hook that records Before/After calls and can refuse.
type recorder struct {
	mu     sync.Mutex
	name   string
	log    *[]string
	refuse error
	afters []error
}

func (r *recorder) Before(_ context.Context, req *policy.Request) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, r.name+".before:"+string(req.Op)+":"+req.Path)
	return r.refuse
}

func (r *recorder) After(_ context.Context, req *policy.Request, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, r.name+".after:"+string(req.Op))
	r.afters = append(r.afters, err)
}

func (r *recorder) Name() string { return r.name }

type ctxT = context.Context
