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

// charges walks the tree from the top root and returns what WithQuota should be
// charging for it: structure (nodes, entries, names, symlink targets) and file
// data (capacity). Files open but unlinked are not reachable and not counted.
func charges(m *FS) (structure, data int64) {
	m.st.mu.RLock()
	defer m.st.mu.RUnlock()
	seen := map[*node]bool{}
	var walk func(d *node)
	walk = func(d *node) {
		for name, c := range d.dir.children {
			structure += EntryCharge + int64(len(name))
			if seen[c] {
				continue
			}
			seen[c] = true
			switch c.typ {
			case fs.ModeDir:
				structure += DirCharge
				walk(c)
			case fs.ModeSymlink:
				structure += NodeCharge + int64(len(c.target()))
			default:
				structure += NodeCharge
				c.mu.RLock()
				data += int64(cap(c.data))
				c.mu.RUnlock()
			}
		}
	}
	walk(m.origin)
	return structure, data
}

// dataUsage is Usage less the structure charges of the reachable tree: the file
// capacity charged (plus anything held by unlinked open files).
func dataUsage(m *FS) int64 {
	s, _ := charges(m)
	return m.Usage() - s
}

func TestDataUsage(t *testing.T) {
	m := New()
	writeFile(t, m, "f", "12345")
	mkdirs(t, m, "d")
	must(t, m.Symlink(bg, "target", P("l")))
	if s, d := charges(m); m.DataUsage() != d || d != 5 || m.Usage() != s+d {
		t.Fatalf("DataUsage %d, Usage %d; tree: %d data, %d structure", m.DataUsage(), m.Usage(), d, s)
	}
	must(t, m.Remove(bg, P("f")))
	if m.DataUsage() != 0 {
		t.Fatalf("DataUsage %d after remove", m.DataUsage())
	}
}
