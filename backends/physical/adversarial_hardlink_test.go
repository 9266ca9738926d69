//go:build linux

package physical_test

// THREATS.md lines 29-31: hard links to files outside the root, planted on the
// host with os.Link.

import (
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/vfs"
)

func inode(t testing.TB, path string) (ino, nlink uint64) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Ino, uint64(st.Nlink)
}

// TestAdvHardLinkDefault covers lines 29 and 31 under the default policy
// (HardLinksReplace), which it pins: a planted hard link to an outside file opens
// for reading (its contents were put inside by whoever made the link: os.Root
// and openat2 open it too); every way of writing through it, O_TRUNC included,
// gives the name a private copy and leaves the outside file's inode, contents and
// mode untouched; Chmod and Chtimes refuse it.
func TestAdvHardLinkDefault(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		writes := []struct {
			name  string
			write func(s string) error
			want  string
		}{
			{"Open(O_WRONLY|O_TRUNC)", func(s string) error {
				h, err := w.dir.Open(w.ctx, s, os.O_WRONLY|os.O_TRUNC, 0)
				if err != nil {
					return err
				}
				if _, err := h.Write([]byte("GUEST")); err != nil {
					return err
				}
				return h.Close()
			}, "GUEST"},
			{"Open(O_RDWR)+Write", func(s string) error {
				h, err := w.dir.Open(w.ctx, s, os.O_RDWR, 0)
				if err != nil {
					return err
				}
				// A fresh handle writes at offset 0, also after the private copy.
				if _, err := h.Write([]byte("GU")); err != nil {
					return err
				}
				return h.Close()
			}, "GUTSIDE-SECRET"},
			{"Open(O_RDWR)+WriteAt", func(s string) error {
				h, err := w.dir.Open(w.ctx, s, os.O_RDWR, 0)
				if err != nil {
					return err
				}
				if _, err := h.WriteAt([]byte("GU"), 0); err != nil {
					return err
				}
				return h.Close()
			}, "GUTSIDE-SECRET"},
			{"Open(O_WRONLY|O_APPEND)", func(s string) error {
				h, err := w.dir.Open(w.ctx, s, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					return err
				}
				if _, err := h.Write([]byte("+G")); err != nil {
					return err
				}
				return h.Close()
			}, outsideData + "+G"},
			{"Open(O_RDWR)+Truncate", func(s string) error {
				h, err := w.dir.Open(w.ctx, s, os.O_RDWR, 0)
				if err != nil {
					return err
				}
				if err := h.Truncate(3); err != nil {
					return err
				}
				return h.Close()
			}, outsideData[:3]},
			{"Open(O_CREATE|O_TRUNC) read-only", func(s string) error {
				h, err := w.dir.Open(w.ctx, s, os.O_RDONLY|os.O_CREATE|os.O_TRUNC, 0o644)
				if err != nil {
					return err
				}
				return h.Close()
			}, ""},
			{"WriteFile", func(s string) error { return w.dir.WriteFile(w.ctx, s, []byte("GUEST"), 0o644) }, "GUEST"},
			{"Append", func(s string) error { return w.dir.Append(w.ctx, s, []byte("+A")) }, outsideData + "+A"},
			{"File.WriteText", func(s string) error {
				f, err := w.dir.OpenFile(w.ctx, s)
				if err != nil {
					return err
				}
				return f.WriteText(w.ctx, "GUEST")
			}, "GUEST"},
			{"backend OpenFile(O_RDWR|O_CREATE|O_TRUNC)", func(s string) error {
				f, err := w.fs.OpenFile(w.ctx, p(s), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
				if err != nil {
					return err
				}
				if _, err := f.WriteAt([]byte("GUEST"), 0); err != nil {
					return err
				}
				return f.Close()
			}, "GUEST"},
		}
		secretIno, _ := inode(t, w.out("secret"))
		for i, wr := range writes {
			hl := "hl" + string(rune('a'+i))
			must(t, os.Link(w.out("secret"), w.host(hl)))
			// Reading works and shows the shared contents.
			got, err := w.dir.ReadFile(w.ctx, hl)
			if err != nil || string(got) != outsideData {
				t.Errorf("ReadFile(%s) = %q, %v; want the shared contents (default policy)", hl, got, err)
			}
			before := w.outsideSnap()
			w.wantOK(wr.name+"("+hl+")", wr.write(hl))
			// The outside file keeps its contents, mode and times; only its link
			// count drops back to 1.
			w.intactExceptNlink(wr.name+" through a hard link to an outside file", before)
			if b, _ := os.ReadFile(w.out("secret")); string(b) != outsideData {
				t.Errorf("%s: outside file now %q", wr.name, b)
			}
			if b, err := os.ReadFile(w.host(hl)); err != nil || string(b) != wr.want {
				t.Errorf("%s: %s = %q, %v; want %q", wr.name, hl, b, err, wr.want)
			}
			if ino, n := inode(t, w.host(hl)); ino == secretIno || n != 1 {
				t.Errorf("%s: %s still shares the outside inode (ino %d, nlink %d)", wr.name, hl, ino, n)
			}
			if ino, n := inode(t, w.out("secret")); ino != secretIno || n != 1 {
				t.Errorf("%s: outside file inode %d (was %d), nlink %d; want the same inode, nlink 1 (the link was replaced)", wr.name, ino, secretIno, n)
			}
		}
		// Chmod and Chtimes refuse a file with other links.
		must(t, os.Link(w.out("secret"), w.host("hlz")))
		before := w.outsideSnap()
		w.wantCode("Chmod(hlz)", w.dir.Chmod(w.ctx, "hlz", 0o777), vfs.CodePermission)
		w.wantCode("Chtimes(hlz)", w.dir.Chtimes(w.ctx, "hlz", w0, w0), vfs.CodePermission)
		w.intact("Chmod and Chtimes on a hard link", before)
	})
}

