package sqlite

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/sqlite/sqlitetest"
	"github.com/capfs/capfs/vfs"
)

// corpusFiles writes each case of a generated corpus and returns the files'
// bytes, to seed a fuzz target.
func corpusFiles(f *testing.F, base string, cases []sqlitetest.Case, mk func(path string) error) [][]byte {
	f.Helper()
	var out [][]byte
	for _, c := range cases {
		p := filepath.Join(f.TempDir(), "seed.db")
		if mk != nil {
			if err := mk(p); err != nil {
				f.Fatal(err)
			}
		}
		if err := sqlitetest.Apply(p, base+c.SQL); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzAgentFSOpen opens arbitrary bytes (seeded with the generated AgentFS
// corpus) as an AgentFS database: it opens or is refused within its deadline,
// and what opens serves no more file bytes than the database holds, and
// imports within a budget of its size.
func FuzzAgentFSOpen(f *testing.F) {
	for _, b := range corpusFiles(f, sqlitetest.AgentFSBase, sqlitetest.AgentFS(), nil) {
		f.Add(b)
	}
	defer func(d time.Duration) { AgentFSOpenTimeout = d }(AgentFSOpenTimeout)
	AgentFSOpenTimeout = 10 * time.Second
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "agent.db")
		must(t, os.WriteFile(p, data, 0o600))
		a, err := OpenAgentFS(p)
		if err != nil {
			return
		}
		defer a.Close()
		readAll(t, a, int64(len(data)), true) // a corrupt page is an error, not more bytes
		dst, _ := newFS(t)
		defer dst.Close()
		if err := Import(bg, dst, vfs.Root, a, int64(len(data))); vfs.CodeOf(err) == vfs.CodeQuota {
			t.Fatalf("a checked database imports more than its size: %v", err)
		}
	})
}

// FuzzScratchOpen opens arbitrary bytes (seeded with the generated scratch
// corpus) as a scratch file, read-only: it opens or is refused, and what
// opens lists and reads without error beyond the typed ones.
func FuzzScratchOpen(f *testing.F) {
	mk := func(p string) error {
		g, err := Open(p)
		if err != nil {
			return err
		}
		return g.Close()
	}
	for _, b := range corpusFiles(f, "", sqlitetest.Scratch(), mk) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "s.db")
		must(t, os.WriteFile(p, data, 0o600))
		done := make(chan struct{})
		go func() {
			defer close(done)
			g, err := Open(p, WithReadOnly())
			if err != nil {
				return
			}
			defer g.Close()
			g.ReadDir(bg, vfs.Root)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("Open did not return")
		}
	})
}
