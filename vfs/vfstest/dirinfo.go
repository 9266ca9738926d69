package vfstest

import (
	"testing"

	"github.com/capfs/capfs/vfs"
)

// testDirInfo checks vfs.ReadDirInfo, through the backend's own
// vfs.DirInfoReader where it has one: the entries ReadDir lists, sorted, each
// with what Lstat reports of it (a symlink not followed, a dangling one
// included) and no error, whether the directory is named directly, through a
// link or as a Resolved path; the errors ReadDir gives for a missing directory
// and a file; and conflict for a Resolved path with a link on it.
func testDirInfo(t *testing.T, cfg Config) {
	t.Run("entries", func(t *testing.T) {
		f := newFx(t, cfg)
		f.seed("d/", "d/e/", "d/e/f=F", "g=GG", "d/h=HHH", "empty/")
		for _, dir := range []string{".", "d", "d/e", "empty", "d/"} {
			f.sameDirInfo(p(dir))
		}
		f.sameDirInfo(p("d").Resolved())
	})
	t.Run("symlinks", func(t *testing.T) {
		f := newFx(t, cfg, symlinks)
		f.seed("d/", "d/h=HHH", "g=GG", "ln -> g", "d/dangle -> nowhere", "ld -> d", "d/up -> ..")
		for _, dir := range []string{".", "d", "ld", "ld/", "d/up/d"} {
			f.sameDirInfo(p(dir))
		}
		_, err := vfs.ReadDirInfo(f.ctx, f.b, p("ld").Resolved())
		f.wantCode(err, vfs.CodeConflict, "ReadDirInfo(ld, Resolved)")
	})
	t.Run("errors", func(t *testing.T) {
		f := newFx(t, cfg)
		f.seed("g=GG")
		_, err := vfs.ReadDirInfo(f.ctx, f.b, p("missing"))
		f.wantCode(err, vfs.CodeNotFound, "ReadDirInfo(missing)")
		_, err = vfs.ReadDirInfo(f.ctx, f.b, p("g"))
		f.wantCode(err, vfs.CodeNotDir, "ReadDirInfo(g)")
	})
}

// sameDirInfo checks that ReadDirInfo of dir lists what ReadDir lists, each
// entry with what Lstat reports.
func (f *fx) sameDirInfo(dir vfs.Path) {
	f.t.Helper()
	got, err := vfs.ReadDirInfo(f.ctx, f.b, dir)
	if err != nil {
		f.t.Errorf("ReadDirInfo(%s): %v", dir, err)
		return
	}
	ents, err := f.b.ReadDir(f.ctx, dir)
	if err != nil {
		f.t.Errorf("ReadDir(%s): %v", dir, err)
		return
	}
	if len(got) != len(ents) {
		f.t.Errorf("ReadDirInfo(%s): %d entries, ReadDir lists %d", dir, len(got), len(ents))
		return
	}
	for i, e := range ents {
		g := got[i]
		if g.Err != nil {
			f.t.Errorf("ReadDirInfo(%s): %s: %v", dir, g.Name, g.Err)
			continue
		}
		if g.Name != e.Name {
			f.t.Errorf("ReadDirInfo(%s)[%d] is %q; ReadDir lists %q there", dir, i, g.Name, e.Name)
			continue
		}
		c, err := dir.WithoutDirMark().Child(e.Name)
		if err != nil {
			f.t.Fatal(err)
		}
		w, err := f.b.Lstat(f.ctx, c)
		if err != nil {
			f.t.Errorf("Lstat(%s): %v", c, err)
			continue
		}
		if g.Mode != w.Mode || g.Size != w.Size || !g.ModTime.Equal(w.ModTime) || !g.ChangeTime.Equal(w.ChangeTime) || g.Nlink != w.Nlink || g.ID != w.ID {
			f.t.Errorf("ReadDirInfo(%s) says of %s: mode %v size %d mtime %v ctime %v nlink %d id %d; Lstat: %v %d %v %v %d %d",
				dir, e.Name, g.Mode, g.Size, g.ModTime, g.ChangeTime, g.Nlink, g.ID, w.Mode, w.Size, w.ModTime, w.ChangeTime, w.Nlink, w.ID)
		}
	}
}
