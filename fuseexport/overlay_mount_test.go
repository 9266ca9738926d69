//go:build linux

package fuseexport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/overlay"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
)

// TestOverlayThroughMount: a lazy sandbox's view: reads come through the Dir,
// changes land in the upper directory, the source is never written, and
// Changes lists what a sync-back must apply with the source's state before.
func TestOverlayThroughMount(t *testing.T) {
	mem := memory.New()
	seed, _ := dir.New(mem)
	src, _ := dir.New(mem, dir.WithPolicy(policy.Defaults()))
	for name, body := range map[string]string{"keep.txt": "keep", "edit.txt": "old", "gone.txt": "bye", "d/inner.txt": "in", "mv/a.txt": "a", ".env": "SECRET=1"} {
		if err := seed.MkdirAll(bg, filepath.Dir(name)); err != nil {
			t.Fatal(err)
		}
		if err := seed.WriteFile(bg, name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	upper := t.TempDir()
	ov, err := overlay.NewOverlay(src.Backend(), upper)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ov.Close() })
	d, _ := dir.New(ov)
	mp, _ := mountT(t, d, Options{})
	m := func(p string) string { return filepath.Join(mp, p) }

	if b, err := os.ReadFile(m("keep.txt")); err != nil || string(b) != "keep" {
		t.Fatalf("keep.txt: %q, %v", b, err)
	}
	_, err = os.ReadFile(m(".env"))
	wantErrno(t, "secret through the overlay", err, 2) // ENOENT: the source Dir's policy still decides
	if err := os.WriteFile(m("edit.txt"), []byte("new contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m("d/added.txt"), []byte("added"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m("gone.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m("mv"), m("moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(m("newdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The merged view.
	if b, _ := os.ReadFile(m("edit.txt")); string(b) != "new contents" {
		t.Errorf("edit.txt through the mount = %q", b)
	}
	if _, err := os.Stat(m("gone.txt")); !os.IsNotExist(err) {
		t.Errorf("gone.txt: %v", err)
	}
	if b, _ := os.ReadFile(m("moved/a.txt")); string(b) != "a" {
		t.Errorf("moved/a.txt = %q", b)
	}
	ents, _ := os.ReadDir(mp)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != ".env d edit.txt keep.txt moved newdir" {
		t.Errorf("root lists %q", got)
	}
	// A directory copied up as the parent of a change keeps its other lower
	// entries when it moves.
	if err := os.Rename(m("d"), m("d2")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(m("d2/inner.txt")); err != nil || string(b) != "in" {
		t.Errorf("d2/inner.txt after moving a half copied-up directory = %q, %v", b, err)
	}
	if err := os.Rename(m("d2"), m("d")); err != nil {
		t.Fatal(err)
	}
	// The source is untouched.
	for name, body := range map[string]string{"edit.txt": "old", "gone.txt": "bye", "mv/a.txt": "a"} {
		if b, err := src.ReadFile(bg, name); err != nil || string(b) != body {
			t.Errorf("source %s = %q, %v; want %q", name, b, err, body)
		}
	}
	if _, err := src.Stat(bg, "d/added.txt"); err == nil {
		t.Error("d/added.txt reached the source")
	}
	// The upper directory holds the changes, and only them.
	if b, err := os.ReadFile(filepath.Join(upper, "edit.txt")); err != nil || string(b) != "new contents" {
		t.Errorf("upper edit.txt = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(upper, "keep.txt")); !os.IsNotExist(err) {
		t.Errorf("keep.txt was copied up: %v", err)
	}
	cs, err := ov.Changes(bg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.Kind+" "+c.Path)
		if c.Path == "edit.txt" && (c.Base == nil || c.Base.Size != 3 || c.Base.Digest == "") {
			t.Errorf("edit.txt's base %+v", c.Base)
		}
	}
	want := "added d/added.txt, modified d/inner.txt, deleted gone.txt, deleted mv, added moved, added moved/a.txt, added newdir, modified edit.txt"
	wantSet := map[string]bool{}
	for _, w := range strings.Split(want, ", ") {
		wantSet[w] = true
	}
	if len(got) != len(wantSet) {
		t.Errorf("changes %q; want %q", got, want)
	}
	for _, g := range got {
		if !wantSet[g] {
			t.Errorf("unexpected change %q (all: %q)", g, got)
		}
	}
}