// TestAdvHardLinkReject covers line 29 under WithHardLinks(HardLinksReject): a
// file with more than one name is refused (fs_permission_denied) for reading and
// for writing, and Link is not_supported.
func TestAdvHardLinkReject(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode, physical.WithHardLinks(physical.HardLinksReject))
		w.file("victim", insideData)
		must(t, os.Link(w.out("secret"), w.host("hl")))
		before := w.outsideSnap()
		got, err := w.dir.ReadFile(w.ctx, "hl")
		w.wantCode("ReadFile(hl)", err, vfs.CodePermission)
		if len(got) > 0 {
			t.Errorf("ReadFile(hl) returned %q", got)
		}
		f, err := w.fs.OpenFile(w.ctx, p("hl"), os.O_RDONLY, 0)
		if err == nil {
			b, _ := io.ReadAll(f)
			f.Close()
			t.Errorf("backend OpenFile(hl) opened it, reading %q", b)
		}
		w.wantCode("backend OpenFile(hl)", err, vfs.CodePermission)
		for _, flag := range []int{os.O_WRONLY, os.O_RDWR | os.O_TRUNC, os.O_WRONLY | os.O_APPEND, os.O_RDWR | os.O_CREATE} {
			_, err := w.dir.Open(w.ctx, "hl", flag, 0o644)
			w.wantCode("Open(hl, write)", err, vfs.CodePermission)
		}
		w.wantCode("Append(hl)", w.dir.Append(w.ctx, "hl", []byte("x")), vfs.CodePermission)
		w.wantCode("Link(victim, v2)", w.dir.Link(w.ctx, "victim", "v2"), vfs.CodeNotSupported)
		w.intact("HardLinksReject", before)
		// A link to it inside the root does not help.
		w.link("hl", "lhl")
		_, err = w.dir.ReadFile(w.ctx, "lhl")
		w.wantCode("ReadFile(lhl -> hl)", err, vfs.CodePermission)
		// A file with one name is fine.
		if got, err := w.dir.ReadFile(w.ctx, "victim"); err != nil || string(got) != insideData {
			t.Errorf("ReadFile(victim) = %q, %v", got, err)
		}
	})
}

// TestAdvLinkThroughEscapes covers line 30: Link confines both ends. A source
// through an escaping link, and a destination through one, fail with
// path_outside_sandbox; no new name appears outside, and the outside file's link
// count is unchanged.
func TestAdvLinkThroughEscapes(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.plantEscapes()
		before := w.outsideSnap()
		for _, tc := range [][2]string{
			{"absl/secret", "y"}, {"rell/secret", "y"}, {"d/rell/dir/f", "y"}, {"via/secret", "y"},
			{"victim", "absl/y"}, {"victim", "rell/y"}, {"victim", "d/rell/dir/y"}, {"victim", "via/y"},
			{"absl/secret", "rell/y"},
		} {
			w.wantCode("Link("+tc[0]+", "+tc[1]+")", w.dir.Link(w.ctx, tc[0], tc[1]), vfs.CodeOutside)
			w.wantCode("backend Link("+tc[0]+", "+tc[1]+")", w.fs.Link(w.ctx, p(tc[0]), p(tc[1])), vfs.CodeOutside)
		}
		w.intact("Link through escaping links", before)
		if _, err := os.Lstat(w.host("y")); err == nil {
			t.Error("a link to an outside file was created inside")
		}
		// Link does not follow a final symlink: linking the link itself names the
		// link, not the outside file.
		w.wantOK("Link(relf, y2)", w.dir.Link(w.ctx, "relf", "y2"))
		if fi, err := os.Lstat(w.host("y2")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("Link(relf, y2) made %v, %v; want a second name of the link", fi, err)
		}
		w.intact("Link of a link", before)
	})
}

var w0 = time.Unix(1e9, 0)
