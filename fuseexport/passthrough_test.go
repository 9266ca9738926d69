//go:build linux

package fuseexport

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/overlay"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
)

// passthroughMount mounts an Overlay of a memory Dir holding lower.txt with
// Options.Passthrough, and skips when the kernel does not take backing files
// from this process.
func passthroughMount(t *testing.T) (string, *Server, *overlay.Overlay) {
	t.Helper()
	mem := memory.New()
	seed, _ := dir.New(mem)
	if err := seed.WriteFile(bg, "lower.txt", []byte("lower contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	ov, err := overlay.NewOverlay(seed.Backend(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ov.Close() })
	d, _ := dir.New(ov)
	mp, s := mountT(t, d, Options{Passthrough: true, Debug: os.Getenv("PTDEBUG") != ""})
	// An upper file's first open probes the kernel.
	if err := os.WriteFile(filepath.Join(mp, "probe"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !s.ptOn.Load() {
		t.Skip("FUSE passthrough is not available here (it needs Linux 6.9 or later and CAP_SYS_ADMIN; run as root): the mount serves every read and write itself")
	}
	return mp, s, ov
}

// TestPassthroughUpperFiles: with Passthrough, a file of the upper layer is
// read and written by the kernel (the server serves none of those requests),
// and what is written lands in the upper directory, nowhere else.
func TestPassthroughUpperFiles(t *testing.T) {
	mp, s, ov := passthroughMount(t)
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	before := s.served.Load()
	f, err := os.Create(filepath.Join(mp, "new.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(body); off += 4096 {
		if _, err := f.Write(body[off : off+4096]); err != nil {
			t.Fatal(err)
		}
	}
	// A second open of the same file while the writer is open joins it.
	r, err := os.Open(filepath.Join(mp, "new.bin"))
	if err != nil {
		t.Fatalf("a reader beside a passthrough writer: %v", err)
	}
	got := make([]byte, len(body))
	if n, err := r.ReadAt(got, 0); n != len(body) {
		t.Fatalf("reader beside the writer: %d bytes, %v", n, err)
	}
	if !bytes.Equal(got, body) {
		t.Fatal("the reader beside the writer read other bytes")
	}
	if _, err := f.WriteAt([]byte("XYZ"), 5); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadAt(got[:8], 0); err != nil || string(got[:8]) != "01234XYZ" {
		t.Fatalf("a write seen by the other open file: %q, %v", got[:8], err)
	}
	r.Close()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if n := s.served.Load() - before; n != 0 {
		t.Errorf("the server served %d reads and writes of an upper file in passthrough, want 0", n)
	}
	want := append([]byte("01234XYZ"), body[8:]...)
	if b, err := os.ReadFile(filepath.Join(ov.UpperDir(), "new.bin")); err != nil || !bytes.Equal(b, want) {
		t.Errorf("upper directory holds %d bytes (%v), want the %d written", len(b), err, len(want))
	}
	if fi, err := os.Stat(filepath.Join(mp, "new.bin")); err != nil || fi.Size() != int64(len(want)) {
		t.Errorf("size through the mount: %v, %v", fi, err)
	}
}

// TestPassthroughLowerStaysServed: a lower file is never handed to the
// kernel (it is read through the Dir), and copying it up while a reader
// holds it open mixes no I/O modes on one inode (which the kernel would
// answer with EIO): the writer is served, the old reader keeps the lower
// contents, and a new open reads the new ones.
func TestPassthroughLowerStaysServed(t *testing.T) {
	mp, s, _ := passthroughMount(t)
	p := filepath.Join(mp, "lower.txt")
	r, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	before := s.served.Load()
	buf := make([]byte, 64)
	if n, err := r.ReadAt(buf, 0); string(buf[:n]) != "lower contents" {
		t.Fatalf("lower read %q, %v", buf[:n], err)
	}
	if s.served.Load() == before {
		t.Error("a lower file's read was not served by the server (handed to the kernel?)")
	}
	w, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("copy-up beside an open reader: %v", err)
	}
	if _, err := w.WriteAt([]byte("UPPER"), 0); err != nil {
		t.Fatalf("write after copy-up: %v", err)
	}
	// A third open while both are open.
	r2, err := os.Open(p)
	if err != nil {
		t.Fatalf("a reader beside a reader and a writer: %v", err)
	}
	r2.Close()
	w.Close()
	r.Close()
	if b, err := os.ReadFile(p); err != nil || string(b) != "UPPER contents" {
		t.Fatalf("after copy-up: %q, %v", b, err)
	}
	// Once every handle is closed, the upper file goes to the kernel. The
	// kernel sends RELEASE without waiting for it, so the server may still
	// count the old reader for a moment: try a few times.
	var n int64
	for try := 0; try < 100; try++ {
		before = s.served.Load()
		if err := os.WriteFile(p, []byte("again"), 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != "again" {
			t.Fatalf("rewrite: %q, %v", b, err)
		}
		if n = s.served.Load() - before; n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n != 0 {
		t.Errorf("served %d reads and writes of a copied-up file with no other open, want 0", n)
	}
}

// TestReadDirPlus: with ReadDirPlus, listing a directory and then stating
// every entry sends the kernel's LOOKUP for none of them (without it, one
// each), and an entry the policy hides is not listed (with or without
// ReadDirPlus) and stays unreachable: its lookup is refused.
func TestReadDirPlus(t *testing.T) {
	for _, plus := range []bool{false, true} {
		mem := memory.New()
		seed, _ := dir.New(mem)
		for _, name := range []string{"a.go", "b.go", "c.go", ".env", "sub/d.go"} {
			_ = seed.MkdirAll(bg, filepath.Dir(name))
			if err := seed.WriteFile(bg, name, []byte(name), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		d, _ := dir.New(mem, dir.WithPolicy(policy.Defaults()))
		mp, s := mountT(t, d, Options{ReadDirPlus: plus})
		ents, err := os.ReadDir(mp)
		if err != nil {
			t.Fatal(err)
		}
		before := s.lookups.Load()
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
			if _, err := os.Lstat(filepath.Join(mp, e.Name())); err != nil {
				t.Errorf("plus=%v: Lstat %s: %v", plus, e.Name(), err)
			}
		}
		if got := strings.Join(names, " "); got != "a.go b.go c.go sub" {
			t.Errorf("plus=%v: listing %q", plus, got)
		}
		if _, err := os.Lstat(filepath.Join(mp, ".env")); !os.IsNotExist(err) {
			t.Errorf("plus=%v: hidden .env: %v", plus, err)
		}
		n := s.lookups.Load() - before
		if plus && n != 1 { // .env's own lookup
			t.Errorf("plus: %d LOOKUPs after the listing, want 1 (the hidden name's)", n)
		}
		if !plus && n < 5 {
			t.Errorf("without plus: %d LOOKUPs after the listing, want one per entry and the hidden name", n)
		}
	}
}

// TestPassthroughMixedOpens: opens served by the server and opens passed
// through never share a node, whatever order they come and go in: a
// reader of a source file, a writer copying it up beside it, new readers
// while the writer is open, then readers after everything closed. Every
// open succeeds (the kernel answers a mix with EIO) and reads what was
// written.
func TestPassthroughMixedOpens(t *testing.T) {
	mp, _, _ := passthroughMount(t)
	p := filepath.Join(mp, "lower.txt")
	open := func(flag int) *os.File {
		t.Helper()
		f, err := os.OpenFile(p, flag, 0)
		if err != nil {
			t.Fatalf("open(%#x): %v", flag, err)
		}
		return f
	}
	read := func(f *os.File, want string) {
		t.Helper()
		buf := make([]byte, 64)
		n, _ := f.ReadAt(buf, 0)
		if string(buf[:n]) != want {
			t.Errorf("read %q, want %q", buf[:n], want)
		}
	}
	r := open(os.O_RDONLY)
	w := open(os.O_RDWR)
	if _, err := w.WriteAt([]byte("LOWER"), 0); err != nil {
		t.Fatal(err)
	}
	r.Close()
	for range 3 {
		r2 := open(os.O_RDONLY)
		r3 := open(os.O_RDONLY)
		read(r3, "LOWER contents")
		r2.Close()
		r3.Close()
	}
	// The writer closes while a reader is open, then another reader comes.
	r4 := open(os.O_RDONLY)
	w.Close()
	time.Sleep(20 * time.Millisecond) // let RELEASE reach the server (not asserted on)
	r5 := open(os.O_RDONLY)
	read(r5, "LOWER contents")
	r4.Close()
	r5.Close()
	for range 3 {
		a := open(os.O_RDONLY)
		b := open(os.O_RDWR)
		c := open(os.O_RDONLY)
		read(c, "LOWER contents")
		a.Close()
		b.Close()
		c.Close()
	}
}
