package dir_test

import (
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// writeAttempts tries every mutating operation a Dir offers (and every write flag
// of Open) and returns what each returned, by name.
func writeAttempts(d *dir.Dir) map[string]error {
	out := map[string]error{}
	_, out["CreateDir"] = d.CreateDir(bg, "nd")
	out["MkdirAll"] = d.MkdirAll(bg, "n1/n2")
	_, out["CreateFile"] = d.CreateFile(bg, "nf")
	out["Remove"] = d.Remove(bg, "a.txt")
	out["RemoveAll"] = d.RemoveAll(bg, "dir")
	out["WriteFile"] = d.WriteFile(bg, "a.txt", []byte("x"), 0o644)
	out["Append"] = d.Append(bg, "a.txt", []byte("x"))
	out["Move"] = d.Move(bg, "a.txt", "moved")
	out["Copy"] = d.Copy(bg, "a.txt", "copied")
	out["Symlink"] = d.Symlink(bg, "a.txt", "sl")
	out["Link"] = d.Link(bg, "a.txt", "hl")
	out["Chmod"] = d.Chmod(bg, "a.txt", 0o600)
	out["Chtimes"] = d.Chtimes(bg, "a.txt", time.Time{}, time.Unix(1, 0))
	for name, flag := range map[string]int{
		"O_WRONLY": os.O_WRONLY,
		"O_RDWR":   os.O_RDWR,
		"O_CREATE": os.O_RDONLY | os.O_CREATE,
		"O_TRUNC":  os.O_RDONLY | os.O_TRUNC,
		"O_APPEND": os.O_RDONLY | os.O_APPEND,
	} {
		h, err := d.Open(bg, "a.txt", flag, 0o644)
		if h != nil {
			h.Close()
		}
		out["Open "+name] = err
	}
	return out
}

func wantAllReadOnly(t *testing.T, d *dir.Dir) {
	t.Helper()
	for name, err := range writeAttempts(d) {
		if vfs.CodeOf(err) != vfs.CodeReadOnly {
			t.Errorf("%s: got %v, want read_only", name, err)
		}
	}
	// Reads still work (where the tree has them).
	if _, err := d.List(bg, ""); err != nil {
		t.Errorf("List on read-only Dir: %v", err)
	}
}

func wantFileReadOnly(t *testing.T, f *dir.File) {
	t.Helper()
	wantCode(t, f.WriteText(bg, "x"), vfs.CodeReadOnly)
	wantCode(t, f.WriteBytes(bg, []byte("x")), vfs.CodeReadOnly)
	wantCode(t, f.Append(bg, []byte("x")), vfs.CodeReadOnly)
	for _, flag := range []int{os.O_WRONLY, os.O_RDWR, os.O_CREATE, os.O_TRUNC, os.O_APPEND} {
		_, err := f.Open(bg, flag)
		wantCode(t, err, vfs.CodeReadOnly)
	}
	if _, err := f.ReadBytes(bg); err != nil {
		t.Fatalf("ReadBytes on read-only File: %v", err)
	}
}

func TestReadOnlyEverywhere(t *testing.T) {
	root, _, _ := newTree(t)
	ro := root.ReadOnly()
	wantAllReadOnly(t, ro)

	// Chains, in both orders, and every derived capability.
	sub, err := ro.Sub(bg, ".")
	must(t, err)
	wantAllReadOnly(t, sub)
	sub2, err := root.Sub(bg, ".")
	must(t, err)
	wantAllReadOnly(t, sub2.ReadOnly())
	od, err := ro.OpenDir(bg, "dir")
	must(t, err)
	wantCode(t, od.WriteFile(bg, "b.txt", nil, 0o644), vfs.CodeReadOnly)
	// A read-only Dir's Sub cannot be upgraded by ReadOnly's absence anywhere.
	dsub, err := root.ReadOnly().Sub(bg, "dir")
	must(t, err)
	wantCode(t, dsub.WriteFile(bg, "b.txt", nil, 0o644), vfs.CodeReadOnly)
	dsub2, err := root.Sub(bg, "dir")
	must(t, err)
	wantCode(t, dsub2.ReadOnly().Append(bg, "b.txt", nil), vfs.CodeReadOnly)

	f, err := ro.OpenFile(bg, "a.txt")
	must(t, err)
	wantFileReadOnly(t, f)
	rf, _ := f.Revocable()
	wantFileReadOnly(t, rf)

	// A File from a writable Dir, made read-only.
	wf, err := root.OpenFile(bg, "a.txt")
	must(t, err)
	wantFileReadOnly(t, wf.ReadOnly())
	must(t, wf.WriteText(bg, "still writable")) // the original is unaffected

	// A Handle opened read-only from a read-only Dir refuses writes.
	h, err := ro.Open(bg, "a.txt", os.O_RDONLY, 0)
	must(t, err)
	_, err = h.Write([]byte("x"))
	wantCode(t, err, vfs.CodeReadOnly)
	_, err = h.WriteAt([]byte("x"), 0)
	wantCode(t, err, vfs.CodeReadOnly)
	wantCode(t, h.Truncate(0), vfs.CodeReadOnly)
	must(t, h.Close())

	// Views too.
	bv := ro.Backend()
	if !bv.Features().ReadOnly {
		t.Fatal("Backend view of a read-only Dir must report ReadOnly")
	}
	wantCode(t, bv.Mkdir(bg, vfs.MustParse("x"), 0o755), vfs.CodeReadOnly)
	_, err = bv.OpenFile(bg, vfs.MustParse("a.txt"), os.O_RDWR, 0)
	wantCode(t, err, vfs.CodeReadOnly)

	// Nothing changed.
	if readString(t, root, "a.txt") != "still writable" {
		t.Fatal("content")
	}
	if ok, _ := root.Exists(bg, "nd"); ok {
		t.Fatal("read-only CreateDir created something")
	}
}

func TestSetWritable(t *testing.T) {
	root, ctl, _ := newTree(t)
	sub, err := root.Sub(bg, "dir")
	must(t, err)
	f, err := root.OpenFile(bg, "a.txt")
	must(t, err)
	h, err := root.Open(bg, "a.txt", os.O_RDWR, 0)
	must(t, err)
	defer h.Close()

	if !ctl.Writable() {
		t.Fatal("a new Control is writable")
	}
	ctl.SetWritable(false)
	if ctl.Writable() {
		t.Fatal("Writable after SetWritable(false)")
	}
	wantAllReadOnly(t, root)
	wantCode(t, sub.WriteFile(bg, "b.txt", nil, 0o644), vfs.CodeReadOnly)
	wantCode(t, f.WriteText(bg, "x"), vfs.CodeReadOnly)
	_, err = h.Write([]byte("x")) // opened before the lock
	wantCode(t, err, vfs.CodeReadOnly)
	if readString(t, sub, "b.txt") != "beta" {
		t.Fatal("reads must keep working")
	}

	ctl.SetWritable(true)
	must(t, sub.WriteFile(bg, "b.txt", []byte("B"), 0o644))
	must(t, f.WriteText(bg, "A"))
	if _, err := h.WriteAt([]byte("a"), 0); err != nil {
		t.Fatal(err)
	}
	// Unlocking the host's switch does not lift a ReadOnly attenuation.
	wantCode(t, root.ReadOnly().WriteFile(bg, "a.txt", nil, 0o644), vfs.CodeReadOnly)
}

func TestRevoke(t *testing.T) {
	root, ctl, _ := newTree(t)
	sub, err := root.Sub(bg, "dir")
	must(t, err)
	ro := root.ReadOnly()
	f, err := root.OpenFile(bg, "a.txt")
	must(t, err)
	h, err := root.Open(bg, "a.txt", os.O_RDWR, 0)
	must(t, err)
	dh, err := root.Open(bg, "dir", os.O_RDONLY, 0)
	must(t, err)
	ents, err := root.ReadDir(bg, "")
	must(t, err)
	fsys := root.FS()
	bv := root.Backend()

	ctl.Revoke()
	if !ctl.Revoked() {
		t.Fatal("Revoked() after Revoke")
	}
	for name, err := range map[string]error{
		"List":       func() error { _, err := root.List(bg, ""); return err }(),
		"Sub.Read":   func() error { _, err := sub.ReadFile(bg, "b.txt"); return err }(),
		"RO.Stat":    func() error { _, err := ro.Stat(bg, "a.txt"); return err }(),
		"File.Read":  func() error { _, err := f.ReadText(bg); return err }(),
		"File.Write": f.WriteText(bg, "x"),
		"Handle.Read": func() error {
			_, err := h.Read(make([]byte, 1))
			return err
		}(),
		"Handle.Write": func() error { _, err := h.Write([]byte("x")); return err }(),
		"Handle.Seek":  func() error { _, err := h.Seek(0, io.SeekStart); return err }(),
		"Handle.Stat":  func() error { _, err := h.Stat(); return err }(),
		"Dir.ReadDir":  func() error { _, err := dh.ReadDir(-1); return err }(),
		"Entry.Info":   func() error { _, err := ents[0].Info(); return err }(),
		"FS.Open":      func() error { _, err := fsys.Open("a.txt"); return err }(),
		"Backend.Stat": func() error { _, err := bv.Stat(bg, vfs.Root); return err }(),
		"Invalid path": func() error { _, err := root.Stat(bg, "a\x00b"); return err }(),
		"Outside":      func() error { _, err := root.Stat(bg, "../x"); return err }(),
		"WriteFile":    root.WriteFile(bg, "a.txt", nil, 0o644),
	} {
		if vfs.CodeOf(err) != vfs.CodeRevoked {
			t.Errorf("%s after Revoke: got %v, want revoked", name, err)
		}
	}
	// Close still works, to release resources.
	must(t, h.Close())
	must(t, dh.Close())
	// Child of a revoked Control is refused.
	_, err = ctl.Child(bg, "dir")
	wantCode(t, err, vfs.CodeRevoked)
	// SetWritable cannot revive anything.
	ctl.SetWritable(true)
	_, err = root.List(bg, "")
	wantCode(t, err, vfs.CodeRevoked)
}

func TestChildControl(t *testing.T) {
	root, ctl, _ := newTree(t)
	child, err := ctl.Child(bg, "dir")
	must(t, err)
	cd := child.Dir()
	wantList(t, cd, "", "b.txt", "sub")
	_, err = cd.ReadFile(bg, "../a.txt")
	wantCode(t, err, vfs.CodeOutside)
	grand, err := child.Child(bg, "sub")
	must(t, err)
	gd := grand.Dir()
	gf, err := gd.OpenFile(bg, "c.go")
	must(t, err)

	// Locking the child leaves the parent writable.
	child.SetWritable(false)
	wantCode(t, cd.WriteFile(bg, "b.txt", nil, 0o644), vfs.CodeReadOnly)
	wantCode(t, gd.WriteFile(bg, "c.go", nil, 0o644), vfs.CodeReadOnly)
	if grand.Writable() {
		t.Fatal("a grandchild of a locked Control is not writable")
	}
	must(t, root.WriteFile(bg, "a.txt", []byte("A"), 0o644))
	child.SetWritable(true)

	// Revoking the child leaves the parent alone.
	child.Revoke()
	_, err = cd.List(bg, "")
	wantCode(t, err, vfs.CodeRevoked)
	_, err = gf.ReadText(bg) // derived from a grandchild
	wantCode(t, err, vfs.CodeRevoked)
	if !grand.Revoked() {
		t.Fatal("grandchild of a revoked Control must report Revoked")
	}
	wantList(t, root, "dir", "b.txt", "sub")

	// Revoking the parent revokes every child.
	other, err := ctl.Child(bg, "other")
	must(t, err)
	od := other.Dir()
	wantList(t, od, "", ".env", "x.md")
	ctl.Revoke()
	_, err = od.List(bg, "")
	wantCode(t, err, vfs.CodeRevoked)

	_, err = dirNewChildErr(t)
	wantCode(t, err, vfs.CodeNotDir)
}

func dirNewChildErr(t *testing.T) (*dir.Control, error) {
	_, ctl, _ := newTree(t)
	if _, err := ctl.Child(bg, "../x"); vfs.CodeOf(err) != vfs.CodeOutside {
		t.Fatalf("Child(../x) = %v", err)
	}
	if _, err := ctl.Child(bg, "missing"); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Fatalf("Child(missing) = %v", err)
	}
	return ctl.Child(bg, "a.txt")
}

