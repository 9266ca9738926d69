//go:build linux

package fuseexport

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestLazyLeavingLinks: in the lazy layer (as capfs run mounts it, served
// and with passthrough) a guest makes links whose targets leave the tree,
// `ln -s /usr/bin/python3 py` among them; readlink and ls show them as made,
// also after their directory is renamed. The kernel follows them in the
// caller's namespace, never capfs: reads and stats through abs reach the
// caller's own file (its device, not the mount's), not the decoy the tree
// holds at the same path re-rooted, which a server following the link would
// reach. (Failed before: each symlink failed with EPERM.)
func TestLazyLeavingLinks(t *testing.T) {
	for _, pt := range []bool{false, true} {
		name := map[bool]string{false: "served", true: "passthrough"}[pt]
		t.Run(name, func(t *testing.T) { lazyLeavingLinks(t, Options{Passthrough: pt, ReadDirPlus: pt}) })
	}
}

func lazyLeavingLinks(t *testing.T, opts Options) {
	hostDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(hostDir, "f"), []byte("HOST"), 0o644); err != nil {
		t.Fatal(err)
	}
	decoy := strings.TrimPrefix(hostDir, "/") + "/f"
	at := lazyMountT(t, opts, map[string]string{decoy: "DECOY", "d/keep": "k"})
	links := map[string]string{
		"py":    "/usr/bin/python3",
		"abs":   hostDir,
		"up":    "../../shared/x",
		"d/py3": "/usr/bin/python3",
	}
	for name, target := range links {
		if err := os.Symlink(target, at(name)); err != nil {
			t.Fatalf("ln -s %s %s: %v", target, name, err)
		}
	}
	if err := os.Rename(at("d"), at("d2")); err != nil {
		t.Fatalf("mv d d2: %v", err)
	}
	delete(links, "d/py3")
	links["d2/py3"] = "/usr/bin/python3"
	for name, target := range links {
		if got, err := os.Readlink(at(name)); err != nil || got != target {
			t.Errorf("readlink %s = %q, %v; want %q", name, got, err, target)
		}
		if fi, err := os.Lstat(at(name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("lstat %s: %v, %v; want a symlink", name, fi, err)
		}
	}
	wantListed(t, at(""), "py", "abs", "up", "d2")
	wantListed(t, at("d2"), "py3", "keep")
	wantCallersFile(t, at, hostDir)
	if b, err := os.ReadFile(at(decoy)); err != nil || string(b) != "DECOY" {
		t.Errorf("the decoy through the mount = %q, %v; the tree holds it", b, err)
	}
}

// wantCallersFile fails t unless abs/f in the mount (abs -> hostDir) is the
// caller's own hostDir/f: its contents, device and inode, not the mount's.
func wantCallersFile(t *testing.T, at func(string) string, hostDir string) {
	t.Helper()
	if b, err := os.ReadFile(at("abs/f")); err != nil || string(b) != "HOST" {
		t.Fatalf("cat abs/f = %q, %v; want the caller's own file", b, err)
	}
	var mnt, through, host syscall.Stat_t
	for _, s := range []struct {
		p  string
		st *syscall.Stat_t
	}{{at(""), &mnt}, {at("abs/f"), &through}, {filepath.Join(hostDir, "f"), &host}} {
		if err := syscall.Stat(s.p, s.st); err != nil {
			t.Fatalf("stat %s: %v", s.p, err)
		}
	}
	if through.Dev != host.Dev || through.Ino != host.Ino || through.Dev == mnt.Dev {
		t.Errorf("stat abs/f = dev %d ino %d; want the caller's file (dev %d ino %d), not the mount's (dev %d)",
			through.Dev, through.Ino, host.Dev, host.Ino, mnt.Dev)
	}
}

// wantListed fails t unless directory d lists every name.
func wantListed(t *testing.T, d string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(d)
	if err != nil {
		t.Fatalf("ls %s: %v", d, err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	for _, n := range names {
		if !slices.Contains(got, n) {
			t.Errorf("ls %s = %v; lacks %s", d, got, n)
		}
	}
}

// TestLazyVenv: `python3 -m venv` in the lazy layer, which links
// venv/bin/python3 to the host's interpreter by absolute path, succeeds, and
// the venv's interpreter runs with the venv as its prefix. (Failed before:
// the venv's links failed with EPERM.)
func TestLazyVenv(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	at := lazyMountT(t, Options{Passthrough: true, ReadDirPlus: true}, map[string]string{"src/app.py": "print(1)\n"})
	if out, err := exec.Command(py, "-m", "venv", "--without-pip", at("venv")).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv: %v\n%s", err, out)
	}
	target, err := os.Readlink(at("venv/bin/python3"))
	if err != nil {
		t.Fatalf("readlink venv/bin/python3: %v", err)
	}
	t.Logf("venv/bin/python3 -> %s", target)
	out, err := exec.Command(at("venv/bin/python3"), "-c", "import sys; print(sys.prefix)").Output()
	if err != nil {
		t.Fatalf("venv/bin/python3: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != at("venv") {
		t.Errorf("sys.prefix = %q; want %q", got, at("venv"))
	}
}
