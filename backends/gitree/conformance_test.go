package gitree

import (
	"context"
	"path/filepath"
	"testing"
	"testing/fstest"

	capdir "github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// TestConformance runs the shared suite; on a ReadOnly backend it runs the
// read-only checks only.
func TestConformance(t *testing.T) {
	f := newFixture(t)
	vfstest.TestBackend(t, vfstest.Config{New: func(t *testing.T) vfs.Backend {
		g, err := Open(f.dir, "HEAD")
		if err != nil {
			t.Fatal(err)
		}
		return g
	}})
}

// TestFSView runs testing/fstest over a Dir on a revision. fstest opens every
// entry, so the repository holds no escaping symlink (those are tested elsewhere).
func TestFSView(t *testing.T) {
	newFixture(t) // skips without git
	d := t.TempDir()
	runGit(t, d, "init", "-q")
	write(t, filepath.Join(d, "a.txt"), "a\n", 0o644)
	write(t, filepath.Join(d, "bin/run"), "#!/bin/sh\n", 0o755)
	write(t, filepath.Join(d, "x/y/z.txt"), "z\n", 0o644)
	symlink(t, "x/y/z.txt", filepath.Join(d, "lz"))
	symlink(t, "run", filepath.Join(d, "bin/lx"))
	symlink(t, "x/y", filepath.Join(d, "ly"))
	runGit(t, d, "add", "-A")
	runGit(t, d, "update-index", "--add", "--cacheinfo", "160000,1234567890abcdef1234567890abcdef12345678,sm")
	runGit(t, d, "commit", "-q", "-m", "m")
	r, err := Open(d, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	rd, _ := capdir.New(r)
	if err := fstest.TestFS(rd.FS(), "a.txt", "bin/run", "x/y/z.txt", "lz", "bin/lx", "ly", "sm"); err != nil {
		t.Fatal(err)
	}
	g := open(t, "v1")
	s, err := g.Sub(context.Background(), vfs.MustParse("b"))
	if err != nil {
		t.Fatal(err)
	}
	sd, _ := capdir.New(s)
	if err := fstest.TestFS(sd.FS(), "x"); err != nil {
		t.Fatal(err)
	}
}
