//go:build linux

package physical_test

// THREATS.md lines 39 (static part), 43 and 48-51: capabilities narrowed with
// Sub and ReadOnly, mount composition, rename flags, and the capability's
// directory moved on the host.

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/capfs/capfs/aferodir"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// TestAdvSubConfinement covers line 48: a Sub (Dir.Sub, Dir.OpenDir,
// Control.Child and the backend's Sub) of "a" cannot reach its sibling "b", by
// guest path or by a link in "a", although "b" lies inside the parent's root.
func TestAdvSubConfinement(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("a/f", insideData)
		w.file("a/victim", insideData)
		w.file("b/f", "SIBLING")
		w.link("../b/f", "a/lf")
		w.link("../b", "a/ld")
		w.link(w.host("b/f"), "a/abs")
		w.link("x/../../b/f", "a/dd")
		w.mkdir("a/x")
		sub, err := w.dir.Sub(w.ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		open, err := w.dir.OpenDir(w.ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		_, ctl := dir.New(w.fs)
		child, err := ctl.Child(w.ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		before := snap(t, w.root)
		for name, d := range map[string]*dir.Dir{"Sub": sub, "OpenDir": open, "Control.Child": child.Dir()} {
			for _, s := range []string{"../b/f", "/../b/f", "lf", "ld/f", "abs", "dd", "ld"} {
				got, err := d.ReadFile(w.ctx, s)
				w.wantCode(name+"(a).ReadFile("+s+")", err, vfs.CodeOutside)
				if string(got) == "SIBLING" {
					t.Errorf("%s(a).ReadFile(%s) reached the sibling", name, s)
				}
			}
			for _, c := range guestCalls() {
				w.wantCode(name+"(a)."+c.name+"(ld/f)", c.run(w.ctx, d, "ld/f"), vfs.CodeOutside)
				w.wantCode(name+"(a)."+c.name+"(../b/f)", c.run(w.ctx, d, "../b/f"), vfs.CodeOutside)
			}
			if got, err := d.ReadFile(w.ctx, "f"); err != nil || string(got) != insideData {
				t.Errorf("%s(a).ReadFile(f) = %q, %v", name, got, err)
			}
		}
		bsub, err := w.fs.Sub(w.ctx, p("a"))
		if err != nil {
			t.Fatal(err)
		}
		defer bsub.(*physical.FS).Close()
		for _, s := range []string{"lf", "ld/f", "abs", "dd"} {
			_, err := bsub.Stat(w.ctx, p(s))
			w.wantCode("backend Sub(a).Stat("+s+")", err, vfs.CodeOutside)
		}
		// A Sub's Symlink cannot plant a link to the sibling either.
		w.wantCode("Sub(a).Symlink(../b/f)", sub.Symlink(w.ctx, "../b/f", "new"), vfs.CodeOutside)
		if d := before.diff(snap(t, w.root)); len(d) > 0 {
			t.Errorf("calls through the Subs changed the tree: %v", d)
		}
	})
}

// TestAdvReadOnly covers line 49: a read-only Dir over the physical backend
// refuses every write flag and every mutating method with read_only, also
// through Dirs and Files derived from it, and changes nothing on the host.
func TestAdvReadOnly(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("victim", insideData)
		w.file("d/f", insideData)
		w.link("victim", "lv")
		ro := w.dir.ReadOnly()
		sub, err := ro.Sub(w.ctx, "d")
		if err != nil {
			t.Fatal(err)
		}
		od, err := ro.OpenDir(w.ctx, "d")
		if err != nil {
			t.Fatal(err)
		}
		before := snap(t, w.tmp)
		reads := []string{"List", "ReadDir", "Stat", "Lstat", "Exists", "ReadFile", "Open(O_RDONLY)", "OpenFile+ReadBytes", "Readlink", "Sub", "Walk"}
		for name, d := range map[string]*dir.Dir{"ReadOnly": ro, "ReadOnly.Sub": sub, "ReadOnly.OpenDir": od} {
			for _, s := range []string{"victim", "f", "new", "lv"} {
				for _, c := range guestCalls() {
					if slices.Contains(reads, c.name) {
						continue
					}
					w.wantCode(name+"."+c.name+"("+s+")", c.run(w.ctx, d, s), vfs.CodeReadOnly)
				}
				for _, flag := range []int{os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_CREATE, os.O_RDONLY | os.O_TRUNC, os.O_RDONLY | os.O_APPEND, os.O_WRONLY | os.O_EXCL | os.O_CREATE} {
					_, err := d.Open(w.ctx, s, flag, 0o644)
					w.wantCode(name+".Open("+s+", "+flagName(flag)+")", err, vfs.CodeReadOnly)
				}
			}
		}
		f, err := ro.OpenFile(w.ctx, "victim")
		if err != nil {
			t.Fatal(err)
		}
		w.wantCode("File.WriteText", f.WriteText(w.ctx, "x"), vfs.CodeReadOnly)
		w.wantCode("File.Append", f.Append(w.ctx, []byte("x")), vfs.CodeReadOnly)
		h, err := ro.Open(w.ctx, "victim", os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.Write([]byte("x"))
		w.wantCode("Handle.Write", err, vfs.CodeReadOnly, vfs.CodePermission)
		w.wantCode("Handle.Truncate", h.Truncate(0), vfs.CodeReadOnly, vfs.CodePermission)
		h.Close()
		err = aferodir.New(ro).Remove("victim") // an *fs.PathError carrying EROFS
		w.noHostPath("aferodir.Remove", err)
		w.wantCode("aferodir.Remove", vfs.Errno("remove", p("victim"), err), vfs.CodeReadOnly)
		w.wantCode("Backend().Mkdir", ro.Backend().Mkdir(w.ctx, p("x"), 0o755), vfs.CodeReadOnly)
		if d := before.diff(snap(t, w.tmp)); len(d) > 0 {
			t.Errorf("a read-only Dir changed the host: %v", d)
		}
	})
}

