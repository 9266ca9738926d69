//go:build linux

package fuseexport

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/overlay"
	"github.com/capfs/capfs/backends/sqlite"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// reportLstat is lstat(2) of name, failing t on error.
func reportLstat(t *testing.T, name string) *syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(name, &st); err != nil {
		t.Fatalf("lstat %s: %v", filepath.Base(name), err)
	}
	return &st
}

// TestSparseFileBlocks: a 64 MiB sparse file on a physical mount reports the
// blocks the host holds for it (about none), as du reads them, not 64 MiB.
func TestSparseFileBlocks(t *testing.T) {
	pb := physicalT(t)
	d, _ := dir.New(pb)
	mp, _ := mountT(t, d, Options{})
	name := filepath.Join(mp, "sparse")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("end"), 64<<20-3); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	st := reportLstat(t, name)
	if st.Size != 64<<20 {
		t.Fatalf("size %d, want 64 MiB", st.Size)
	}
	if st.Blocks > 1024 { // at most 512 KiB held for one written page
		t.Errorf("st_blocks %d (%d bytes) for a sparse 64 MiB file with one page written, want about none", st.Blocks, st.Blocks*512)
	}
	// A file with data holds its blocks.
	full := filepath.Join(mp, "full")
	if err := os.WriteFile(full, make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if st := reportLstat(t, full); st.Blocks < 128 {
		t.Errorf("st_blocks %d for 64 KiB written, want at least 128", st.Blocks)
	}
}

