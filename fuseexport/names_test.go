//go:build linux

package fuseexport

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// Names that are not UTF-8: Latin-1 "café", and a lone 0xff.
const (
	latin1Name = "caf\xe9"
	hostName   = "h\xff"
)

// TestRawNamesPhysical: through a mount of a physical Dir under the default
// policy (as capfs mount makes it), a file named with bytes that are not UTF-8
// is created, listed, stat'ed, read, renamed and removed as on the host, and
// one the host made is seen. Before, the policy refused every such name
// (EACCES) and the listing left the host's out.
func TestRawNamesPhysical(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, hostName), []byte("from the host"), 0o644); err != nil {
		t.Skipf("the host file system does not hold a name that is not UTF-8: %v", err)
	}
	pb, err := physical.New(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pb.Close() })
	ring := audit.NewRing(1 << 10)
	d, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()), dir.WithHooks(dir.GitGuard(pb)), dir.WithAudit(ring))
	mp, _ := mountT(t, d, Options{})
	driveRawNames(t, mp, func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(host, name)) })

	// The secrets stay hidden under a raw directory name.
	if err := os.MkdirAll(filepath.Join(host, "d\xe9"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "d\xe9", ".env"), []byte("TOKEN=1"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = os.ReadFile(filepath.Join(mp, "d\xe9", ".env"))
	wantErrno(t, "read d\\xe9/.env", err, syscall.ENOENT)
	if ents, err := os.ReadDir(filepath.Join(mp, "d\xe9")); err != nil || len(ents) != 0 {
		t.Errorf("listing d\\xe9: %v, %v; want it empty (.env hidden)", ents, err)
	}
	// The audit records each name exactly: none was made U+FFFD.
	for _, e := range ring.Events() {
		if strings.Contains(e.Path, "\ufffd") || strings.Contains(e.GuestPath, "\ufffd") {
			t.Errorf("audit event %+v holds U+FFFD", e)
		}
	}
}

// TestRawNamesMemory: the same through a mount of a memory Dir, which holds
// names as bytes too.
func TestRawNamesMemory(t *testing.T) {
	mem := memory.New()
	if err := vfstest.WriteFile(t.Context(), mem, vfs.MustParse(hostName), []byte("from the host")); err != nil {
		t.Skipf("the memory backend does not hold a name that is not UTF-8: %v", err)
	}
	d, _ := dir.New(mem, dir.WithPolicy(policy.Defaults()))
	mp, _ := mountT(t, d, Options{})
	driveRawNames(t, mp, func(name string) ([]byte, error) {
		return vfstest.ReadFile(t.Context(), mem, vfs.MustParse(name))
	})
}

// driveRawNames drives the mount at mp: hostName is there already, holding "from
// the host"; backing reads a file as the backend holds it.
func driveRawNames(t *testing.T, mp string, backing func(string) ([]byte, error)) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(mp, latin1Name), []byte("latin-1"), 0o644); err != nil {
		t.Fatalf("create %q: %v", latin1Name, err)
	}
	if b, err := backing(latin1Name); err != nil || string(b) != "latin-1" {
		t.Errorf("the backend holds %q as %q, %v", latin1Name, b, err)
	}
	ents, err := os.ReadDir(mp)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	for _, want := range []string{latin1Name, hostName} {
		if !slices.Contains(names, want) {
			t.Errorf("listing %q; want %q in it", names, want)
		}
	}
	for name, body := range map[string]string{latin1Name: "latin-1", hostName: "from the host"} {
		fi, err := os.Lstat(filepath.Join(mp, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(len(body)) || fi.Name() != name {
			t.Errorf("lstat %q: %v, %v", name, fi, err)
		}
		if b, err := os.ReadFile(filepath.Join(mp, name)); err != nil || string(b) != body {
			t.Errorf("read %q: %q, %v", name, b, err)
		}
	}
	// Renamed: from a raw name to another, and into a raw directory.
	if err := os.Rename(filepath.Join(mp, hostName), filepath.Join(mp, "caf\xe8")); err != nil {
		t.Fatalf("rename %q: %v", hostName, err)
	}
	if _, err := backing(hostName); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after the rename the backend still has %q: %v", hostName, err)
	}
	if b, err := backing("caf\xe8"); err != nil || string(b) != "from the host" {
		t.Errorf("after the rename the backend holds caf\\xe8 as %q, %v", b, err)
	}
	if err := os.Mkdir(filepath.Join(mp, "r\xff"), 0o755); err != nil {
		t.Fatalf("mkdir r\\xff: %v", err)
	}
	if err := os.Rename(filepath.Join(mp, "caf\xe8"), filepath.Join(mp, "r\xff", "x\xc3")); err != nil {
		t.Fatalf("rename into r\\xff: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(mp, "r\xff", "x\xc3")); err != nil || string(b) != "from the host" {
		t.Errorf("read r\\xff/x\\xc3: %q, %v", b, err)
	}
	// Removed.
	for _, name := range []string{latin1Name, "r\xff/x\xc3", "r\xff"} {
		if err := os.Remove(filepath.Join(mp, name)); err != nil {
			t.Errorf("remove %q: %v", name, err)
		}
		if _, err := backing(name); !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.EISDIR) && err != nil {
			t.Errorf("after remove the backend has %q: %v", name, err)
		}
	}
	if ents, err := os.ReadDir(mp); err != nil || len(ents) != 0 {
		t.Errorf("after the removals the mount lists %v, %v", ents, err)
	}
}
