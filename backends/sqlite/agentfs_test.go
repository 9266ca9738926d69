package sqlite

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// agentDB copies the AgentFS database agentfs-sdk 0.6.4 wrote
// (testdata/mkagent.mjs) into a temporary directory.
func agentDB(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.db")
	cp(t, "testdata/agentfs-0.4.db", p)
	return p
}

func TestAgentFSReadOnlyMount(t *testing.T) {
	a, err := OpenAgentFS(agentDB(t))
	must(t, err)
	defer a.Close()
	got := snapshotTree(t, a)
	want := []string{
		"d drwxr-xr-x 2 nlink=3",
		"d/e drwxr-xr-x 1 nlink=2",
		"d/e/big.bin -rw-r--r-- 10000 nlink=1 000102030405060708090a0b0c0d0e0f",
		"d/hello.txt -rw-r--r-- 14 nlink=1 68656c6c6f206167656e7466730a",
		"empty -rw-r--r-- 0 nlink=1 ",
		"link Lrwxrwxrwx 11 nlink=1 -> d/hello.txt",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("AgentFS tree:\n%q\nwant\n%q", got, want)
	}
	big, err := vfstest.ReadFile(bg, a, P("d/e/big.bin"))
	must(t, err)
	for i, b := range big {
		if b != byte(i%251) {
			t.Fatalf("big.bin byte %d = %d", i, b)
		}
	}
	if txt, err := vfstest.ReadFile(bg, a, P("link")); err != nil || string(txt) != "hello agentfs\n" {
		t.Fatalf("through the link: %q, %v", txt, err)
	}
	if err := vfstest.WriteFile(bg, a, P("x"), nil); vfs.CodeOf(err) != vfs.CodeReadOnly {
		t.Fatalf("write to an AgentFS mount: %v, want read_only", err)
	}
}

func TestAgentFSConformanceReadOnly(t *testing.T) {
	vfstest.TestBackend(t, vfstest.Config{New: func(t *testing.T) vfs.Backend {
		a, err := OpenAgentFS(agentDB(t))
		must(t, err)
		t.Cleanup(func() { a.Close() })
		return a
	}})
}

func TestImportAgentFS(t *testing.T) {
	a, err := OpenAgentFS(agentDB(t))
	must(t, err)
	defer a.Close()
	f, name := newFS(t)
	must(t, f.Mkdir(bg, P("imported"), 0o755))
	must(t, Import(bg, f, P("imported"), a, 0))
	f = reopen(t, f, name)
	sub, err := f.Sub(bg, P("imported"))
	must(t, err)
	if got, want := snapshotTree(t, sub), snapshotTree(t, a); !slices.Equal(got, want) {
		t.Fatalf("imported:\n%q\nwant\n%q", got, want)
	}
	ai, _ := a.Stat(bg, P("d/hello.txt"))
	fi, _ := sub.Stat(bg, P("d/hello.txt"))
	if !ai.ModTime.Equal(fi.ModTime) {
		t.Fatalf("mtime %v, want %v", fi.ModTime, ai.ModTime)
	}
}

// TestImportHardLinks: Import keeps hard links as one inode.
func TestImportHardLinks(t *testing.T) {
	src, _ := newFS(t)
	must(t, vfstest.WriteFile(bg, src, P("a"), bytes.Repeat([]byte("x"), 300_000)))
	must(t, src.Link(bg, P("a"), P("b")))
	dst, _ := newFS(t)
	must(t, Import(bg, dst, vfs.Root, src, 0))
	ia, _ := dst.Stat(bg, P("a"))
	ib, _ := dst.Stat(bg, P("b"))
	if ia.ID != ib.ID || ia.Nlink != 2 || ia.Size != 300_000 {
		t.Fatalf("a %+v, b %+v", ia, ib)
	}
}

func TestAgentFSErrors(t *testing.T) {
	f, name := newFS(t)
	f.Close()
	if _, err := OpenAgentFS(name); !errors.Is(err, ErrForeign) {
		t.Fatalf("a capfs file as AgentFS: %v, want ErrForeign", err)
	}
	junk := filepath.Join(t.TempDir(), "junk")
	must(t, os.WriteFile(junk, []byte("this is not an sqlite database at all"), 0o600))
	if _, err := OpenAgentFS(junk); !errors.Is(err, ErrForeign) {
		t.Fatalf("junk as AgentFS: %v, want ErrForeign", err)
	}
	// And an AgentFS database is not a capfs scratch file.
	if _, err := Open(agentDB(t)); !errors.Is(err, ErrForeign) {
		t.Fatalf("AgentFS as capfs: %v, want ErrForeign", err)
	}
}

// TestImportBudget: Import writes no more than its byte budget (file sizes
// and symlink targets) and fails with quota_exceeded at the entry that would
// exceed it.
func TestImportBudget(t *testing.T) {
	a, err := OpenAgentFS(agentDB(t))
	must(t, err)
	defer a.Close()
	const need = 14 + 10000 + 11 // hello.txt, big.bin, the link's target
	f, _ := newFS(t)
	if err := Import(bg, f, vfs.Root, a, need-1); vfs.CodeOf(err) != vfs.CodeQuota {
		t.Fatalf("import over its budget: %v, want quota_exceeded", err)
	}
	g, _ := newFS(t)
	must(t, Import(bg, g, vfs.Root, a, need))
}
