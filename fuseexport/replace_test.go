//go:build linux

package fuseexport

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
)

// replaceMounts are the mounts the replacement tests run on: a physical
// backend (openat2, and the portable resolver), a memory one and the lazy
// layer.
func replaceMounts(t *testing.T) map[string]string {
	t.Helper()
	_, pmp := physicalMount(t)
	pb, err := physical.New(t.TempDir(), physical.WithResolver(physical.ResolverPortable))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pb.Close() })
	pd, _ := dir.New(pb)
	ppmp, _ := mountT(t, pd, Options{})
	md, _ := dir.New(memory.New())
	mmp, _ := mountT(t, md, Options{})
	lazy := filepath.Dir(lazyMountT(t, Options{Passthrough: true}, nil)("x"))
	return map[string]string{"physical": pmp, "physical-portable": ppmp, "memory": mmp, "lazy": lazy}
}

// TestReplaceByRenameNeverMissing: while one process replaces a file by
// writing a temporary and renaming it over the name (the atomic-write idiom
// of editors and package managers), opens of the name from another always
// find a file, whole. Before, an open that the kernel had resolved to the
// replaced file's node reached the server after the rename, found that node
// nameless and answered ENOENT (68 of 400 cats); now it opens the file that
// holds the name, as a lookup after the rename would (openReplaced).
func TestReplaceByRenameNeverMissing(t *testing.T) {
	for name, mp := range replaceMounts(t) {
		t.Run(name, func(t *testing.T) {
			target := filepath.Join(mp, "target")
			if err := os.WriteFile(target, []byte("v0000"), 0o644); err != nil {
				t.Fatal(err)
			}
			const rounds = 300
			var wg sync.WaitGroup
			stop := make(chan struct{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 1; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					tmp := filepath.Join(mp, fmt.Sprintf(".tmp%d", i%4))
					if err := os.WriteFile(tmp, fmt.Appendf(nil, "v%04d", i), 0o644); err != nil {
						t.Error(err)
						return
					}
					if err := os.Rename(tmp, target); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			missing, torn := 0, 0
			for range rounds {
				b, err := os.ReadFile(target)
				switch {
				case err != nil:
					missing++
					if missing == 1 {
						t.Logf("first failure: %v", err)
					}
				case len(b) != 5 || !bytes.HasPrefix(b, []byte("v")):
					torn++
				}
			}
			close(stop)
			wg.Wait()
			if missing != 0 || torn != 0 {
				t.Errorf("%d of %d reads found no file, %d a torn one; want 0 (a local file system never misses a renamed-over name)", missing, rounds, torn)
			}
		})
	}
}

// TestRemovedDirectoryHeldOpen: a directory removed while a process holds it
// open (its working directory, a descriptor) answers as on the host's disk:
// fstat succeeds with no links, listing it is ENOENT (Linux's rule for a
// dead directory), fsync succeeds, and a creation in it is ENOENT.
func TestRemovedDirectoryHeldOpen(t *testing.T) {
	want := removedDirectoryHeldOpen(t, t.TempDir())
	for name, mp := range replaceMounts(t) {
		t.Run(name, func(t *testing.T) {
			if got := removedDirectoryHeldOpen(t, mp); got != want {
				t.Errorf("through the mount:\n%s\non the host:\n%s", got, want)
			}
		})
	}
}

// removedDirectoryHeldOpen removes a directory held open in root and
// describes what fstat, a listing, fsync and a creation in it answer.
func removedDirectoryHeldOpen(t *testing.T, root string) string {
	d := filepath.Join(root, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Remove(d); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	err = unix.Fstat(int(f.Fd()), &st)
	out := fmt.Sprintf("fstat: %v, dir %v, nlink %d\n", err, st.Mode&unix.S_IFMT == unix.S_IFDIR, st.Nlink)
	_, err = f.Readdirnames(-1)
	out += fmt.Sprintf("list: %v\n", errors.Unwrap(err))
	out += fmt.Sprintf("fsync: %v\n", f.Sync())
	fd, err := unix.Openat(int(f.Fd()), "new", unix.O_CREAT|unix.O_WRONLY, 0o644)
	if err == nil {
		unix.Close(fd)
	}
	return out + fmt.Sprintf("create: %v\n", err)
}

// TestHardLinkWritesReachTheName: a write through one name of a file with
// two names reaches the file that name holds. On memory both names hold one
// file, so both read the new bytes; on physical, whose hard links may share
// an inode with a file outside the root (physical.HardLinksReplace), the name
// written gets a private copy and the other keeps the old bytes. Before, the
// kernel's one node for both names took its path from the name added last,
// so `printf 2 >a` wrote b (a=1, b=2).
func TestHardLinkWritesReachTheName(t *testing.T) {
	for name, mp := range replaceMounts(t) {
		t.Run(name, func(t *testing.T) {
			a, b := filepath.Join(mp, "a"), filepath.Join(mp, "b")
			if err := os.WriteFile(a, []byte("1"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(a, b); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(a, []byte("2"), 0o644); err != nil {
				t.Fatal(err)
			}
			wantB := "2"
			if name != "memory" { // physical's names part on writing, and the lazy layer's upper is physical
				wantB = "1"
			}
			ga, _ := os.ReadFile(a)
			gb, _ := os.ReadFile(b)
			if string(ga) != "2" || string(gb) != wantB {
				t.Errorf("after writing 2 through a: a=%q b=%q; want a=\"2\" b=%q", ga, gb, wantB)
			}
			if err := os.WriteFile(b, []byte("3"), 0o644); err != nil {
				t.Fatal(err)
			}
			if gb, _ := os.ReadFile(b); string(gb) != "3" {
				t.Errorf("after writing 3 through b: b=%q; want \"3\"", gb)
			}
		})
	}
}
