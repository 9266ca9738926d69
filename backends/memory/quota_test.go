package memory

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/capfs/capfs/vfs"
)

func TestQuotaWrite(t *testing.T) {
	m := New(WithQuota(10))
	writeFile(t, m, "a", "12345678")
	f, err := m.OpenFile(bg, P("b"), os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	defer f.Close()
	n, err := f.Write([]byte("abcde"))
	wantCode(t, err, vfs.CodeQuota)
	if n != 0 {
		t.Fatalf("partial write of %d bytes", n)
	}
	if !errors.Is(err, vfs.ErrQuota) {
		t.Fatal("errors.Is(err, vfs.ErrQuota)")
	}
	if i, _ := f.Stat(); i.Size != 0 {
		t.Fatalf("torn write: size %d", i.Size)
	}
	if off, _ := f.Seek(0, io.SeekCurrent); off != 0 {
		t.Fatalf("offset moved to %d", off)
	}
	if m.Usage() != 8 {
		t.Fatalf("usage %d", m.Usage())
	}
	// Exactly up to the quota is fine.
	if _, err := f.Write([]byte("ab")); err != nil {
		t.Fatal(err)
	}
	// Overwriting inside the file needs no quota.
	if _, err := f.WriteAt([]byte("XY"), 0); err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt([]byte("Z"), 2)
	wantCode(t, err, vfs.CodeQuota)
	// A write that overlaps the end and grows the file by one byte fails whole.
	_, err = f.WriteAt([]byte("pq"), 1)
	wantCode(t, err, vfs.CodeQuota)
	if got := readFile(t, m, "b"); got != "XY" {
		t.Fatalf("b = %q", got)
	}
	wantCode(t, f.Truncate(3), vfs.CodeQuota)
	if i, _ := f.Stat(); i.Size != 2 {
		t.Fatalf("size %d after refused truncate", i.Size)
	}
	// Freeing space lets writes through again.
	must(t, m.Remove(bg, P("a")))
	if m.Usage() != 2 {
		t.Fatalf("usage %d after remove", m.Usage())
	}
	must(t, f.Truncate(10))
	if m.Usage() != 10 {
		t.Fatalf("usage %d", m.Usage())
	}
}

func TestQuotaAppendUntorn(t *testing.T) {
	m := New(WithQuota(16))
	writeFile(t, m, "log", "0123456789")
	f, err := m.OpenFile(bg, P("log"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.Write([]byte("abcdefgh"))
	wantCode(t, err, vfs.CodeQuota)
	must(t, f.Close())
	if got := readFile(t, m, "log"); got != "0123456789" {
		t.Fatalf("log = %q", got)
	}
	// Truncating via O_TRUNC returns space.
	writeFile(t, m, "log", "")
	writeFile(t, m, "big", strings.Repeat("x", 16))
	if m.Usage() != 16 {
		t.Fatalf("usage %d", m.Usage())
	}
}

func TestQuotaAccounting(t *testing.T) {
	m := New(WithQuota(100))
	writeFile(t, m, "f", strings.Repeat("x", 40))
	// Hard links count once.
	must(t, m.Link(bg, P("f"), P("g")))
	if m.Usage() != 40 {
		t.Fatalf("usage %d with a hard link", m.Usage())
	}
	// An unlinked open file keeps its bytes until closed.
	h, err := m.OpenFile(bg, P("f"), os.O_RDWR, 0)
	must(t, err)
	must(t, m.Remove(bg, P("f")))
	must(t, m.Remove(bg, P("g")))
	if m.Usage() != 40 {
		t.Fatalf("usage %d while open", m.Usage())
	}
	// Writes to the unlinked file still count against the quota.
	_, err = h.WriteAt(make([]byte, 61), 40)
	wantCode(t, err, vfs.CodeQuota)
	if _, err := h.WriteAt(make([]byte, 60), 40); err != nil {
		t.Fatal(err)
	}
	if m.Usage() != 100 {
		t.Fatalf("usage %d", m.Usage())
	}
	must(t, h.Close())
	if m.Usage() != 0 {
		t.Fatalf("usage %d after close", m.Usage())
	}
	// Replacement by rename frees the replaced file (when not open).
	writeFile(t, m, "a", strings.Repeat("a", 30))
	writeFile(t, m, "b", strings.Repeat("b", 50))
	must(t, m.Rename(bg, P("a"), P("b"), 0))
	if m.Usage() != 30 {
		t.Fatalf("usage %d after replace", m.Usage())
	}
	// Sub shares the quota.
	mkdirs(t, m, "d")
	s, err := m.Sub(bg, P("d"))
	must(t, err)
	f, err := s.OpenFile(bg, P("x"), os.O_WRONLY|os.O_CREATE, 0o644)
	must(t, err)
	_, err = f.Write(make([]byte, 71))
	wantCode(t, err, vfs.CodeQuota)
	if _, err := f.Write(make([]byte, 70)); err != nil {
		t.Fatal(err)
	}
	must(t, f.Close())
	if m.Usage() != 100 || s.(*FS).Usage() != 100 {
		t.Fatalf("usage %d / %d", m.Usage(), s.(*FS).Usage())
	}
	// Directories and symlinks are not file data.
	must(t, m.Mkdir(bg, P("more"), 0o755))
	must(t, m.Symlink(bg, strings.Repeat("t", 200), P("link")))
	if m.Usage() != 100 {
		t.Fatalf("usage %d after mkdir/symlink", m.Usage())
	}
}

func TestMaxFileSize(t *testing.T) {
	m := New(WithMaxFileSize(100))
	f, err := m.OpenFile(bg, P("f"), os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	defer f.Close()
	if _, err := f.WriteAt([]byte("x"), 99); err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt([]byte("xy"), 99)
	wantCode(t, err, vfs.CodeTooLarge)
	wantCode(t, f.Truncate(101), vfs.CodeTooLarge)
	must(t, f.Truncate(100))
	if _, err := f.Seek(1000, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	_, err = f.Write([]byte("x"))
	wantCode(t, err, vfs.CodeTooLarge)
	if i, _ := f.Stat(); i.Size != 100 {
		t.Fatalf("size %d", i.Size)
	}
	if m.Usage() != 100 {
		t.Fatalf("usage %d", m.Usage())
	}
}

func TestHugeOffsets(t *testing.T) {
	// Without limits, absurd sizes still fail cleanly instead of panicking.
	m := New()
	f, err := m.OpenFile(bg, P("f"), os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	defer f.Close()
	_, err = f.WriteAt([]byte("x"), 1<<62)
	wantCode(t, err, vfs.CodeTooLarge)
	wantCode(t, f.Truncate(1<<62), vfs.CodeTooLarge)
	if _, err := f.Seek(1<<63-1, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	_, err = f.Write([]byte("xy"))
	wantCode(t, err, vfs.CodeTooLarge)
	_, err = f.Seek(1, io.SeekCurrent)
	wantCode(t, err, vfs.CodeInvalidPath)
	if m.Usage() != 0 {
		t.Fatalf("usage %d", m.Usage())
	}
}
