package cas

import (
	"context"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
)

var bg = context.Background()

func P(s string) vfs.Path { return vfs.MustParse(s) }

func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// build fills a memory backend from a spec: "dir/" makes a directory, "f=text"
// a 0644 file, "f*=text" a 0755 file, "l->target" a symlink.
func build(t testing.TB, spec ...string) *memory.FS {
	t.Helper()
	m := memory.New()
	for _, s := range spec {
		switch {
		case strings.HasSuffix(s, "/"):
			if err := m.Mkdir(bg, P(strings.TrimSuffix(s, "/")), 0o755); err != nil {
				t.Fatal(s, err)
			}
		case strings.Contains(s, "->"):
			name, target, _ := strings.Cut(s, "->")
			if err := m.Symlink(bg, target, P(name)); err != nil {
				t.Fatal(s, err)
			}
		default:
			name, body, _ := strings.Cut(s, "=")
			perm := fs.FileMode(0o644)
			if strings.HasSuffix(name, "*") {
				name, perm = strings.TrimSuffix(name, "*"), 0o755
			}
			f, err := m.OpenFile(bg, P(name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
			if err != nil {
				t.Fatal(s, err)
			}
			f.Write([]byte(body))
			f.Close()
			if err := m.Chmod(bg, P(name), perm); err != nil {
				t.Fatal(err)
			}
		}
	}
	return m
}

func snap(t testing.TB, s *Store, b vfs.Backend) Digest {
	t.Helper()
	d, err := s.Snapshot(bg, b, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mount(t testing.TB, s *Store, d Digest) *FS {
	t.Helper()
	f, err := s.Mount(bg, d, testTime)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