func TestRevocableFile(t *testing.T) {
	root, _, _ := newTree(t)
	f, err := root.OpenFile(bg, "a.txt")
	must(t, err)
	rf, revoke := f.Revocable()
	ro := rf.ReadOnly()
	rf2, _ := rf.Revocable()
	h, err := rf.Open(bg, os.O_RDONLY)
	must(t, err)
	if s, err := rf.ReadText(bg); err != nil || s != "alpha" {
		t.Fatalf("before revoke: %q, %v", s, err)
	}
	revoke()
	revoke() // idempotent
	for name, err := range map[string]error{
		"rf":       func() error { _, err := rf.ReadText(bg); return err }(),
		"ro":       func() error { _, err := ro.ReadBytes(bg); return err }(),
		"rf2":      func() error { _, err := rf2.Stat(bg); return err }(),
		"handle":   func() error { _, err := h.Read(make([]byte, 1)); return err }(),
		"rf.Write": rf.WriteText(bg, "x"),
	} {
		if vfs.CodeOf(err) != vfs.CodeRevoked {
			t.Errorf("%s: got %v, want revoked", name, err)
		}
	}
	h.Close()
	// The original File is unaffected.
	if s, err := f.ReadText(bg); err != nil || s != "alpha" {
		t.Fatalf("original after revoke: %q, %v", s, err)
	}
}

