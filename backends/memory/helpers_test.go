package memory

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capfs/capfs/vfs"
)

var bg = context.Background()

func P(s string) vfs.Path { return vfs.MustParse(s) }

// fakeClock returns a clock that advances one second per call, so every mutation
// gets a distinct, predictable time.
func fakeClock() func() time.Time {
	var n atomic.Int64
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time { return base.Add(time.Duration(n.Add(1)) * time.Second) }
}

func wantCode(t *testing.T, err error, code vfs.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want %s", code)
	}
	var e *vfs.Error
	if !errors.As(err, &e) {
		t.Fatalf("got %T %v, want *vfs.Error with code %s", err, err, code)
	}
	if e.Code != code {
		t.Fatalf("got code %s (%v), want %s", e.Code, err, code)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, b vfs.Backend, name, data string) {
	t.Helper()
	f, err := b.OpenFile(bg, P(name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	must(t, err)
	if _, err := io.WriteString(f, data); err != nil {
		t.Fatal(err)
	}
	must(t, f.Close())
}

func readFile(t *testing.T, b vfs.Backend, name string) string {
	t.Helper()
	f, err := b.OpenFile(bg, P(name), os.O_RDONLY, 0)
	must(t, err)
	defer f.Close()
	data, err := io.ReadAll(f)
	must(t, err)
	return string(data)
}

func mkdirs(t *testing.T, b vfs.Backend, names ...string) {
	t.Helper()
	for _, n := range names {
		must(t, b.Mkdir(bg, P(n), 0o755))
	}
}

func exists(t *testing.T, b vfs.Backend, name string) bool {
	t.Helper()
	_, err := b.Lstat(bg, P(name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("lstat %s: %v", name, err)
	}
	return err == nil
}

func names(es []vfs.DirEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Name
	}
	return out
}
