//go:build linux

package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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
	// A cache, a Go toolchain and module cache, and bwrap itself, all in
	// directories of the user's (bwrap under the home directory): none of
	// their paths shows. Their binds' sources show in mountinfo as their
	// paths within the tmpfs (capfs run serves them through a FUSE mount of
	// their own: TestRunNoHostPathInside).
	cache, goroot, modcache, home := filepath.Join(base, "cache"), filepath.Join(base, "sdk", "go"), filepath.Join(base, "gopath", "pkg", "mod"), filepath.Join(base, "home")
	for _, d := range []string{cache, filepath.Join(goroot, "bin"), filepath.Join(modcache, "cache"), filepath.Join(home, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bwrap := filepath.Join(home, "bin", "bwrap")
	copyFile(t, bwrapBinary(t), bwrap, 0o755)
	t.Setenv("HOME", home)
	r := bwrapRunner(BubblewrapOptions{Path: bwrap, GoRoot: goroot, GoModCache: modcache,
		Caches: []CacheDir{{Source: cache, Target: "/var/cache/capfs", Env: []string{"XDG_CACHE_HOME=/var/cache/capfs"}}}})
	files := []string{"/proc/1/cmdline", "/proc/1/environ", "/proc/self/environ", "/proc/self/cgroup", "/proc/self/mountinfo", "/proc/1/maps"}
	script := `cat /w/in.txt
for f in ` + strings.Join(files, " ") + `; do echo "== $f"; tr '\0' '\n' < "$f"; echo; done
echo "== /proc/1/exe"; readlink /proc/1/exe`
	l := sh(script,
		Mount{Source: src, Target: "/w", Writable: true, ReadOnly: []string{"keep"}},
		Mount{File: openPath(t, byFD), Target: "/fd"},
		Mount{Source: ro, Target: "/ro"})
	l.Env = []string{"CAPFS_TEST=1"}
	_, out, errOut := runOut(t, r, l)
	// bwrap's name: "bwrap", or under the limits' launcher the descriptor
	// of its copy in memory.
	if _, cmdline, _ := strings.Cut(out, "== /proc/1/cmdline\n"); !strings.HasPrefix(out, "bound\n") || !strings.Contains(firstLine(cmdline), "bwrap") && !strings.HasPrefix(cmdline, "/proc/self/fd/") {
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

// bwrapBinary is the host's bwrap, resolved.
func bwrapBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("no bwrap")
	}
	if p, err = filepath.EvalSymlinks(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// TestWrapHomeBwrapFromMemory: a bwrap under the user's home is started from
// a sealed copy in memory: directly as /proc/self/fd/N with argv[0] "bwrap",
// under the limits' launcher as /proc/self/fd/N; for root, one elsewhere
// (not the user's) is started by its path.
func TestWrapHomeBwrapFromMemory(t *testing.T) {
	if !memfdExecutable() {
		t.Skip("memory files may not be executed here (vm.memfd_noexec=2)")
	}
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(home, "bin", "bwrap")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	imageAt := func(l *Launch, p string) {
		t.Helper()
		fd, err := strconv.Atoi(strings.TrimPrefix(p, "/proc/self/fd/"))
		if err != nil || !strings.HasPrefix(p, "/proc/self/fd/") || fd < 3 || fd-3 >= len(l.ExtraFiles) || l.ExtraFiles[fd-3].Name() != "bwrap" {
			t.Fatalf("bwrap started as %q, not from its image among the launch's files", p)
		}
	}
	out, err := Bubblewrap(BubblewrapOptions{Path: bin, MaxProcs: -1, MaxMemory: -1}).Wrap(context.Background(), &Launch{Path: "true"})
	if err != nil {
		t.Fatal(err)
	}
	imageAt(out, out.Path)
	if out.Argv0 != "bwrap" || strings.Contains(strings.Join(out.Args, " "), home) {
		t.Errorf("argv[0] %q, args %q", out.Argv0, out.Args)
	}
	runCleanup(out)
	out, err = Bubblewrap(BubblewrapOptions{Path: bin, MaxProcs: 100, MaxMemory: -1}).Wrap(context.Background(), &Launch{Path: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.Index(out.Args, "--"); out.Path != launcherShell || i < 0 || i+1 >= len(out.Args) {
		t.Fatalf("launch %s %q", out.Path, out.Args)
	} else {
		imageAt(out, out.Args[i+1])
	}
	runCleanup(out)
	if os.Getuid() != 0 {
		return // a binary the caller owns is the caller's own wherever it is
	}
	t.Setenv("HOME", t.TempDir())
	out, err = Bubblewrap(BubblewrapOptions{Path: bin, MaxProcs: -1, MaxMemory: -1}).Wrap(context.Background(), &Launch{Path: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Path != bin {
		t.Errorf("a bwrap outside the home directory started as %q", out.Path)
	}
	runCleanup(out)
}

func runCleanup(l *Launch) {
	for i := len(l.Cleanup) - 1; i >= 0; i-- {
		l.Cleanup[i]()
	}
}
