package sqlite

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/sqlite/sqlitetest"
	"github.com/capfs/capfs/vfs"
)

// guardTimeout bounds each open of a hostile file here, so that a regression
// fails (with the timeout's error) instead of hanging the run.
const guardTimeout = 20 * time.Second

// wantOpen checks the outcome of opening a corpus case.
func wantOpen(t *testing.T, err error, want sqlitetest.Want) {
	t.Helper()
	var ok bool
	switch want {
	case sqlitetest.Opens:
		ok = err == nil
	case sqlitetest.Schema:
		ok = errors.Is(err, ErrSchema) && errors.Is(err, ErrCorrupt)
	case sqlitetest.Corrupt:
		ok = errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrSchema)
	case sqlitetest.Foreign:
		ok = errors.Is(err, ErrForeign)
	case sqlitetest.Version:
		ok = errors.Is(err, ErrAgentFSSchema)
	}
	if !ok {
		t.Fatalf("open: %v, want %s", err, want)
	}
}

// readAll reads every file of b and returns the bytes read, failing past
// limit, and on any error unless lenient.
func readAll(t *testing.T, b vfs.Backend, limit int64, lenient ...bool) int64 {
	t.Helper()
	check := func(err error) bool {
		t.Helper()
		if err != nil && len(lenient) == 0 {
			t.Fatal(err)
		}
		return err == nil
	}
	var total int64
	var walk func(p vfs.Path)
	walk = func(p vfs.Path) {
		ents, err := b.ReadDir(bg, p)
		if !check(err) {
			return
		}
		for _, e := range ents {
			c, err := p.Child(e.Name)
			must(t, err)
			if e.Type.IsDir() {
				walk(c)
				continue
			}
			if e.Type&fs.ModeType != 0 {
				continue
			}
			f, err := b.OpenFile(bg, c, os.O_RDONLY, 0)
			if !check(err) {
				continue
			}
			n, err := io.Copy(io.Discard, io.LimitReader(struct{ io.Reader }{f}, limit-total+1))
			f.Close()
			check(err)
			total += n
			if total > limit {
				t.Fatalf("read more than %d bytes", limit)
			}
		}
	}
	walk(vfs.Root)
	return total
}

// TestAgentFSHostile opens every case of the generated AgentFS corpus:
// views (recursive ones included), virtual tables, generated columns and
// triggers are refused with ErrSchema, sizes that disagree with the stored
// data with ErrCorrupt, and what opens reads no more bytes than the file
// holds. Before the checks (8a35f16) the views opened (the recursive ones
// never returned) and the petabyte file opened.
func TestAgentFSHostile(t *testing.T) {
	defer func(d time.Duration) { AgentFSOpenTimeout = d }(AgentFSOpenTimeout)
	AgentFSOpenTimeout = guardTimeout
	for _, c := range sqlitetest.AgentFS() {
		t.Run(c.Name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "agent.db")
			must(t, sqlitetest.Apply(p, sqlitetest.AgentFSBase+c.SQL))
			a, err := OpenAgentFS(p)
			wantOpen(t, err, c.Want)
			if err != nil {
				return
			}
			defer a.Close()
			st, err := os.Stat(p)
			must(t, err)
			if n := readAll(t, a, st.Size()); n != 10014 {
				t.Fatalf("read %d bytes, want 10014", n)
			}
		})
	}
}

// TestScratchHostile opens every case of the generated scratch-file corpus,
// read-write and read-only: a capfs file whose tables are views, or which
// holds a trigger, a view, an expression index or a generated column, is
// refused with ErrSchema before any of it is read or written (a trigger would
// run on capfs's own writes). Before the check (8a35f16) each opened (the
// recursive views never returned).
func TestScratchHostile(t *testing.T) {
	for _, c := range sqlitetest.Scratch() {
		for _, ro := range []bool{false, true} {
			name := c.Name
			if ro {
				name += " read-only"
			}
			t.Run(name, func(t *testing.T) {
				f, p := newFS(t)
				must(t, f.Close())
				must(t, sqlitetest.Apply(p, c.SQL))
				var opts []Option
				if ro {
					opts = append(opts, WithReadOnly())
				}
				done := make(chan struct{})
				var g *FS
				var err error
				go func() { g, err = Open(p, opts...); close(done) }()
				select {
				case <-done:
				case <-time.After(guardTimeout):
					t.Fatalf("Open did not return in %v", guardTimeout)
				}
				wantOpen(t, err, c.Want)
				if err == nil {
					g.Close()
				}
			})
		}
	}
}