// TestNoParent checks that attenuation never widens: a Sub's paths, however
// spelled, stay inside it.
func TestNoParent(t *testing.T) {
	root, _, _ := newTree(t)
	sub, err := root.Sub(bg, "dir/sub")
	must(t, err)
	for _, p := range []string{"..", "../", "../b.txt", "a/../../b.txt", "/..", "//../x", "deep/../../x", "../sub/c.go"} {
		_, err := sub.ReadFile(bg, p)
		if vfs.CodeOf(err) != vfs.CodeOutside {
			t.Errorf("ReadFile(%q) = %v, want path_outside_sandbox", p, err)
		}
	}
	for _, p := range []string{"/etc/passwd", "//etc/passwd"} {
		_, err := sub.ReadFile(bg, p)
		wantCode(t, err, vfs.CodeNotFound) // the guest's own root, not the host's
	}
	for _, p := range []string{"a\x00b", "a\\..\\..\\x", ""} {
		_, err := sub.ReadFile(bg, p)
		wantCode(t, err, vfs.CodeInvalidPath)
	}
}

// TestRevokeRacesCalls revokes while goroutines call: every call that starts after
// Revoke has returned fails with revoked; calls before may succeed.
func TestRevokeRacesCalls(t *testing.T) {
	root, ctl, _ := newTree(t)
	child, err := ctl.Child(bg, "dir")
	must(t, err)
	cd := child.Dir()
	var after atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := cd.OpenFile(bg, "b.txt")
			if err != nil && vfs.CodeOf(err) != vfs.CodeRevoked {
				errs <- err
				return
			}
			for i := 0; i < 300; i++ {
				started := after.Load()
				var err error
				switch i % 3 {
				case 0:
					_, err = cd.ReadFile(bg, "b.txt")
				case 1:
					err = cd.WriteFile(bg, "w", []byte("x"), 0o644)
				default:
					if f != nil {
						_, err = f.ReadText(bg)
					} else {
						_, err = cd.Stat(bg, "b.txt")
					}
				}
				if started && vfs.CodeOf(err) != vfs.CodeRevoked {
					errs <- err
					return
				}
				if !started && err != nil && vfs.CodeOf(err) != vfs.CodeRevoked {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < 50; i++ {
		if _, err := root.Stat(bg, "dir"); err != nil {
			t.Fatal(err)
		}
	}
	ctl.Revoke()
	after.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("call after Revoke: got %v, want revoked", err)
	}
}
