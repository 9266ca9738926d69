//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunNoHostPathInside: in capfs run, lazy and checked out, no host path
// of the user's shows in what the command can read about itself and the
// sandbox's pid 1 (issue 26): /proc/1/cmdline (bubblewrap's arguments, which
// named the lazy mount point or the checkout), /proc/1/environ,
// /proc/self/environ (GOMODCACHE and PATH named the module cache and
// toolchain), /proc/self/cgroup, /proc/self/mountinfo (the build cache, the
// module cache and the toolchain were binds of their host directories). The
// user's directories (home, cache root, module cache, Go root, CAPFS_TMPDIR,
// state) are all named with the marker, and so is a read-only grant's
// (checked out in CAPFS_TMPDIR, then served through the tools' mount). What
// still shows is named in the summary: the writable checkout in a directory
// on disk (CAPFS_TMPDIR here, --no-lazy), and the caches where FUSE is
// missing.
func TestRunNoHostPathInside(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	const marker = "alice-hostpath-26c"
	root, deps := filepath.Join(t.TempDir(), marker), filepath.Join(t.TempDir(), marker+"-deps")
	writeTree(t, root, map[string]string{"main.go": "package main\n"})
	writeTree(t, deps, map[string]string{"lib.go": "package lib\n"})
	user := filepath.Join(t.TempDir(), marker+"-home")
	home, cache, state, tmp := filepath.Join(user, "home"), filepath.Join(user, "cache"), filepath.Join(user, "state"), filepath.Join(user, "tmp")
	modcache, goroot := filepath.Join(user, "go", "pkg", "mod"), filepath.Join(user, "sdk", "go")
	for _, d := range []string{home, cache, state, tmp, filepath.Join(modcache, "cache"), filepath.Join(goroot, "bin")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// A Go root capfs takes as it is told ($GOROOT, no go env file): a bin/go
	// that is a regular file is all it looks for.
	if err := os.WriteFile(filepath.Join(goroot, "bin", "go"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := []string{"/proc/1/cmdline", "/proc/1/environ", "/proc/self/environ", "/proc/self/cgroup", "/proc/self/mountinfo"}
	script := `cat main.go
for f in ` + strings.Join(files, " ") + `; do echo "== $f"; tr '\0' '\n' < "$f"; echo; done
echo "== ls"; ls "$GOMODCACHE" /var/cache/capfs /capfs/deps; command -v go; true`
	// Checkouts go under CAPFS_TMPDIR, the lazy mount point under
	// XDG_STATE_HOME: directories of the user's, named with the marker too.
	env := []string{"HOME=" + home, "CAPFS_CACHE_DIR=" + cache, "XDG_CACHE_HOME=" + cache, "CAPFS_TMPDIR=" + tmp, "XDG_STATE_HOME=" + state,
		"GOMODCACHE=" + modcache, "GOROOT=" + goroot, "GOENV=off"}
	for _, mode := range []string{"--lazy", "--no-lazy"} {
		t.Run(mode, func(t *testing.T) {
			r := runCapfsEnv(t, root, env, "-m", "project=physical:"+root, "-m", "deps=physical:"+deps+",ro", "run", mode, "--", "sh", "-c", script).want(t, 0)
			if _, cmdline, _ := strings.Cut(r.stdout, "== /proc/1/cmdline\n"); !strings.HasPrefix(r.stdout, "package main") || !strings.Contains(cmdline, "bwrap") {
				t.Fatalf("the command did not see the project or bwrap's arguments:\n%s", r.stdout)
			}
			if _, ls, _ := strings.Cut(r.stdout, "== ls\n"); !strings.Contains(ls, "cache\n") || !strings.Contains(ls, "/bin/go\n") || !strings.Contains(ls, "go-build") || !strings.Contains(ls, "lib.go") {
				t.Errorf("the module cache, Go root or build cache is not in the sandbox:\n%s", ls)
			}
			noFUSE := strings.Contains(r.stderr, "capfs: run: /proc/self/mountinfo inside shows the build cache, Go's module cache and the Go toolchain as their host directories")
			for _, sec := range strings.Split(r.stdout, "== ")[1:] {
				name, body, _ := strings.Cut(sec, "\n")
				if name == "/proc/self/mountinfo" {
					body = shownMountinfo(t, body, r.stderr, noFUSE)
				}
				if strings.Contains(body, marker) {
					t.Errorf("%s inside names a host directory of the user's (%s):\n%s", name, marker, body)
				}
			}
		})
	}
}

// shownMountinfo is mountinfo without the lines the run's summary says show
// a host path: a checkout's in a directory on disk (CAPFS_TMPDIR; one on a
// tmpfs is a tmpfs of its own: TestRunMountinfo), named with the path it
// shows, and, without FUSE, the caches'. A checkout's line the summary does
// not name is an error.
func shownMountinfo(t *testing.T, mi, summary string, noFUSE bool) string {
	t.Helper()
	var keep []string
	for _, l := range strings.Split(mi, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) < 5:
		case noFUSE && (strings.HasPrefix(f[4], "/opt/capfs/") || f[4] == "/var/cache/capfs"):
			continue
		case (f[4] == "/capfs/project" || noFUSE && strings.HasPrefix(f[4], "/capfs/")) && f[3] != "/":
			if !strings.Contains(summary, "/proc/self/mountinfo inside shows "+f[4]+" as "+f[3]+" ") {
				t.Errorf("mountinfo shows %s as %s; the summary does not say so:\n%s", f[4], f[3], summary)
			}
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}
