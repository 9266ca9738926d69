package cas

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	capdir "github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
)

type hostSourceForTest struct{}

// check lists host through the host walker after one of its directories was
// swapped for a link to outside: the listing fails instead of following it.
func (hostSourceForTest) check(t *testing.T, host, outside string) error {
	os.Mkdir(filepath.Join(host, "sub"), 0o755)
	fd, err := os.Open(host)
	if err != nil {
		return err
	}
	defer fd.Close()
	h := &hostSource{root: int(fd.Fd())}
	os.Remove(filepath.Join(host, "sub"))
	os.Symlink(outside, filepath.Join(host, "sub"))
	if _, _, err := h.list(bg, "sub"); err == nil {
		t.Error("listing a directory swapped for a link followed it")
	}
	if _, err := h.open(bg, "sub/secret"); err == nil {
		t.Error("opening through a swapped link followed it")
	}
	if _, err := h.open(bg, "l"); err == nil {
		t.Error("opening a symlink as a file followed it")
	}
	return nil
}

func mkfifo(t *testing.T, p string) {
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotHostUnchangedDirs: a re-snapshot of an unchanged host tree
// encodes no directory (each one's status, files and subdirectories match the
// stat cache), and after every kind of change the digest equals a snapshot into
// a fresh store without a cache; through the host walker and through a Dir over
// the physical backend (whose view lists each directory with its entries'
// status, identity and change time included).
func TestSnapshotHostUnchangedDirs(t *testing.T) {
	t.Run("host", func(t *testing.T) {
		testUnchangedDirs(t, func(s *Store, host string) (Digest, error) {
			return s.SnapshotHost(bg, host, SnapshotOptions{})
		})
	})
	t.Run("dir", func(t *testing.T) {
		testUnchangedDirs(t, func(s *Store, host string) (Digest, error) {
			pb, err := physical.New(host)
			if err != nil {
				return Digest{}, err
			}
			defer pb.Close()
			d, _ := capdir.New(pb, capdir.WithPolicy(policy.Defaults()))
			return s.Snapshot(bg, d.Backend(), SnapshotOptions{StatCache: "dir"})
		})
	})
}

func testUnchangedDirs(t *testing.T, snap func(s *Store, host string) (Digest, error)) {
	host := t.TempDir()
	writeTree(t, host, 60)
	s := newStore(t)
	d1, err := snap(s, host)
	if err != nil {
		t.Fatal(err)
	}
	before := s.dirEncodes.Load()
	if d2, err := snap(s, host); err != nil || d2 != d1 {
		t.Fatalf("re-snapshot = %s, %v; want %s", d2, err, d1)
	}
	if n := s.dirEncodes.Load() - before; n != 0 {
		t.Errorf("re-snapshot of an unchanged tree encoded %d directories, want 0", n)
	}
	fresh := func() Digest {
		t.Helper()
		d, err := newStore(t).SnapshotHost(bg, host, SnapshotOptions{StatCache: "none"})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	changes := []struct {
		name string
		do   func() error
	}{
		{"content, same size", func() error { return os.WriteFile(filepath.Join(host, "d1/s1/f1.txt"), []byte("file X\n"), 0o644) }},
		{"new file", func() error { return os.WriteFile(filepath.Join(host, "d2/s2/new.txt"), []byte("new"), 0o644) }},
		{"removed file", func() error { return os.Remove(filepath.Join(host, "d3/s0/f3.txt")) }},
		{"renamed directory", func() error { return os.Rename(filepath.Join(host, "d4/s1"), filepath.Join(host, "d4/moved")) }},
		{"chmod +x", func() error { return os.Chmod(filepath.Join(host, "d5/s2/f5.txt"), 0o755) }},
		{"symlink retargeted", func() error {
			os.Remove(filepath.Join(host, "link"))
			return os.Symlink("run.sh", filepath.Join(host, "link"))
		}},
		{"empty directory", func() error { return os.Mkdir(filepath.Join(host, "d6/empty"), 0o755) }},
	}
	prev := d1
	for _, c := range changes {
		if err := c.do(); err != nil {
			t.Fatal(c.name, err)
		}
		got, err := snap(s, host)
		if err != nil {
			t.Fatal(c.name, err)
		}
		if want := fresh(); got != want || got == prev {
			t.Fatalf("after %s: cached re-snapshot %s, fresh %s, previous %s", c.name, got, want, prev)
		}
		prev = got
	}
}
