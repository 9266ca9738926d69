//go:build linux

package fuseexport

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/overlay"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
)

// TestReadDirPlusNoResurrect: a READDIRPLUS answered from an open
// directory's listing never brings back a name removed through the mount
// after the listing was made: the status the listing holds is not used once
// anything changed (on the code without the change count, the later batch
// gave the kernel the removed file again, and Lstat found it).
func TestReadDirPlusNoResurrect(t *testing.T) {
	root := t.TempDir()
	const n = 1500
	for i := range n {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%04d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pb, err := physical.New(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pb.Close() })
	d, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
	mp, _ := mountT(t, d, Options{ReadDirPlus: true})
	f, err := os.Open(mp)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	first, err := f.ReadDir(20)
	if err != nil || len(first) != 20 {
		t.Fatalf("first entries: %d, %v", len(first), err)
	}
	// Remove every name the kernel may not have read yet (it reads ahead of
	// what ReadDir returned): the next READDIRPLUS batch lists some of them.
	var gone []string
	for i := 30; i < n; i++ {
		p := filepath.Join(mp, fmt.Sprintf("f%04d", i))
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		gone = append(gone, p)
	}
	if _, err := f.ReadDir(-1); err != nil {
		t.Fatal(err)
	}
	for _, p := range gone {
		if _, err := os.Lstat(p); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("%s, removed after a listing made before its removal: %v, want ENOENT", filepath.Base(p), err)
		}
	}
	// A listing made now gives every entry its status as a lookup would.
	ents, err := os.ReadDir(mp)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 30 {
		t.Fatalf("listed %d entries, want 30", len(ents))
	}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || info.Size() != 1 || !info.Mode().IsRegular() {
			t.Fatalf("%s: %v, %v", e.Name(), info, err)
		}
	}
}

// TestReadDirPlusPassthroughWriter: a listing's status of a file open in
// passthrough (written by the kernel, unseen by the server) is never given
// to the kernel: a later READDIRPLUS batch of a listing made before a write
// leaves the file's new size alone, and no such file is answered from a
// listing at all (that last part fails without the rule; the size part does
// not on Linux 6.18, which keeps the size a passthrough write set).
func TestReadDirPlusPassthroughWriter(t *testing.T) {
	mem := memory.New()
	seed, _ := dir.New(mem)
	ov, err := overlay.NewOverlay(seed.Backend(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ov.Close() })
	d, _ := dir.New(ov)
	mp, s := mountT(t, d, Options{Passthrough: true, ReadDirPlus: true})
	const n = 600
	for i := range n {
		if err := os.WriteFile(filepath.Join(mp, fmt.Sprintf("f%04d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !s.ptOn.Load() {
		t.Skip("FUSE passthrough is not available here (it needs Linux 6.9 or later and CAP_SYS_ADMIN; run as root)")
	}
	var writers []*os.File
	for i := 100; i < n; i += 10 {
		w, err := os.OpenFile(filepath.Join(mp, fmt.Sprintf("f%04d", i)), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		writers = append(writers, w)
	}
	f, err := os.Open(mp)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadDir(20); err != nil {
		t.Fatal(err)
	}
	for _, w := range writers {
		if _, err := w.Write([]byte("-appended")); err != nil {
			t.Fatal(err)
		}
	}
	// A lookup that finds a name in the directory makes the kernel's next
	// listing request a READDIRPLUS: a name the kernel has not seen yet.
	if err := seed.WriteFile(bg, "host-made", []byte("h"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(mp, "host-made")); err != nil {
		t.Fatal(err)
	}
	before := s.listed.Load()
	if _, err := f.ReadDir(-1); err != nil {
		t.Fatal(err)
	}
	t.Logf("entries answered from the listing: %d", s.listed.Load()-before)
	for _, w := range writers {
		info, err := os.Lstat(w.Name())
		if err != nil || info.Size() != int64(len("x-appended")) {
			t.Fatalf("%s after its write: %v, %v; want %d bytes", filepath.Base(w.Name()), info.Size(), err, len("x-appended"))
		}
	}
	// The rule itself, whatever this kernel does with a stale size: a
	// directory holding only files open in passthrough, listed afresh (its
	// first READDIRPLUS), has none of them answered from the listing.
	if err := os.Mkdir(filepath.Join(mp, "w"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		w, err := os.OpenFile(filepath.Join(mp, "w", fmt.Sprintf("o%d", i)), os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
	}
	before = s.listed.Load()
	if ents, err := os.ReadDir(filepath.Join(mp, "w")); err != nil || len(ents) != 5 {
		t.Fatalf("w: %d entries, %v", len(ents), err)
	}
	if got := s.listed.Load() - before; got != 0 {
		t.Errorf("%d files open in passthrough were answered from the listing, want none", got)
	}
}
