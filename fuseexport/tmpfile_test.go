//go:build linux

package fuseexport

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"golang.org/x/sys/unix"
)

// TestTmpfile: open(O_TMPFILE) makes an unnamed file in the directory, as on
// disk: it is written and read through its descriptor, fstat shows no links,
// the directory lists nothing of it, linkat of its descriptor gives it a name
// with its contents, and one closed unlinked leaves nothing behind (on the
// host either). With O_EXCL it cannot be linked. Before, O_TMPFILE was
// EOPNOTSUPP.
func TestTmpfile(t *testing.T) {
	host, pmp := physicalMount(t)
	mounts := replaceMounts(t)
	mounts["physical"] = pmp
	for name, mp := range mounts {
		t.Run(name, func(t *testing.T) {
			fd, err := unix.Open(mp, unix.O_TMPFILE|unix.O_RDWR, 0o640)
			if err != nil {
				t.Fatalf("open O_TMPFILE: %v", err)
			}
			defer unix.Close(fd)
			if _, err := unix.Write(fd, []byte("unnamed")); err != nil {
				t.Fatal(err)
			}
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil || st.Nlink != 0 || st.Size != 7 {
				t.Errorf("fstat: nlink %d size %d, %v; want 0 links, 7 bytes", st.Nlink, st.Size, err)
			}
			if names := list(t, mp); len(names) != 0 {
				t.Errorf("the directory lists %q; want nothing", names)
			}
			proc := "/proc/self/fd/" + itoa(fd)
			if err := unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, filepath.Join(mp, "named"), unix.AT_SYMLINK_FOLLOW); err != nil {
				t.Fatalf("linkat: %v", err)
			}
			if b, err := os.ReadFile(filepath.Join(mp, "named")); err != nil || string(b) != "unnamed" {
				t.Errorf("named: %q, %v; want \"unnamed\"", b, err)
			}
			if names := list(t, mp); len(names) != 1 || names[0] != "named" {
				t.Errorf("the directory lists %q; want [named]", names)
			}

			fd2, err := unix.Open(mp, unix.O_TMPFILE|unix.O_WRONLY|unix.O_EXCL, 0o600)
			if err != nil {
				t.Fatalf("open O_TMPFILE|O_EXCL: %v", err)
			}
			err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+itoa(fd2), unix.AT_FDCWD, filepath.Join(mp, "excl"), unix.AT_SYMLINK_FOLLOW)
			wantErrno(t, "linkat of an O_EXCL unnamed file", err, syscall.ENOENT)
			unix.Close(fd2)

			err = os.WriteFile(filepath.Join(mp, tmpPrefix+"x"), nil, 0o644)
			wantErrno(t, "creating a name unnamed files hold", errors.Unwrap(err), syscall.EPERM)
		})
	}
	if names := list(t, host); len(names) != 1 || names[0] != "named" {
		t.Errorf("the host directory holds %q; want [named] (an unnamed file closed leaves nothing)", names)
	}
}

func list(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestTmpfileOpenAtUnmount: an unnamed file still open when the mount ends
// leaves no hidden name in the backend (a lazy run's sync-back would find
// one).
func TestTmpfileOpenAtUnmount(t *testing.T) {
	m := memory.New()
	d, _ := dir.New(m)
	mp, s := mountT(t, d, Options{})
	fd, err := unix.Open(mp, unix.O_TMPFILE|unix.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("open O_TMPFILE: %v", err)
	}
	defer unix.Close(fd)
	if err := s.Close(100 * time.Millisecond); err != nil {
		t.Logf("Close: %v", err)
	}
	des, err := d.ReadDir(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		t.Errorf("the backend holds %q after the mount ended; want nothing", de.Name())
	}
}
