//go:build linux

package physical

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

// TestHardLinkToOutside: a hard link the host planted to a file outside the root
// (THREATS 29, 31). Under the default policy it reads (documented), but no write,
// truncation, chmod or chtimes through it reaches the outside inode; under
// HardLinksReject it does not open at all.
func TestHardLinkToOutside(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		outside := filepath.Join(h.outside, "secret")
		if err := os.Chmod(outside, 0o640); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"hl", "hl-append", "hl-rdwr", "hl-rdonly-trunc"} {
			if err := os.Link(outside, h.in(n)); err != nil {
				t.Fatal(err)
			}
		}
		before := h.state()
		f := newAt(t, h.root, opts...)
		ctx := t.Context()

		data, err := readAll(ctx, f, "hl")
		if err != nil || string(data) != secret {
			t.Errorf("ReadFile(hl) = %q, %v; the default policy reads hard-linked files", data, err)
		}
		wantCode(t, f.Chmod(ctx, P("hl"), 0o666), vfs.CodePermission, "Chmod(hl)")
		wantCode(t, f.Chtimes(ctx, P("hl"), time.Unix(1, 0), time.Unix(2, 0)), vfs.CodePermission, "Chtimes(hl)")

		if err := writeAll(ctx, f, "hl", os.O_WRONLY|os.O_TRUNC, "new"); err != nil {
			t.Fatalf("O_TRUNC write through hl: %v", err)
		}
		if err := writeAll(ctx, f, "hl-append", os.O_WRONLY|os.O_APPEND, "+more"); err != nil {
			t.Fatalf("O_APPEND write through hl-append: %v", err)
		}
		h2, err := f.OpenFile(ctx, P("hl-rdwr"), os.O_RDWR, 0)
		if err != nil {
			t.Fatalf("O_RDWR open of hl-rdwr: %v", err)
		}
		buf := make([]byte, 6)
		if n, err := h2.ReadAt(buf, 0); n != 6 || string(buf) != secret {
			t.Errorf("the private copy reads %q, %v; want the old contents", buf[:n], err)
		}
		if _, err := h2.WriteAt([]byte("X"), 0); err != nil {
			t.Fatal(err)
		}
		h2.Close()
		h3, err := f.OpenFile(ctx, P("hl-rdonly-trunc"), os.O_RDONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatalf("O_RDONLY|O_TRUNC open of hl-rdonly-trunc: %v", err)
		}
		_, err = h3.Write([]byte("x"))
		wantCode(t, err, vfs.CodePermission, "Write on a read-only handle")
		h3.Close()

		if after := h.state(); after != before {
			t.Fatalf("writes through hard links changed the outside file:\n%s\nwant:\n%s", after, before)
		}
		for name, want := range map[string]string{"hl": "new", "hl-append": secret + "+more", "hl-rdwr": "XECRET", "hl-rdonly-trunc": ""} {
			data, err := os.ReadFile(h.in(name))
			if err != nil || string(data) != want {
				t.Errorf("%s = %q, %v; want %q", name, data, err, want)
			}
			info, err := f.Stat(ctx, P(name))
			if err != nil || info.Nlink != 1 || info.Mode.Perm() != 0o640 {
				t.Errorf("Stat(%s) = nlink %d mode %v, %v; want a private copy with the old mode 0640", name, info.Nlink, info.Mode, err)
			}
		}
		if names, _ := filepath.Glob(filepath.Join(h.root, ".capfs-*")); len(names) != 0 {
			t.Errorf("temporary files left behind: %q", names)
		}
	})
}

// TestHardLinksReject: under HardLinksReject nothing with other names opens, Link
// is not supported, and the Features say so.
func TestHardLinksReject(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		if err := os.Link(filepath.Join(h.outside, "secret"), h.in("hl")); err != nil {
			t.Fatal(err)
		}
		h.writeHost(h.in("f"), "F")
		before := h.state()
		f := newAt(t, h.root, append(opts, WithHardLinks(HardLinksReject))...)
		ctx := t.Context()
		if f.Features().HardLinks {
			t.Error("Features().HardLinks under HardLinksReject")
		}
		for _, flag := range []int{os.O_RDONLY, os.O_WRONLY, os.O_RDWR | os.O_APPEND, os.O_WRONLY | os.O_TRUNC, os.O_WRONLY | os.O_CREATE} {
			h, err := f.OpenFile(ctx, P("hl"), flag, 0o644)
			if err == nil {
				h.Close()
			}
			wantCode(t, err, vfs.CodePermission, "OpenFile(hl, %#x)", flag)
		}
		wantCode(t, f.Link(ctx, P("f"), P("g")), vfs.CodeNotSupported, "Link")
		if data, err := readAll(ctx, f, "f"); err != nil || string(data) != "F" {
			t.Errorf("ReadFile(f) = %q, %v", data, err)
		}
		if after := h.state(); after != before {
			t.Fatalf("the outside file changed:\n%s", after)
		}
	})
}

// TestHardLinkReplace: hard links made with Link share the inode (Stat agrees)
// until a write through one name gives it a private copy.
func TestHardLinkReplace(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		f := newTestFS(t, opts...)
		ctx := t.Context()
		if err := writeAll(ctx, f, "f", os.O_WRONLY|os.O_CREATE, "one"); err != nil {
			t.Fatal(err)
		}
		if err := f.Link(ctx, P("f"), P("g")); err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat(ctx, P("f"))
		gi, _ := f.Stat(ctx, P("g"))
		if fi.Nlink != 2 || gi.Nlink != 2 || fi.ID != gi.ID {
			t.Errorf("after Link: f nlink %d id %d, g nlink %d id %d; want one inode with two names", fi.Nlink, fi.ID, gi.Nlink, gi.ID)
		}
		if err := writeAll(ctx, f, "g", os.O_WRONLY|os.O_APPEND, "+two"); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{"f": "one", "g": "one+two"} {
			if data, err := readAll(ctx, f, name); err != nil || string(data) != want {
				t.Errorf("%s = %q, %v; want %q", name, data, err, want)
			}
			if info, _ := f.Stat(ctx, P(name)); info.Nlink != 1 {
				t.Errorf("Stat(%s).Nlink = %d after the copy; want 1", name, info.Nlink)
			}
		}
	})
}

// TestHardLinkSwapRace: an attacker exchanges a file with a planted hard link to
// an outside file while the victim opens the file with O_TRUNC and writes: the
// outside file never changes (the kernel is never handed O_TRUNC; the handle's own
// link count decides).
func TestHardLinkSwapRace(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		if err := os.Link(filepath.Join(h.outside, "secret"), h.in("hl")); err != nil {
			t.Fatal(err)
		}
		h.writeHost(h.in("f"), "F")
		before := h.state()
		f := newAt(t, h.root, opts...)
		ctx := t.Context()
		const rounds = 300
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				unix.Renameat2(unix.AT_FDCWD, h.in("f"), unix.AT_FDCWD, h.in("hl"), unix.RENAME_EXCHANGE)
				runtime.Gosched()
			}
		}()
		for range rounds {
			if err := writeAll(ctx, f, "f", os.O_WRONLY|os.O_TRUNC, "w"); err != nil && vfs.CodeOf(err) == "" {
				t.Fatal(err)
			}
		}
		wg.Wait()
		if after := h.state(); after != before {
			t.Fatalf("the outside file changed:\n%s\nwant:\n%s", after, before)
		}
	})
}
