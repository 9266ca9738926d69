//go:build linux

package fuseexport

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/capfs/capfs/backends/overlay"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
)

// lazyMountT mounts a lazy run's layer: an Overlay of a work Dir (default
// policy) over a host directory holding files (contents by path), served
// through a Dir with the default policy, with opts. It returns the path of
// a name in the mount.
func lazyMountT(t *testing.T, opts Options, files map[string]string) func(string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pb, err := physical.New(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pb.Close() })
	work, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
	ov, err := overlay.NewOverlay(work.Backend(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ov.Close() })
	layer, _ := dir.New(ov, dir.WithPolicy(policy.Defaults()))
	mp, _ := mountT(t, layer, opts)
	return func(p string) string { return filepath.Join(mp, p) }
}

// lazyStatT is lstat(2) of name.
func lazyStatT(t *testing.T, name string) syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(name, &st); err != nil {
		t.Fatalf("lstat %s: %v", name, err)
	}
	return st
}

// TestLazyLinkInode: in the lazy layer, a hard link of a source file keeps
// its inode number, and both names show it with st_nlink 2 at once, within
// the kernel's attribute timeout; a write, a chmod or a truncation (each a
// copy-up) keeps a file's and its directory's numbers. (Failed before: the
// link's copy-up gave the file a new number, which the new name showed with
// nlink 2 while the old one showed the old number and nlink 1.)
func TestLazyLinkInode(t *testing.T) {
	m := lazyMountT(t, Options{}, map[string]string{"a": "a", "d/w": "w", "c": "c", "t": "t"})
	before := map[string]uint64{}
	for _, p := range []string{"a", "d", "d/w", "c", "t"} {
		before[p] = lazyStatT(t, m(p)).Ino
	}
	if err := os.Link(m("a"), m("b")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "b"} {
		if st := lazyStatT(t, m(p)); st.Ino != before["a"] || st.Nlink != 2 {
			t.Errorf("%s after ln a b: ino %d nlink %d; want %d, 2", p, st.Ino, st.Nlink, before["a"])
		}
	}
	if err := os.WriteFile(m("d/w"), []byte("written"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(m("c"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(m("t"), 0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"d", "d/w", "c", "t"} {
		if st := lazyStatT(t, m(p)); st.Ino != before[p] {
			t.Errorf("%s after its copy-up: ino %d; want %d", p, st.Ino, before[p])
		}
	}
	if err := os.Remove(m("a")); err != nil {
		t.Fatal(err)
	}
	if st := lazyStatT(t, m("b")); st.Ino != before["a"] || st.Nlink != 1 {
		t.Errorf("b after rm a: ino %d nlink %d; want %d, 1", st.Ino, st.Nlink, before["a"])
	}
}

// TestLazyReaderSeesWrite: in the lazy layer, a source file opened for
// reading before another process's first write to it (which copies it up)
// reads the new bytes: a tail -f reads what was appended, and a reader
// rereading from the start reads the rewritten contents; served, and with
// passthrough (as capfs run mounts it). (Failed before: the reader kept
// reading the source file.)
func TestLazyReaderSeesWrite(t *testing.T) {
	for name, opts := range map[string]Options{"served": {}, "passthrough": {Passthrough: true, ReadDirPlus: true}} {
		t.Run(name, func(t *testing.T) { lazyReaderSeesWrite(t, opts) })
	}
}

func lazyReaderSeesWrite(t *testing.T, opts Options) {
	m := lazyMountT(t, opts, map[string]string{"log": "line1\n", "doc": "old text"})
	tail, err := os.Open(m("log"))
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	if b, err := io.ReadAll(tail); err != nil || string(b) != "line1\n" {
		t.Fatalf("first read: %q, %v", b, err)
	}
	watcher, err := os.Open(m("doc"))
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	if b, err := io.ReadAll(watcher); err != nil || string(b) != "old text" {
		t.Fatalf("first read: %q, %v", b, err)
	}

	w, err := os.OpenFile(m("log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString("line2\n"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m("doc"), []byte("new text, longer"), 0o644); err != nil {
		t.Fatal(err)
	}

	if b, err := io.ReadAll(tail); err != nil || string(b) != "line2\n" {
		t.Errorf("tail after the append: %q, %v; want %q", b, err, "line2\n")
	}
	buf := make([]byte, 64)
	n, err := watcher.ReadAt(buf, 0)
	if got := string(buf[:n]); got != "new text, longer" {
		t.Errorf("reader after the rewrite: %q (%v); want %q", got, err, "new text, longer")
	}
	if fi, err := watcher.Stat(); err != nil || fi.Size() != int64(len("new text, longer")) {
		t.Errorf("reader's fstat after the rewrite: %v, %v", fi.Size(), err)
	}
}

// TestLazyHardLinkWritesReachTheName: in the lazy layer, a write through one
// name of a hard-linked source file reaches that name, at once after the
// link: the overlay's names part on writing, as the physical backend's
// (vfs.Features.LinkWritesPrivate), so each name has its own kernel node.
func TestLazyHardLinkWritesReachTheName(t *testing.T) {
	m := lazyMountT(t, Options{}, map[string]string{"a": "1"})
	if err := os.Link(m("a"), m("b")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m("a"), []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	ga, _ := os.ReadFile(m("a"))
	gb, _ := os.ReadFile(m("b"))
	if string(ga) != "2" || string(gb) != "1" {
		t.Errorf("after writing 2 through a: a=%q b=%q; want a=\"2\" b=\"1\"", ga, gb)
	}
}
