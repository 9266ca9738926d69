package dir_test

import (
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// TestDefaultPathAllocs pins what the enforcement path costs with the default
// options, in allocations beyond those of the same work on the backend alone
// (whose own count is not this package's business): nothing for the checks,
// nothing for a Stat (the memory backend hands out the status it keeps; other
// backends' Stat costs one fs.FileInfo), one Handle for an Open, three slices for
// a ReadDir of any size.
func TestDefaultPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	m := memory.New()
	root, ctl := dir.New(m)
	must(t, root.MkdirAll(bg, "a/b/many"))
	must(t, root.WriteFile(bg, "a/b/f", make([]byte, 100), 0o644))
	for i := range 100 {
		must(t, root.WriteFile(bg, "a/b/many/"+strconv.Itoa(i), nil, 0o644))
	}
	sub, err := root.Sub(bg, "a")
	must(t, err)
	child, err := ctl.Child(bg, "a")
	must(t, err)
	deep, revoke := mustFile(t, child.Dir(), "b/f").Revocable()
	defer revoke()

	buf := make([]byte, 512)
	pf, pmany := vfs.MustParse("a/b/f"), vfs.MustParse("a/b/many")
	backendOpenRead := func() {
		f, err := m.OpenFile(bg, pf, os.O_RDONLY, 0)
		must(t, err)
		if _, err := io.ReadFull(f, buf); err != io.ErrUnexpectedEOF {
			t.Fatal(err)
		}
		must(t, f.Close())
	}
	backendStat := func() {
		if _, err := m.Stat(bg, pf); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		extra   float64
		dir     func()
		backend func()
	}{
		{"Exists", 0, func() {
			if ok, err := root.Exists(bg, "a/b/f"); !ok || err != nil {
				t.Fatal(ok, err)
			}
		}, func() {
			if _, err := m.Lstat(bg, pf); err != nil {
				t.Fatal(err)
			}
		}},
		{"Stat", 0, func() {
			if _, err := root.Stat(bg, "a/b/f"); err != nil {
				t.Fatal(err)
			}
		}, backendStat},
		{"Stat through a Sub", 0, func() {
			if _, err := sub.Stat(bg, "b/f"); err != nil {
				t.Fatal(err)
			}
		}, backendStat},
		{"Stat through a read-only Child", 0, func() {
			if _, err := child.Dir().ReadOnly().Stat(bg, "b/f"); err != nil {
				t.Fatal(err)
			}
		}, backendStat},
		{"File.Stat of a Revocable File under a Child", 0, func() {
			if _, err := deep.Stat(bg); err != nil {
				t.Fatal(err)
			}
		}, backendStat},
		{"Open, Read, Close", 1, func() {
			h, err := root.Open(bg, "a/b/f", os.O_RDONLY, 0)
			must(t, err)
			if _, err := io.ReadFull(h, buf); err != io.ErrUnexpectedEOF {
				t.Fatal(err)
			}
			must(t, h.Close())
		}, backendOpenRead},
		{"ReadDir", 3, func() {
			if ents, err := root.ReadDir(bg, "a/b/many"); err != nil || len(ents) != 100 {
				t.Fatal(len(ents), err)
			}
		}, func() {
			if ents, err := m.ReadDir(bg, pmany); err != nil || len(ents) != 100 {
				t.Fatal(len(ents), err)
			}
		}},
	} {
		got := testing.AllocsPerRun(50, tc.dir)
		base := testing.AllocsPerRun(50, tc.backend)
		if got-base != tc.extra {
			t.Errorf("%s: %v allocations, the backend alone %v: want %v more", tc.name, got, base, tc.extra)
		}
	}

	// A Handle's own calls add nothing, through a chain of gates too.
	h, err := deep.Open(bg, os.O_RDWR)
	must(t, err)
	defer h.Close()
	bf, err := m.OpenFile(bg, pf, os.O_RDWR, 0)
	must(t, err)
	defer bf.Close()
	for _, tc := range []struct {
		name     string
		dir, raw func()
	}{
		{"ReadAt", func() { h.ReadAt(buf[:10], 0) }, func() { bf.ReadAt(buf[:10], 0) }},
		{"WriteAt", func() { h.WriteAt(buf[:10], 0) }, func() { bf.WriteAt(buf[:10], 0) }},
		{"Seek", func() { h.Seek(0, io.SeekStart) }, func() { bf.Seek(0, io.SeekStart) }},
	} {
		if got, base := testing.AllocsPerRun(50, tc.dir), testing.AllocsPerRun(50, tc.raw); got != base {
			t.Errorf("Handle.%s: %v allocations, the backend's file %v", tc.name, got, base)
		}
	}
}

func mustFile(t *testing.T, d *dir.Dir, name string) *dir.File {
	t.Helper()
	f, err := d.OpenFile(bg, name)
	must(t, err)
	return f
}
