//go:build linux

package cas

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestMaterializeHardlinks(t *testing.T) {
	s := newStore(t)
	d := snap(t, s, build(t, goldenSpec...))
	out := filepath.Join(t.TempDir(), "m1")
	st, err := s.Materialize(bg, d, out, MaterializeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 3 || st.Linked != 3 || st.Extracted != 3 || st.Symlinks != 1 || st.Dirs != 3 {
		t.Errorf("first materialization: %+v", st)
	}
	// The checkout snapshots back to the same digest.
	if got, err := s.Ingest(bg, out); err != nil || got != d {
		t.Fatalf("ingest of the checkout = %s, %v; want %s", got, err, d)
	}
	fi, _ := os.Stat(filepath.Join(out, "foo/baz"))
	if fi.Mode().Perm() != 0o555 {
		t.Errorf("executable materialized as %v", fi.Mode())
	}
	if target, _ := os.Readlink(filepath.Join(out, "link")); target != "foo/baz" {
		t.Errorf("link -> %q", target)
	}
	// A second materialization links the same inodes, extracting nothing.
	out2 := filepath.Join(t.TempDir(), "m2")
	st, err = s.Materialize(bg, d, out2, MaterializeOptions{})
	if err != nil || st.Extracted != 0 || st.Linked != 3 {
		t.Fatalf("second materialization: %+v, %v", st, err)
	}
	a, _ := os.Stat(filepath.Join(out, "bar"))
	b, _ := os.Stat(filepath.Join(out2, "bar"))
	if !os.SameFile(a, b) {
		t.Error("the two checkouts do not share bar's inode")
	}
	// An in-place write through a link (a sandbox running as root) moves the
	// cache entry's mtime: the next materialization replaces the entry.
	if err := os.WriteFile(filepath.Join(out2, "bar"), []byte("HACKED"), 0o644); err != nil {
		t.Skip("cannot write a read-only file (not root):", err)
	}
	out3 := filepath.Join(t.TempDir(), "m3")
	if st, err = s.Materialize(bg, d, out3, MaterializeOptions{}); err != nil || st.Extracted != 1 {
		t.Fatalf("materialization after tampering: %+v, %v", st, err)
	}
	if got, _ := os.ReadFile(filepath.Join(out3, "bar")); string(got) != "hello" {
		t.Fatalf("tampered content reached a new checkout: %q", got)
	}
}

// TestMaterializeCarriesLeavingLinks: a link whose target is absolute or climbs
// above dest is data, written as the tree holds it (issue 29); before, each of
// these trees was refused.
func TestMaterializeCarriesLeavingLinks(t *testing.T) {
	s := newStore(t)
	for _, spec := range [][]string{{"l->/etc/passwd"}, {"d/", "d/l->../../x"}, {"l->.."}} {
		d := snap(t, s, build(t, spec...))
		out := filepath.Join(t.TempDir(), "m")
		if _, err := s.Materialize(bg, d, out, MaterializeOptions{}); err != nil {
			t.Fatalf("%v: %v", spec, err)
		}
		name, target, _ := strings.Cut(spec[len(spec)-1], "->")
		if got, err := os.Readlink(filepath.Join(out, name)); err != nil || got != target {
			t.Errorf("%v: link = %q, %v", spec, got, err)
		}
	}
}

func TestMaterializeCopy(t *testing.T) {
	s := newStore(t)
	d := snap(t, s, build(t, goldenSpec...))
	out := filepath.Join(t.TempDir(), "m")
	st, err := s.Materialize(bg, d, out, MaterializeOptions{Copy: true})
	if err != nil || st.Copied != 3 || st.Linked != 0 {
		t.Fatalf("%+v, %v", st, err)
	}
	var sys syscall.Stat_t
	syscall.Stat(filepath.Join(out, "bar"), &sys)
	if sys.Nlink != 1 {
		t.Errorf("copied file has %d links", sys.Nlink)
	}
	if got, err := s.Ingest(bg, out); err != nil || got != d {
		t.Fatalf("ingest = %s, %v", got, err)
	}
}

// TestMaterializeBoundsSharedTrees: 40 levels of a directory holding its child
// twice describe 2^40 files in 40 small messages; Materialize refuses it.
func TestMaterializeBoundsSharedTrees(t *testing.T) {
	s := newStore(t)
	d, err := s.PutBytes(bg, mustEncode(t, &Directory{Files: []FileNode{{Name: "f", Digest: EmptyDigest}}}))
	if err != nil {
		t.Fatal(err)
	}
	for range 40 {
		if d, err = s.PutBytes(bg, mustEncode(t, &Directory{Dirs: []DirNode{{Name: "a", Digest: d}, {Name: "b", Digest: d}}})); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "m")
	if _, err := s.Materialize(bg, d, out, MaterializeOptions{MaxEntries: 10000}); err == nil {
		t.Fatal("a tree of 2^40 files materialized")
	}
	if _, err := os.Lstat(out); err == nil {
		t.Error("a refused tree left its destination behind")
	}
	// GC and VerifyTree visit each directory once.
	if err := s.VerifyTree(bg, d); err != nil {
		t.Fatal(err)
	}
}

func mustEncode(t *testing.T, d *Directory) []byte {
	b, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
