//go:build linux

package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openFds counts this process's open descriptors.
func openFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// walkFixture makes a tree of many small directories, four levels deep, holding
// files, symlinks (one to the outside directory out) and FIFOs, and returns a
// handle on it.
func walkFixture(t *testing.T, out string) int {
	t.Helper()
	root := t.TempDir()
	for i := range 6 {
		for j := range 4 {
			for k := range 3 {
				d := filepath.Join(root, fmt.Sprintf("d%d", i), fmt.Sprintf("e%d", j), fmt.Sprintf("f%d", k))
				if k == 1 {
					d = filepath.Join(root, fmt.Sprintf("d%d", i), fmt.Sprintf("skip%d", j), fmt.Sprintf("f%d", k))
				}
				if err := os.MkdirAll(filepath.Join(d, "g"), 0o755); err != nil {
					t.Fatal(err)
				}
				for _, p := range []string{filepath.Join(d, "a.go"), filepath.Join(d, "g", "b.go"), filepath.Join(filepath.Dir(d), "c-d")} {
					if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Symlink(out, filepath.Join(d, "out")); err != nil {
					t.Fatal(err)
				}
				if err := unix.Mkfifo(filepath.Join(d, "pipe"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// walkRecord is what a walk showed of one entry.
type walkRecord struct {
	rel, target string
	mode        uint32
	ino         uint64
}

// record walks with walk, calling fn too, and lists what it saw.
func record(t *testing.T, walk func(func(*Entry) error) error, fn func(*Entry) error) ([]walkRecord, error) {
	t.Helper()
	var got []walkRecord
	err := walk(func(e *Entry) error {
		// The handle is open during the call and holds the entry.
		var st unix.Stat_t
		if err := unix.Fstatat(e.Dirfd, e.Name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Ino != e.St.Ino {
			t.Errorf("%s: dirfd does not hold the entry: %v", e.Rel, err)
		}
		got = append(got, walkRecord{e.Rel, e.Target, e.St.Mode, e.St.Ino})
		return fn(e)
	})
	return got, err
}

func TestWalkHostParallelMatchesWalkHost(t *testing.T) {
	out := t.TempDir()
	root := walkFixture(t, out)
	errBoom := errors.New("boom")
	fns := map[string]func(*Entry) error{
		"all": func(*Entry) error { return nil },
		"skipdir": func(e *Entry) error {
			if strings.HasPrefix(baseName(e.Rel), "skip") && e.St.Mode&unix.S_IFMT == unix.S_IFDIR {
				return fs.SkipDir
			}
			return nil
		},
		"error": func(e *Entry) error {
			if e.Rel == "d3/e1/f2/a.go" {
				return errBoom
			}
			return nil
		},
	}
	for name, fn := range fns {
		for _, maxDepth := range []int{0, 2, 4} {
			for _, workers := range []int{2, 4} {
				t.Run(fmt.Sprintf("%s/depth%d/workers%d", name, maxDepth, workers), func(t *testing.T) {
					before := openFds(t)
					want, werr := record(t, func(f func(*Entry) error) error { return Walk(root, maxDepth, f) }, fn)
					got, gerr := record(t, func(f func(*Entry) error) error { return WalkParallel(root, maxDepth, workers, f) }, fn)
					wantBoom := name == "error" && maxDepth != 2 // depth 2 does not reach it
					if werr != gerr || wantBoom != (gerr == errBoom) {
						t.Fatalf("errors: Walk %v, parallel %v", werr, gerr)
					}
					if len(want) < 50 || !reflect.DeepEqual(got, want) {
						t.Fatalf("parallel walk saw %d entries, Walk %d (or a different sequence)", len(got), len(want))
					}
					for _, r := range got {
						if strings.Contains(r.rel, "/out/") || strings.HasPrefix(r.rel, "out/") {
							t.Fatalf("followed a link: %s", r.rel)
						}
					}
					if after := openFds(t); after != before {
						t.Fatalf("open descriptors: %d before, %d after", before, after)
					}
				})
			}
		}
	}
}

// baseName returns the last element of rel.
func baseName(rel string) string { return rel[strings.LastIndexByte(rel, '/')+1:] }

// TestWalkHostParallelBoundsHandles checks that the handles open during the
// walk stay within the window plus the depth, well below the directory count.
func TestWalkHostParallelBoundsHandles(t *testing.T) {
	root := walkFixture(t, t.TempDir())
	const workers = 2
	base := openFds(t)
	peak, dirs := 0, 0
	err := WalkParallel(root, 0, workers, func(e *Entry) error {
		if e.St.Mode&unix.S_IFMT == unix.S_IFDIR {
			dirs++
		}
		peak = max(peak, openFds(t)-base)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if limit := workers*walkWindow + 5 + 1; peak > limit || dirs < 3*limit {
		t.Fatalf("%d handles open at once for %d directories (bound %d)", peak, dirs, limit)
	}
	if n := openFds(t) - base; n != 0 {
		t.Fatalf("%d descriptors left open", n)
	}
}

func TestWalkBefore(t *testing.T) {
	// The walk's order: a directory, then its contents, then the next name.
	order := []string{"", "a", "a/b", "a/b/c", "a/bc", "a-b", "a-b/x", "ab", "b"}
	for i := range order {
		for j := range order {
			if got := walkBefore(order[i], order[j]); got != (i < j) {
				t.Errorf("walkBefore(%q, %q) = %v", order[i], order[j], got)
			}
		}
	}
}
