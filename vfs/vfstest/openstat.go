package vfstest

import (
	"os"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// testOpenStat checks vfs.OpenStater where a backend's Files implement it: a
// regular file and a directory opened for reading, with OpenFile and with
// vfs.ResolveOpen (through a symlink where the backend has them), report at
// their open what Stat reports right after it (name, type and permission bits,
// size, ID); the status stays that of the open after the file grows through
// another handle, while Stat follows the change; a File opened for writing
// records nothing or the same. A backend whose Files record nothing is skipped.
func testOpenStat(t *testing.T, cfg Config) {
	f := newFx(t, cfg)
	f.seed("d/", "d/g=GG")
	h, err := f.b.OpenFile(f.ctx, p("d/g"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := vfs.OpenStat(h); !ok {
		h.Close()
		t.Skip("the backend's Files record no status at the open (vfs.OpenStater)")
	}
	h.Close()

	for _, name := range []string{"d/g", "d"} {
		h, err := f.b.OpenFile(f.ctx, p(name), os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkOpenStat(t, "OpenFile("+name+")", h)
		h, _, err = vfs.ResolveOpen(f.ctx, f.b, p(name), func(vfs.Location) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		checkOpenStat(t, "ResolveOpen("+name+")", h)
	}
	if f.feat.Symlinks {
		openStatThroughLink(f)
	}
	openStatIsTheOpens(f)
}

// checkOpenStat closes h, failing t unless its OpenStat matches its Stat.
func checkOpenStat(t *testing.T, what string, h vfs.File) {
	t.Helper()
	defer h.Close()
	got, ok := vfs.OpenStat(h)
	if !ok {
		t.Errorf("%s: no OpenStat, though the backend's Files record one", what)
		return
	}
	want, err := h.Stat()
	if err != nil {
		t.Fatalf("%s: Stat: %v", what, err)
	}
	if got.Name != want.Name || got.Mode != want.Mode || got.Size != want.Size || got.ID != want.ID {
		t.Errorf("%s: OpenStat %q %v %d bytes id %d; Stat %q %v %d bytes id %d", what,
			got.Name, got.Mode, got.Size, got.ID, want.Name, want.Mode, want.Size, want.ID)
	}
}

// openStatThroughLink: a file opened through a symlink has its target's
// status.
func openStatThroughLink(f *fx) {
	t := f.t
	f.seed("ln -> d/g")
	h, _, err := vfs.ResolveOpen(f.ctx, f.b, p("ln"), func(vfs.Location) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	got, _ := vfs.OpenStat(h)
	want, err := f.b.Stat(f.ctx, p("d/g"))
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	if got.Mode != want.Mode || got.Size != want.Size || got.ID != want.ID {
		t.Errorf("ResolveOpen(ln): OpenStat %v %d bytes id %d; the target's Stat %v %d bytes id %d",
			got.Mode, got.Size, got.ID, want.Mode, want.Size, want.ID)
	}
}

// openStatIsTheOpens: the status is the open's: a write through another
// handle shows in Stat, not in OpenStat.
func openStatIsTheOpens(f *fx) {
	t := f.t
	r, err := f.b.OpenFile(f.ctx, p("d/g"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	before, _ := vfs.OpenStat(r)
	w, err := f.b.OpenFile(f.ctx, p("d/g"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	if got, ok := vfs.OpenStat(w); ok {
		now, err := w.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if got.Mode.Type() != now.Mode.Type() || got.ID != now.ID {
			t.Errorf("a File opened for writing: OpenStat %v id %d, Stat %v id %d", got.Mode, got.ID, now.Mode, now.ID)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	after, _ := vfs.OpenStat(r)
	now, err := r.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if after.Size != before.Size || after.Size != 2 {
		t.Errorf("OpenStat after a write elsewhere: %d bytes, want the open's 2 (it was %d)", after.Size, before.Size)
	}
	if now.Size != 6 {
		t.Errorf("Stat after appending 4 bytes to 2: %d bytes", now.Size)
	}
}
