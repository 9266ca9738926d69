package sqlite

import (
	"bytes"
	"os"
	"testing"

	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

func TestWriteFile(t *testing.T) {
	f, name := newFS(t, WithChunkSize(64<<10), WithQuota(1<<20))
	big := bytes.Repeat([]byte("0123456789"), 20_000) // 200 KB: four chunks
	must(t, f.WriteFile(bg, P("a"), big, 0o600))
	h, err := f.OpenFile(bg, P("a"), os.O_RDONLY, 0)
	must(t, err)
	defer h.Close()
	must(t, f.Link(bg, P("a"), P("b")))
	must(t, f.Symlink(bg, "a", P("l")))
	must(t, f.WriteFile(bg, P("l"), []byte("short"), 0o644)) // through the link, in place
	for _, p := range []string{"a", "b"} {
		got, err := vfstest.ReadFile(bg, f, P(p))
		if err != nil || string(got) != "short" {
			t.Fatalf("%s: %q, %v", p, got, err)
		}
	}
	buf := make([]byte, 10)
	if n, _ := h.ReadAt(buf, 0); string(buf[:n]) != "short" {
		t.Fatalf("open handle reads %q", buf[:n])
	}
	info, _ := f.Stat(bg, P("a"))
	if info.Mode.Perm() != 0o600 || info.Nlink != 2 {
		t.Fatalf("a: %v nlink %d", info.Mode, info.Nlink)
	}
	if err := f.WriteFile(bg, P("c"), make([]byte, 2<<20), 0o644); vfs.CodeOf(err) != vfs.CodeQuota {
		t.Fatalf("over quota: %v", err)
	}
	if _, err := f.Lstat(bg, P("c")); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Fatalf("a refused WriteFile left c: %v", err)
	}
	must(t, f.Mkdir(bg, P("d"), 0o755))
	if err := f.WriteFile(bg, P("d"), nil, 0o644); vfs.CodeOf(err) != vfs.CodeIsDir {
		t.Fatalf("WriteFile on a directory: %v", err)
	}
	used := f.Usage()
	f = reopen(t, f, name, WithChunkSize(64<<10), WithQuota(1<<20))
	if got, _ := vfstest.ReadFile(bg, f, P("b")); string(got) != "short" || f.Usage() != used {
		t.Fatalf("after reopen: %q, usage %d (was %d)", got, f.Usage(), used)
	}
	if n := countRows(t, name, "chunk"); n != 1 {
		t.Fatalf("%d chunk rows, want 1", n)
	}
}
