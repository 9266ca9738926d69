package overlay

import (
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// hostOverlay is an Overlay over a physical lower holding files (path to
// contents, parents made), with the lower's host directory.
func hostOverlay(t *testing.T, files map[string]string) (*Overlay, string) {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		host := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(host, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pb, err := physical.New(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pb.Close() })
	ov, err := NewOverlay(pb, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ov.Close() })
	return ov, root
}

func lstatT(t *testing.T, o *Overlay, p string) vfs.Info {
	t.Helper()
	info, err := o.Lstat(bg, vfs.MustParse(p))
	if err != nil {
		t.Fatalf("Lstat %s: %v", p, err)
	}
	return info
}

func writeT(t *testing.T, o *Overlay, p string, flag int, data string) {
	t.Helper()
	f, err := o.OpenFile(bg, vfs.MustParse(p), os.O_WRONLY|flag, 0o644)
	if err != nil {
		t.Fatalf("open %s for writing: %v", p, err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCopyUpKeepsID: an entry copied up (by a write, a truncation, a chmod,
// a rename, or as the parent of a change) keeps the ID its lower entry had.
// (Failed before: the upper copy showed an ID of its own.)
func TestCopyUpKeepsID(t *testing.T) {
	o, _ := hostOverlay(t, map[string]string{"t": "t", "m": "m", "d/g": "g", "r": "r", "e/x": "x"})
	ids := map[string]uint64{}
	for _, p := range []string{"t", "m", "d", "d/g", "r", "e", "e/x"} {
		ids[p] = lstatT(t, o, p).ID
	}
	writeT(t, o, "d/g", os.O_APPEND, "more")
	writeT(t, o, "t", os.O_TRUNC, "")
	if err := o.Chmod(bg, vfs.MustParse("m"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := o.Rename(bg, vfs.MustParse("r"), vfs.MustParse("r2"), 0); err != nil {
		t.Fatal(err)
	}
	if err := o.Rename(bg, vfs.MustParse("e"), vfs.MustParse("e2"), 0); err != nil { // copied up whole
		t.Fatal(err)
	}
	for p, was := range map[string]string{"d/g": "d/g", "d": "d", "t": "t", "m": "m", "r2": "r", "e2": "e", "e2/x": "e/x"} {
		if got := lstatT(t, o, p).ID; got != ids[was] {
			t.Errorf("%s: ID %x after copy-up, %x before", p, got, ids[was])
		}
	}
}

// TestLinkKeepsID: a hard link made of a lower file shows the lower file's ID
// and the same link count under both names at once, in Lstat, ReadDirInfo and
// an open file's Stat. (Failed before: the copy showed an ID of its own.)
func TestLinkKeepsID(t *testing.T) {
	o, _ := hostOverlay(t, map[string]string{"f": "f", "d/g": "g"})
	ids := map[string]uint64{"f": lstatT(t, o, "f").ID}
	if err := o.Link(bg, vfs.MustParse("f"), vfs.MustParse("d/f2")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"f", "d/f2"} {
		if info := lstatT(t, o, p); info.ID != ids["f"] || info.Nlink != 2 {
			t.Errorf("%s after link: ID %x nlink %d; want %x, 2", p, info.ID, info.Nlink, ids["f"])
		}
	}
	ents, err := o.ReadDirInfo(bg, vfs.MustParse("d"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name == "f2" && (e.ID != ids["f"] || e.Nlink != 2) {
			t.Errorf("ReadDirInfo d/f2: ID %x nlink %d; want %x, 2", e.ID, e.Nlink, ids["f"])
		}
	}
	f, err := o.OpenFile(bg, vfs.MustParse("d/f2"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || info.ID != ids["f"] {
		t.Errorf("open d/f2: Stat ID %x (%v); want %x", info.ID, err, ids["f"])
	}
	if info, ok := vfs.OpenStat(f); ok && info.ID != ids["f"] {
		t.Errorf("open d/f2: OpenStat ID %x; want %x", info.ID, ids["f"])
	}
}

// TestNewIDsApart: an entry the process makes never shows a lower entry's
// ID, even where the upper's file system reuses the inode number of a copy
// it removed (the ID the copy kept is forgotten with its last name).
func TestNewIDsApart(t *testing.T) {
	o, _ := hostOverlay(t, map[string]string{"a": "a", "b": "b"})
	lower := map[uint64]string{}
	for _, p := range []string{"a", "b"} {
		lower[lstatT(t, o, p).ID] = p
	}
	writeT(t, o, "a", os.O_APPEND, "x") // a copy that keeps a's ID
	if err := o.Link(bg, vfs.MustParse("a"), vfs.MustParse("a2")); err != nil {
		t.Fatal(err)
	}
	if err := o.Remove(bg, vfs.MustParse("a")); err != nil {
		t.Fatal(err)
	}
	if info := lstatT(t, o, "a2"); lower[info.ID] != "a" || info.Nlink != 1 {
		t.Errorf("a2, a's last name: ID %x nlink %d; want a's ID, 1", info.ID, info.Nlink)
	}
	if err := o.Remove(bg, vfs.MustParse("a2")); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		p := vfs.MustParse("n" + string(rune('a'+i)))
		writeT(t, o, p.Raw(), os.O_CREATE, "new")
		if info := lstatT(t, o, p.Raw()); lower[info.ID] != "" {
			t.Fatalf("new file %s shows the ID of lower %s", p, lower[info.ID])
		}
	}
}

// TestLowerHardLinkCopyUp: a lower file with other names gets an ID of its
// own when copied up: its other names still show the lower file, which now
// differs from it, and two different files must not share an ID.
func TestLowerHardLinkCopyUp(t *testing.T) {
	o, root := hostOverlay(t, map[string]string{"a": "a"})
	if err := os.Link(filepath.Join(root, "a"), filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	writeT(t, o, "a", os.O_TRUNC, "changed")
	if a, b := lstatT(t, o, "a"), lstatT(t, o, "b"); a.ID == b.ID {
		t.Errorf("a (copied up, changed) and b (lower) share ID %x", a.ID)
	}
}

// readAllAt reads f from offset 0 to its end.
func readAllAt(t *testing.T, f vfs.File) string {
	t.Helper()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReaderSeesCopyUp: a lower file opened for reading before the first
// change to it (which copies it up) reads the changed contents after it,
// at its offset, and its Stat shows the new size; through OpenFile and
// through a Dir (ResolveOpen). A reader of a file removed meanwhile keeps
// what it had. (Failed before: the reader kept reading the lower file.)
func TestReaderSeesCopyUp(t *testing.T) {
	o, _ := hostOverlay(t, map[string]string{"log": "line1\n", "w": "old", "gone": "kept"})
	d, _ := dir.New(o)
	tail, err := o.OpenFile(bg, vfs.MustParse("log"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	if b, err := io.ReadAll(tail); err != nil || string(b) != "line1\n" {
		t.Fatalf("first read: %q, %v", b, err)
	}
	viaDir, err := d.Open(bg, "w", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer viaDir.Close()
	gone, err := o.OpenFile(bg, vfs.MustParse("gone"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()

	writeT(t, o, "log", os.O_APPEND, "line2\n")
	writeT(t, o, "w", os.O_TRUNC, "new contents")
	if err := o.Remove(bg, vfs.MustParse("gone")); err != nil {
		t.Fatal(err)
	}

	if b, err := io.ReadAll(tail); err != nil || string(b) != "line2\n" {
		t.Errorf("tail after an append: %q, %v; want %q", b, err, "line2\n")
	}
	if info, err := tail.Stat(); err != nil || info.Size != 12 {
		t.Errorf("tail's Stat after an append: size %d, %v; want 12", info.Size, err)
	}
	buf := make([]byte, 64)
	n, _ := viaDir.ReadAt(buf, 0)
	if got := string(buf[:n]); got != "new contents" {
		t.Errorf("reader opened through a Dir: %q; want %q", got, "new contents")
	}
	if got := readAllAt(t, gone); got != "kept" {
		t.Errorf("reader of a removed file: %q; want %q", got, "kept")
	}
	// A later rename moves the copy; the reader follows the file, not the name.
	if err := o.Rename(bg, vfs.MustParse("log"), vfs.MustParse("log.1"), 0); err != nil {
		t.Fatal(err)
	}
	writeT(t, o, "log.1", os.O_APPEND, "line3\n")
	if got := readAllAt(t, tail); got != "line1\nline2\nline3\n" {
		t.Errorf("tail after a rename and an append: %q", got)
	}
}

// TestUpperFileAttrs: an upper file changes its mode through the open file
// once its name is gone (fchmod, vfs.AttrFile); a lower file open for
// reading does not claim to (the lower is never changed). (Failed before:
// the overlay's file withheld AttrFile, and fchmod through a mount of it was
// EOPNOTSUPP.)
func TestUpperFileAttrs(t *testing.T) {
	o, _ := hostOverlay(t, map[string]string{"low": "l"})
	f, err := o.OpenFile(bg, vfs.MustParse("new"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := o.Remove(bg, vfs.MustParse("new")); err != nil {
		t.Fatal(err)
	}
	if err := vfs.FileChmod(f, 0o600); err != nil {
		t.Fatalf("fchmod of an upper file with no name: %v", err)
	}
	if info, err := f.Stat(); err != nil || info.Mode.Perm() != 0o600 {
		t.Errorf("after fchmod: %v, %v; want 0600", info.Mode, err)
	}
	r, err := o.OpenFile(bg, vfs.MustParse("low"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, ok := r.(vfs.AttrFile); ok {
		t.Error("a lower file claims vfs.AttrFile")
	}
}

// TestReaderMissedCopyUp: a reader whose lookup found the lower file before
// a copy-up that told the readers before it registered (an open racing the
// copy-up) finds the copy itself, and a reader of another lower file does
// not take it.
func TestReaderMissedCopyUp(t *testing.T) {
	o, _ := hostOverlay(t, map[string]string{"f": "old", "g": "g"})
	p := vfs.MustParse("f")
	low, err := o.lower.Lstat(bg, p)
	if err != nil {
		t.Fatal(err)
	}
	gen := o.readers.copies.Load() // the open's lookup happens here
	writeT(t, o, "f", os.O_TRUNC, "new")
	f, err := o.openLower(bg, p.Resolved(), low, gen, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := readAllAt(t, f); got != "new" {
		t.Errorf("reader that missed the copy-up reads %q; want %q", got, "new")
	}
	other := low
	other.ID++ // another lower file once stood at f
	g, err := o.openLower(bg, p.Resolved(), other, gen, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if got := readAllAt(t, g); got != "old" {
		t.Errorf("reader of another lower file reads %q; want the lower's %q", got, "old")
	}
}

// TestReadersRaceCopyUp: readers opened while a copy-up runs all read the
// copy once it is made and written, whenever each opened: told by the
// copy-up, finding it themselves, or opening it.
func TestReadersRaceCopyUp(t *testing.T) {
	o, _ := hostOverlay(t, map[string]string{"f": "old"})
	const n = 16
	files := make(chan vfs.File, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := o.OpenFile(bg, vfs.MustParse("f"), os.O_RDONLY, 0)
			if err != nil {
				t.Error(err)
				return
			}
			files <- f
		}()
	}
	writeT(t, o, "f", os.O_TRUNC, "new")
	wg.Wait()
	close(files)
	for f := range files {
		if got := readAllAt(t, f); got != "new" {
			t.Errorf("a reader opened during the copy-up reads %q; want %q", got, "new")
		}
		f.Close()
	}
}