// TestAdvNamespaceMounts covers line 50: in a Namespace mounting the physical
// backend at "mnt" and a memory backend at "other", "mnt/../other" is cleaned
// lexically to the memory mount; a link in the physical mount to ".." (or
// "../other") stops at the mount's root, reaching neither the sibling mount nor
// the host parent of the physical root.
func TestAdvNamespaceMounts(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("victim", insideData)
		w.link("..", "up")
		w.link("../other/x", "toother")
		w.link("../outside/secret", "toout")
		mem := memory.New()
		ns := vfs.NewNamespace()
		must(t, ns.Mount(p("mnt"), w.fs, vfs.MountOptions{}))
		must(t, ns.Mount(p("other"), mem, vfs.MountOptions{}))
		d, _ := dir.New(ns)
		must(t, d.WriteFile(w.ctx, "other/x", []byte("MEMORY"), 0o644))
		if got, err := d.ReadFile(w.ctx, "mnt/../other/x"); err != nil || string(got) != "MEMORY" {
			t.Errorf("ReadFile(mnt/../other/x) = %q, %v; want the memory mount's x", got, err)
		}
		if got, err := d.ReadFile(w.ctx, "mnt/victim"); err != nil || string(got) != insideData {
			t.Errorf("ReadFile(mnt/victim) = %q, %v", got, err)
		}
		before := w.outsideSnap()
		for _, s := range []string{"mnt/up", "mnt/up/outside/secret", "mnt/up/root/victim", "mnt/toother", "mnt/toout", "mnt/up/other/x"} {
			got, err := d.ReadFile(w.ctx, s)
			w.wantCode("ReadFile("+s+")", err, vfs.CodeOutside)
			if len(got) > 0 {
				t.Errorf("ReadFile(%s) = %q", s, got)
			}
			_, err = d.Stat(w.ctx, s)
			w.wantCode("Stat("+s+")", err, vfs.CodeOutside)
			w.wantCode("WriteFile("+s+")", d.WriteFile(w.ctx, s, []byte("x"), 0o644), vfs.CodeOutside)
		}
		_, err := d.ReadFile(w.ctx, "../mnt/victim")
		w.wantCode("ReadFile(../mnt/victim)", err, vfs.CodeOutside)
		// A Sub of the namespace at the mount: ".." above it is refused too.
		sub, err := d.Sub(w.ctx, "mnt")
		if err != nil {
			t.Fatal(err)
		}
		_, err = sub.ReadFile(w.ctx, "../other/x")
		w.wantCode("Sub(mnt).ReadFile(../other/x)", err, vfs.CodeOutside)
		w.intact("calls through the namespace", before)
		if names, _ := mem.ReadDir(w.ctx, vfs.Root); len(names) != 1 {
			t.Errorf("the memory mount holds %v; want only x", names)
		}
	})
}

