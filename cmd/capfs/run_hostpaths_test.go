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
// named the lazy mount point or the checkout), /proc/1/environ, /proc/self/environ,
// /proc/self/cgroup, /proc/self/mountinfo. The build cache's host directory
// shows in mountinfo (a documented limit): XDG_CACHE_HOME is one without the
// marker.
func TestRunNoHostPathInside(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	const marker = "alice-hostpath-26c"
	root := filepath.Join(t.TempDir(), marker)
	writeTree(t, root, map[string]string{"main.go": "package main\n"})
	files := []string{"/proc/1/cmdline", "/proc/1/environ", "/proc/self/environ", "/proc/self/cgroup", "/proc/self/mountinfo"}
	script := `cat main.go
for f in ` + strings.Join(files, " ") + `; do echo "== $f"; tr '\0' '\n' < "$f"; echo; done`
	// Checkouts go under CAPFS_TMPDIR, the lazy mount point under
	// XDG_STATE_HOME: directories of the user's, named with the marker too.
	tmp, state := filepath.Join(t.TempDir(), marker+"-tmp"), filepath.Join(t.TempDir(), marker+"-state")
	for _, d := range []string{tmp, state} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"XDG_CACHE_HOME=" + t.TempDir(), "CAPFS_TMPDIR=" + tmp, "XDG_STATE_HOME=" + state}
	for _, mode := range []string{"--lazy", "--no-lazy"} {
		t.Run(mode, func(t *testing.T) {
			r := runCapfsEnv(t, root, env, "-m", "project=physical:"+root, "run", mode, "--", "sh", "-c", script).want(t, 0)
			if _, cmdline, _ := strings.Cut(r.stdout, "== /proc/1/cmdline\n"); !strings.HasPrefix(r.stdout, "package main") || !strings.Contains(cmdline, "bwrap") {
				t.Fatalf("the command did not see the project or bwrap's arguments:\n%s", r.stdout)
			}
			for _, sec := range strings.Split(r.stdout, "== ")[1:] {
				name, body, _ := strings.Cut(sec, "\n")
				if name == "/proc/self/mountinfo" && mode == "--no-lazy" {
					// A checkout in a directory on disk shows in mountinfo as
					// its path there (one on a tmpfs is a tmpfs of its own:
					// TestRunMountinfo).
					continue
				}
				if strings.Contains(body, marker) {
					t.Errorf("%s inside names the project's host directory (%s):\n%s", name, marker, body)
				}
			}
		})
	}
}
