//go:build linux

package fuseexport

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// TestPassthroughReadOnlyMount: a host file under a read-only Namespace
// mount (as capfs run's tool mount serves module caches and toolchains) is
// read by the kernel (the server serves none of its reads), and still
// cannot be written: an open for writing is refused, and the host file
// keeps its contents.
func TestPassthroughReadOnlyMount(t *testing.T) {
	host := t.TempDir()
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB
	if err := os.WriteFile(filepath.Join(host, "tool"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	pfs, err := physical.New(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pfs.Close() })
	ns := vfs.NewNamespace()
	if err := ns.Mount(vfs.MustParse("tools"), pfs, vfs.MountOptions{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	d, _ := dir.New(ns)
	mp, s := mountT(t, d, Options{Passthrough: true, Mounts: []vfs.Path{vfs.MustParse("tools")}})
	other, err := os.Open(filepath.Join(host, "tool"))
	if err != nil {
		t.Fatal(err)
	}
	ok := s.passthroughWorks(int(other.Fd()))
	other.Close()
	if !ok {
		t.Skip("FUSE passthrough is not available here (it needs Linux 6.9 or later and CAP_SYS_ADMIN; run as root)")
	}
	p := filepath.Join(mp, "tools", "tool")
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := s.served.Load()
	got := make([]byte, len(body))
	if n, err := f.ReadAt(got, 0); n != len(body) || !bytes.Equal(got, body) {
		t.Fatalf("read %d bytes (%v), want the host file's %d", n, err, len(body))
	}
	if n := s.served.Load() - before; n != 0 {
		t.Errorf("the server served %d reads of a read-only host file, want 0 (passed through)", n)
	}
	if w, err := os.OpenFile(p, os.O_RDWR, 0); err == nil {
		w.Close()
		t.Error("an open for writing under the read-only mount succeeded")
	} else if !errors.Is(err, syscall.EROFS) && !errors.Is(err, syscall.EACCES) && !errors.Is(err, syscall.EPERM) {
		t.Errorf("an open for writing: %v, want a refusal", err)
	}
	if b, err := os.ReadFile(filepath.Join(host, "tool")); err != nil || !bytes.Equal(b, body) {
		t.Errorf("the host file changed: %d bytes, %v", len(b), err)
	}
}