// TestAdvMovedRoot covers lines 51 and 39 (its static part) and pins the policy:
// a capability keeps working on its directory handle when the host moves the
// directory (Go's os.Root behaviour, not libpathrs's SafetyViolation): reads and
// writes follow the directory to its new place, nothing appears at the old path
// even when the host creates a new directory there, and Sub and Files pinned
// earlier keep their directories. Once the host deletes the directory, calls fail
// with not_found and create nothing anywhere.
func TestAdvMovedRoot(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("victim", insideData)
		w.file("a/f", "A")
		sub, err := w.dir.Sub(w.ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		file, err := w.dir.OpenFile(w.ctx, "a/f")
		if err != nil {
			t.Fatal(err)
		}
		moved := filepath.Join(w.tmp, "moved")
		must(t, os.Rename(w.root, moved))
		must(t, os.MkdirAll(filepath.Join(w.root, "a"), 0o755)) // a decoy at the old path
		must(t, os.WriteFile(filepath.Join(w.root, "victim"), []byte("DECOY"), 0o644))
		must(t, os.WriteFile(filepath.Join(w.root, "a", "f"), []byte("DECOY"), 0o644))
		if got, err := w.dir.ReadFile(w.ctx, "victim"); err != nil || string(got) != insideData {
			t.Errorf("ReadFile(victim) after the move = %q, %v; want the moved directory's file", got, err)
		}
		w.wantOK("WriteFile(new)", w.dir.WriteFile(w.ctx, "new", []byte("N"), 0o644))
		if b, err := os.ReadFile(filepath.Join(moved, "new")); err != nil || string(b) != "N" {
			t.Errorf("moved/new = %q, %v; want the write to follow the directory", b, err)
		}
		if _, err := os.Stat(filepath.Join(w.root, "new")); err == nil {
			t.Error("the write landed at the old path")
		}
		if hp, ok := w.fs.HostPath(); !ok || hp != moved {
			t.Errorf("HostPath() = %q, %v; want %q", hp, ok, moved)
		}
		// A Sub made before: renaming a inside the root does not redirect it either.
		must(t, os.Rename(filepath.Join(moved, "a"), filepath.Join(moved, "b")))
		must(t, os.MkdirAll(filepath.Join(moved, "a"), 0o755))
		must(t, os.WriteFile(filepath.Join(moved, "a", "f"), []byte("DECOY2"), 0o644))
		if got, err := sub.ReadFile(w.ctx, "f"); err != nil || string(got) != "A" {
			t.Errorf("Sub(a).ReadFile(f) after a -> b = %q, %v; want A (pinned)", got, err)
		}
		if got, err := file.ReadText(w.ctx); err != nil || got != "A" {
			t.Errorf("File(a/f).ReadText after a -> b = %q, %v; want A (parent pinned)", got, err)
		}
		if got, err := w.dir.ReadFile(w.ctx, "a/f"); err != nil || string(got) != "DECOY2" {
			t.Errorf("ReadFile(a/f) = %q, %v; want the new a (resolved now)", got, err)
		}
		// The directory deleted: not_found, nothing created anywhere.
		must(t, os.RemoveAll(moved))
		before := snap(t, w.tmp)
		_, err = w.dir.ReadFile(w.ctx, "victim")
		w.wantCode("ReadFile after deletion", err, vfs.CodeNotFound)
		w.wantCode("WriteFile after deletion", w.dir.WriteFile(w.ctx, "x", []byte("x"), 0o644), vfs.CodeNotFound)
		_, err = w.dir.CreateDir(w.ctx, "x")
		w.wantCode("CreateDir after deletion", err, vfs.CodeNotFound)
		_, err = w.dir.List(w.ctx, ".")
		if err != nil {
			w.noHostPath("List after deletion", err)
		}
		if d := before.diff(snap(t, w.tmp)); len(d) > 0 {
			t.Errorf("calls on a deleted root changed the host: %v", d)
		}
		if hp, ok := w.fs.HostPath(); ok {
			t.Errorf("HostPath() of a deleted root = %q, true", hp)
		}
	})
}

// TestAdvRenameFlags covers line 43 with host-planted links: RENAME_NOREPLACE
// onto a dangling link (to outside) fails with already_exists and creates nothing
// outside; EXCHANGE swaps a file and a directory; exchanging with an escaping
// link moves the link, never what it points to.
func TestAdvRenameFlags(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("f", "F")
		w.file("d/g", "G")
		w.link("../outside/new", "dangle")
		w.link("../outside/secret", "relf")
		before := w.outsideSnap()
		w.wantCode("Rename(f, dangle, NoReplace)", w.fs.Rename(w.ctx, p("f"), p("dangle"), vfs.RenameNoReplace), vfs.CodeExists)
		w.wantOK("Rename(f, d, Exchange)", w.fs.Rename(w.ctx, p("f"), p("d"), vfs.RenameExchange))
		if b, err := os.ReadFile(w.host("f/g")); err != nil || string(b) != "G" {
			t.Errorf("after the exchange f/g = %q, %v", b, err)
		}
		if b, err := os.ReadFile(w.host("d")); err != nil || string(b) != "F" {
			t.Errorf("after the exchange d = %q, %v", b, err)
		}
		w.wantOK("Rename(d, relf, Exchange)", w.fs.Rename(w.ctx, p("d"), p("relf"), vfs.RenameExchange))
		if tgt, err := os.Readlink(w.host("d")); err != nil || tgt != "../outside/secret" {
			t.Errorf("after exchanging with relf, d = %q, %v; want the link", tgt, err)
		}
		w.wantOK("Rename(relf, dangle)", w.fs.Rename(w.ctx, p("relf"), p("dangle"), 0))
		w.intact("renames with links", before)
		if b, err := os.ReadFile(w.host("dangle")); err != nil || string(b) != "F" {
			t.Errorf("dangle = %q, %v; want the file renamed over the link", b, err)
		}
		f, err := w.fs.OpenFile(w.ctx, p("dangle"), os.O_RDONLY, 0)
		if err == nil {
			b, _ := io.ReadAll(f)
			f.Close()
			if string(b) != "F" {
				t.Errorf("dangle reads %q", b)
			}
		}
	})
}
