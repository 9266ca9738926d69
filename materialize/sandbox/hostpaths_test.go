package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBwrapNoHostPathInside: no host path of the directories a run binds shows
// in what the sandboxed command can read about itself and its pid 1, bubblewrap
// (issue 26): /proc/1/cmdline (bubblewrap's own arguments), /proc/1/environ,
// /proc/self/environ, /proc/self/cgroup and /proc/self/mountinfo.
func TestBwrapNoHostPathInside(t *testing.T) {
	needBwrap(t)
	const marker = "capfs-hostpath-7q3x"
	base := filepath.Join(t.TempDir(), marker)
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Fatal(err)
	}
	// A bind's source shows in mountinfo as the path within its file system;
	// capfs run binds directories that are file systems of their own (a
	// tmpfs per checkout, the lazy FUSE mount). Here, as root, a tmpfs plays
	// that part; otherwise mountinfo is not checked.
	checkMountinfo := os.Geteuid() == 0 && unix.Mount("tmpfs", base, "tmpfs", 0, "size=1m") == nil
	if checkMountinfo {
		t.Cleanup(func() { _ = unix.Unmount(base, unix.MNT_DETACH) })
	} else {
		t.Log("not root (or no tmpfs): /proc/self/mountinfo is not checked")
	}
	src, byFD, ro := filepath.Join(base, "src"), filepath.Join(base, "byfd"), filepath.Join(base, "ro")
	for _, d := range []string{filepath.Join(src, "keep"), byFD, ro} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "in.txt"), []byte("bound\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The build cache's host directory shows in mountinfo (a known limit,
	// documented with capfs run's cache): it is one without the marker.
	cache := t.TempDir()
	r := bwrapRunner(BubblewrapOptions{Caches: []CacheDir{{Source: cache, Target: "/var/cache/capfs", Env: []string{"XDG_CACHE_HOME=/var/cache/capfs"}}}})
	files := []string{"/proc/1/cmdline", "/proc/1/environ", "/proc/self/environ", "/proc/self/cgroup", "/proc/self/mountinfo"}
	script := `cat /w/in.txt
for f in ` + strings.Join(files, " ") + `; do echo "== $f"; tr '\0' '\n' < "$f"; echo; done`
	l := sh(script,
		Mount{Source: src, Target: "/w", Writable: true, ReadOnly: []string{"keep"}},
		Mount{File: openPath(t, byFD), Target: "/fd"},
		Mount{Source: ro, Target: "/ro"})
	l.Env = []string{"CAPFS_TEST=1"}
	_, out, errOut := runOut(t, r, l)
	if _, cmdline, _ := strings.Cut(out, "== /proc/1/cmdline\n"); !strings.HasPrefix(out, "bound\n") || !strings.Contains(firstLine(cmdline), "bwrap") {
		t.Fatalf("the run did not bind the directory or read its pid 1's arguments:\n%s\nstderr: %s", out, errOut)
	}
	for _, sec := range strings.Split(out, "== ")[1:] {
		name, body, _ := strings.Cut(sec, "\n")
		if name == "/proc/self/mountinfo" && !checkMountinfo {
			continue
		}
		if strings.Contains(body, marker) {
			t.Errorf("%s inside the sandbox names a host directory (%s):\n%s", name, marker, body)
		}
	}
	if strings.Contains(errOut, marker) {
		t.Errorf("stderr names a host directory: %s", errOut)
	}
}
