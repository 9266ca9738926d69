package cowview

import (
	"context"
	"io/fs"
	"testing"
	"time"

	"github.com/capfs/capfs/vfs"
)

// Lchtimes sets a lower symlink's own time (copied up, its target kept), and
// a lower file's and directory's, leaving the lower tree and the link's
// target as they were; a zero mtime copies nothing up.
func TestLchtimes(t *testing.T) {
	when := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	p := vfs.MustParse
	for _, links := range []bool{false, true} {
		t.Run(map[bool]string{false: "symlinks-in-nodes", true: "links"}[links], func(t *testing.T) {
			ctx := context.Background()
			lower := lowerTree()
			tr, v := newView(links, lower)
			if err := vfs.Lchtimes(ctx, v, p("l"), time.Time{}, time.Time{}); err != nil {
				t.Fatal(err)
			}
			if _, up := tr.Root().Ents["l"]; up {
				t.Error("Lchtimes with a zero mtime copied l up")
			}
			if err := vfs.Lchtimes(ctx, v, p("l"), time.Time{}, when); err != nil {
				t.Fatalf("Lchtimes(l): %v", err)
			}
			if li, err := v.Lstat(ctx, p("l")); err != nil || !li.ModTime.Equal(when) || li.Mode.Type() != fs.ModeSymlink {
				t.Errorf("Lstat(l) = %v %v, %v; want a symlink of mtime %v", li.Mode, li.ModTime, err, when)
			}
			if fi, err := v.Stat(ctx, p("l")); err != nil || !fi.ModTime.Equal(baseTime) {
				t.Errorf("Stat(l) = %v, %v; its target's mtime changed (was %v)", fi.ModTime, err, baseTime)
			}
			for _, name := range []string{"a.txt", "d"} {
				if err := vfs.Lchtimes(ctx, v, p(name), time.Time{}, when); err != nil {
					t.Fatalf("Lchtimes(%s): %v", name, err)
				}
			}
			if target, err := v.Readlink(ctx, p("l")); err != nil || target != "a.txt" {
				t.Errorf("Readlink(l) = %q, %v; want a.txt", target, err)
			}
			for _, name := range []string{"a.txt", "d"} {
				if i, err := v.Lstat(ctx, p(name)); err != nil || !i.ModTime.Equal(when) {
					t.Errorf("Lstat(%s) = %v, %v; want mtime %v", name, i.ModTime, err, when)
				}
			}
			if lower.kids["l"].target != "a.txt" || lower.kids["a.txt"].data != "alpha" {
				t.Error("the lower tree changed")
			}
			err := vfs.Lchtimes(ctx, v, p("missing"), time.Time{}, when)
			if vfs.CodeOf(err) != vfs.CodeNotFound {
				t.Errorf("Lchtimes(missing) = %v, want not_found", err)
			}
		})
	}
}