// reportBackends are the backends the report tests run over: each knows
// how to set a link's times and a file's status through its open file.
func reportBackends(t *testing.T) map[string]func(t *testing.T) *dir.Dir {
	return map[string]func(t *testing.T) *dir.Dir{
		"physical": func(t *testing.T) *dir.Dir { d, _ := dir.New(physicalT(t)); return d },
		"memory":   func(t *testing.T) *dir.Dir { d, _ := dir.New(memory.New()); return d },
		"sqlite": func(t *testing.T) *dir.Dir {
			s, err := sqlite.Open(filepath.Join(t.TempDir(), "scratch.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			d, _ := dir.New(s)
			return d
		},
		"lazy": func(t *testing.T) *dir.Dir {
			ov, err := overlay.NewOverlay(physicalT(t), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ov.Close() })
			d, _ := dir.New(ov)
			return d
		},
	}
}

// TestSymlinkTimes: utimensat with AT_SYMLINK_NOFOLLOW sets a symlink's own
// modification time, leaving its target's alone (rsync -a does it for every
// link). It failed with EOPNOTSUPP before.
func TestSymlinkTimes(t *testing.T) {
	for name, mk := range reportBackends(t) {
		t.Run(name, func(t *testing.T) {
			mp, _ := mountT(t, mk(t), Options{})
			target, link := filepath.Join(mp, "target"), filepath.Join(mp, "link")
			if err := os.WriteFile(target, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("target", link); err != nil {
				t.Fatal(err)
			}
			before := reportLstat(t, target).Mtim
			when := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
			ts := []unix.Timespec{unix.NsecToTimespec(when.UnixNano()), unix.NsecToTimespec(when.UnixNano())}
			if err := unix.UtimesNanoAt(unix.AT_FDCWD, link, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				t.Fatalf("utimensat(link, AT_SYMLINK_NOFOLLOW): %v", err)
			}
			if got := reportLstat(t, link).Mtim; got.Sec != when.Unix() {
				t.Errorf("the link's mtime is %d, want %d", got.Sec, when.Unix())
			}
			if got := reportLstat(t, target).Mtim; got != before {
				t.Errorf("the target's mtime changed to %v (was %v)", got, before)
			}
		})
	}
}

// TestAttrsOfUnlinkedOpenFile: fchmod and futimens on a descriptor whose name
// was unlinked, or renamed over, change the open file. They failed with
// ENOENT before.
func TestAttrsOfUnlinkedOpenFile(t *testing.T) {
	for name, mk := range reportBackends(t) {
		t.Run(name, func(t *testing.T) {
			mp, _ := mountT(t, mk(t), Options{})
			for _, how := range []string{"unlinked", "renamed over"} {
				fn := filepath.Join(mp, "f")
				f, err := os.OpenFile(fn, os.O_RDWR|os.O_CREATE, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				if how == "unlinked" {
					err = os.Remove(fn)
				} else {
					if err = os.WriteFile(filepath.Join(mp, "g"), []byte("new"), 0o644); err == nil {
						err = os.Rename(filepath.Join(mp, "g"), fn)
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Chmod(0o600); err != nil {
					t.Errorf("%s: fchmod: %v", how, err)
				}
				when := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
				tv := []unix.Timeval{unix.NsecToTimeval(when.UnixNano()), unix.NsecToTimeval(when.UnixNano())}
				if err := unix.Futimes(int(f.Fd()), tv); err != nil {
					t.Errorf("%s: futimens: %v", how, err)
				}
				var st unix.Stat_t
				if err := unix.Fstat(int(f.Fd()), &st); err != nil {
					t.Fatalf("%s: fstat: %v", how, err)
				}
				if st.Mode&0o777 != 0o600 || st.Mtim.Sec != when.Unix() {
					t.Errorf("%s: fstat gives mode %o, mtime %d; want 600 and %d", how, st.Mode&0o777, st.Mtim.Sec, when.Unix())
				}
				f.Close()
				os.Remove(fn)
			}
		})
	}
}

// TestStatfsFigures: statfs reports the storage behind the mount: the host
// file system under a physical backend, the quota of a memory or sqlite
// backend (shrinking as files are written). It reported a fixed 1 TiB
// before.
func TestStatfsFigures(t *testing.T) {
	t.Run("physical", func(t *testing.T) {
		pb := physicalT(t)
		host, _ := pb.HostPath()
		d, _ := dir.New(pb)
		mp, _ := mountT(t, d, Options{})
		var want, got unix.Statfs_t
		if err := unix.Statfs(host, &want); err != nil {
			t.Fatal(err)
		}
		if err := unix.Statfs(mp, &got); err != nil {
			t.Fatal(err)
		}
		if g, w := got.Blocks*uint64(got.Bsize), want.Blocks*uint64(want.Bsize); g > w || g < w-4096 {
			t.Errorf("statfs size through the mount %d, want the host's %d", g, w)
		}
		if got.Files != want.Files {
			t.Errorf("statfs inodes %d, want the host's %d", got.Files, want.Files)
		}
	})
	const quota = 64 << 20
	for name, b := range map[string]func(t *testing.T) vfs.Backend{
		"memory": func(t *testing.T) vfs.Backend { return memory.New(memory.WithQuota(quota)) },
		"sqlite": func(t *testing.T) vfs.Backend {
			s, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"), sqlite.WithQuota(quota))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			d, _ := dir.New(b(t))
			mp, _ := mountT(t, d, Options{})
			var st unix.Statfs_t
			if err := unix.Statfs(mp, &st); err != nil {
				t.Fatal(err)
			}
			if got := st.Blocks * uint64(st.Bsize); got != quota {
				t.Errorf("statfs size %d, want the quota %d", got, quota)
			}
			free := st.Bavail
			if err := os.WriteFile(filepath.Join(mp, "f"), make([]byte, 8<<20), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := unix.Statfs(mp, &st); err != nil {
				t.Fatal(err)
			}
			if used := (free - st.Bavail) * uint64(st.Bsize); used < 8<<20 {
				t.Errorf("statfs free space fell by %d after an 8 MiB write", used)
			}
		})
	}
}

// TestRsyncArchiveWithSymlink: rsync -a copies a tree holding a symlink into
// a mount and exits 0, the link's mtime kept. It exited 23 before (it sets
// every link's times with AT_SYMLINK_NOFOLLOW, which was EOPNOTSUPP).
func TestRsyncArchiveWithSymlink(t *testing.T) {
	rsync, err := exec.LookPath("rsync")
	if err != nil {
		t.Skip("rsync is not installed")
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(src, "l")); err != nil {
		t.Fatal(err)
	}
	when := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	ts := []unix.Timespec{unix.NsecToTimespec(when.UnixNano()), unix.NsecToTimespec(when.UnixNano())}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(src, "l"), ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
	for name, mk := range reportBackends(t) {
		t.Run(name, func(t *testing.T) {
			mp, _ := mountT(t, mk(t), Options{})
			out, err := exec.Command(rsync, "-a", src+"/", filepath.Join(mp, "dst")+"/").CombinedOutput()
			if err != nil {
				t.Fatalf("rsync -a: %v\n%s", err, out)
			}
			if got := reportLstat(t, filepath.Join(mp, "dst", "l")).Mtim.Sec; got != when.Unix() {
				t.Errorf("the copied link's mtime is %d, want %d", got, when.Unix())
			}
		})
	}
}
