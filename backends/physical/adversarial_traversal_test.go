//go:build linux

package physical_test

// THREATS.md lines 1-11 and 14: traversal, lexical tricks and names, through a Dir
// over the physical backend (and vfs.ParseGuest, which every Dir call goes
// through), with each resolver.

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/aferodir"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/vfs"
)

// hostEntries lists a host directory's names.
func hostEntries(t testing.TB, path string) []string {
	t.Helper()
	ents, err := os.ReadDir(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestAdvDotDot covers lines 1 and 2: "..", "../", "a/../../x" and "../ROOT/x"
// (the root's own name reached from above) fail with path_outside_sandbox in every
// Dir method and in every path position, change nothing beside the root, and
// Open("../") never yields the parent directory.
func TestAdvDotDot(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("victim", insideData)
		w.mkdir("a")
		outside, tmpNames := w.outsideSnap(), hostEntries(t, w.tmp)
		for _, bad := range []string{"..", "../", "../.", "a/../../x", "../root/victim", "../outside/secret", "/../outside", "a/../../root/victim", "./.."} {
			for _, c := range guestCalls() {
				w.wantCode(c.name+"("+bad+")", c.run(w.ctx, w.dir, bad), vfs.CodeOutside)
			}
		}
		// The io/fs and afero views refuse them too.
		if f, err := w.dir.FS().Open("../"); err == nil {
			f.Close()
			t.Errorf(`FS().Open("../") succeeded`)
		}
		if _, err := fs.ReadDir(w.dir.FS(), ".."); err == nil {
			t.Errorf(`FS().ReadDir("..") succeeded`)
		}
		af := aferodir.New(w.dir)
		if f, err := af.Open("../"); err == nil {
			names, _ := f.Readdirnames(-1)
			f.Close()
			t.Errorf(`aferodir.Open("../") succeeded, listing %v`, names)
		} else {
			w.noHostPath("aferodir.Open", err)
		}
		if _, err := af.Stat("../outside/secret"); err == nil {
			t.Errorf(`aferodir.Stat("../outside/secret") succeeded`)
		}
		w.intact("dot-dot calls", outside)
		if got := hostEntries(t, w.tmp); !slices.Equal(got, tmpNames) {
			t.Errorf("the root's parent changed: %v, was %v", got, tmpNames)
		}
		// Nothing was created inside either, apart from what the failing calls could
		// not have made.
		if got := hostEntries(t, w.root); !slices.Equal(got, []string{"a", "victim"}) {
			t.Errorf("root holds %v; want [a victim]", got)
		}
	})
}

// TestAdvGuestAbsolute covers line 3: "/etc/passwd" and "//x" name entries of the
// Dir's own root, never the host's.
func TestAdvGuestAbsolute(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("etc/passwd", insideData)
		w.file("x", "X")
		for s, want := range map[string]string{"/etc/passwd": insideData, "//etc//passwd": insideData, "//x": "X", "/./x": "X", "/etc/../x": "X"} {
			got, err := w.dir.ReadFile(w.ctx, s)
			if err != nil || string(got) != want {
				t.Errorf("ReadFile(%q) = %q, %v; want %q from the Dir's root", s, got, err, want)
			}
		}
		w.wantOK("WriteFile(/new)", w.dir.WriteFile(w.ctx, "/new", []byte("N"), 0o644))
		if b, err := os.ReadFile(w.host("new")); err != nil || string(b) != "N" {
			t.Errorf("WriteFile(/new) wrote %q, %v at the root; want N", b, err)
		}
		// A Sub's "/" is the Sub's root.
		sub, err := w.dir.Sub(w.ctx, "/etc")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := sub.ReadFile(w.ctx, "/passwd"); err != nil || string(got) != insideData {
			t.Errorf("Sub(/etc).ReadFile(/passwd) = %q, %v", got, err)
		}
		w.wantCode("Sub(/etc).ReadFile(/x)", func() error { _, err := sub.ReadFile(w.ctx, "/x"); return err }(), vfs.CodeNotFound)
		w.wantCode("Sub(/etc).ReadFile(/../x)", func() error { _, err := sub.ReadFile(w.ctx, "/../x"); return err }(), vfs.CodeOutside)
	})
}

// TestAdvSiblingPrefix covers line 4: with the root at tmp/root, the sibling
// tmp/root-secret shares the root's name as a string prefix and must stay out of
// reach, by guest path and by a planted link.
func TestAdvSiblingPrefix(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		must(t, os.MkdirAll(w.root+"-secret", 0o755))
		must(t, os.WriteFile(filepath.Join(w.root+"-secret", "f"), []byte(outsideData), 0o644))
		w.link("../root-secret/f", "rel")
		w.link(w.root+"-secret/f", "abs")
		w.link("../root-secret", "reldir")
		for _, s := range []string{"../root-secret/f", "/../root-secret/f", "rel", "abs", "reldir/f"} {
			got, err := w.dir.ReadFile(w.ctx, s)
			w.wantCode("ReadFile("+s+")", err, vfs.CodeOutside)
			if strings.Contains(string(got), outsideData) {
				t.Errorf("ReadFile(%q) leaked the sibling's file", s)
			}
		}
		w.wantCode("WriteFile(reldir/g)", w.dir.WriteFile(w.ctx, "reldir/g", []byte("x"), 0o644), vfs.CodeOutside)
		if _, err := os.Stat(filepath.Join(w.root+"-secret", "g")); err == nil {
			t.Errorf("WriteFile(reldir/g) created a file in the sibling directory")
		}
	})
}

// TestAdvDotsAndSlashes covers lines 5 and 6: redundant slashes and dots reach the
// same inode as the clean path; "a/../a/b/../../a/b/t" succeeds inside the root.
func TestAdvDotsAndSlashes(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("b/c/d/marker", "M")
		w.file("a/b/t", "T")
		clean, err := w.fs.Stat(w.ctx, p("b/c/d"))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"b///././c//.//d/./", "./b/c/d", "b/c/d/", "/b/c/../c/d/."} {
			q, err := vfs.ParseGuest(s)
			if err != nil {
				t.Fatalf("ParseGuest(%q): %v", s, err)
			}
			info, err := w.fs.Stat(w.ctx, q)
			if err != nil || info.ID != clean.ID || !info.Mode.IsDir() {
				t.Errorf("Stat(%q) = %+v, %v; want the inode of b/c/d (%d)", s, info, err, clean.ID)
			}
			if got, err := w.dir.ReadFile(w.ctx, s+"/marker"); err != nil || string(got) != "M" {
				t.Errorf("ReadFile(%q/marker) = %q, %v", s, got, err)
			}
		}
		for _, s := range []string{"a/../a/b/../../a/b/t", "a/b/../b/./t", "x/../a/b/t"} {
			if got, err := w.dir.ReadFile(w.ctx, s); err != nil || string(got) != "T" {
				t.Errorf("ReadFile(%q) = %q, %v; want T", s, got, err)
			}
		}
	})
}

// TestAdvBadBytes covers lines 7, 8 and 14: a NUL byte and a backslash are
// invalid_path in every Dir method (never truncated, never a separator), and
// Windows device and stream names are refused everywhere for the same reason
// they are harmless on Linux: ":" is an ordinary byte, "\\" is refused; a host
// entry whose name holds a backslash is not listed and cannot be named.
func TestAdvBadBytes(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("victim", insideData)
		w.file("a", "A") // "a\x00b" must not be truncated to "a"
		w.mkdir("d")
		before := snap(t, w.tmp)
		for _, bad := range []string{"a\x00b", "a\x00", "\x00", "d/\x00/x", `a\..\..\x`, `..\outside\secret`, `d\victim`, `\\?\C:\x`, `\\.\NUL`, `C:\Windows`} {
			for _, c := range guestCalls() {
				w.wantCode(c.name+"("+strings.ReplaceAll(bad, "\x00", `\0`)+")", c.run(w.ctx, w.dir, bad), vfs.CodeInvalidPath)
			}
		}
		if d := before.diff(snap(t, w.tmp)); len(d) > 0 {
			t.Errorf("calls with bad bytes changed the host: %v", d)
		}
		// Symlink targets with those bytes are refused too.
		w.wantCode(`Symlink(..\x)`, w.dir.Symlink(w.ctx, `..\outside`, "l1"), vfs.CodeInvalidPath)
		w.wantCode(`Symlink(a\0b)`, w.dir.Symlink(w.ctx, "a\x00b", "l2"), vfs.CodeInvalidPath)
		w.wantCode(`backend Symlink(..\x)`, w.fs.Symlink(w.ctx, `..\outside`, p("l3")), vfs.CodeInvalidPath)
		// A host name with a backslash is invisible and unreachable.
		w.file(`evil\..\..\x`, "E")
		names, err := w.dir.List(w.ctx, ".")
		w.wantOK("List", err)
		if slices.ContainsFunc(names, func(s string) bool { return strings.Contains(s, `\`) }) {
			t.Errorf("List shows a name with a backslash: %q", names)
		}
		// Windows reserved names and streams are plain names on Linux: they stay
		// inside the root like any other.
		for _, s := range []string{"NUL", "COM1", "con.txt", "file:stream", "a:b:$DATA"} {
			w.wantOK("WriteFile("+s+")", w.dir.WriteFile(w.ctx, s, []byte("W"), 0o644))
			if b, err := os.ReadFile(w.host(s)); err != nil || string(b) != "W" {
				t.Errorf("WriteFile(%q) did not create that name in the root: %q, %v", s, b, err)
			}
		}
	})
}

// TestAdvEmptyPath covers line 9: the empty path is invalid_path for every method
// that names an entry (List and ReadDir take "" as ".", as documented).
func TestAdvEmptyPath(t *testing.T) {
	if _, err := vfs.ParseGuest(""); vfs.CodeOf(err) != vfs.CodeInvalidPath {
		t.Fatalf(`ParseGuest("") = %v; want invalid_path`, err)
	}
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("victim", insideData)
		before := snap(t, w.tmp)
		for _, c := range guestCalls() {
			err := c.run(w.ctx, w.dir, "")
			switch c.name {
			case "List", "ReadDir", "Walk":
				w.wantOK(c.name+`("") lists the Dir`, err)
			default:
				w.wantCode(c.name+`("")`, err, vfs.CodeInvalidPath)
			}
		}
		if d := before.diff(snap(t, w.tmp)); len(d) > 0 {
			t.Errorf("calls with an empty path changed the host: %v", d)
		}
	})
}

// TestAdvTrailingSlashNonDir covers line 10: "file/", "file/." and "fifo/" are
// not_a_directory; "file/.." is cleaned lexically to the Dir itself (documented in
// vfs.ParseGuest), so it names the root, never the file's parent on the host.
func TestAdvTrailingSlashNonDir(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("file", insideData)
		must(t, mkfifo(w.host("fifo")))
		w.link("file", "lf")
		for _, s := range []string{"file/", "file/.", "fifo/", "lf/", "fifo/."} {
			_, err := w.dir.Stat(w.ctx, s)
			w.wantCode("Stat("+s+")", err, vfs.CodeNotDir)
			_, err = w.dir.ReadFile(w.ctx, s)
			w.wantCode("ReadFile("+s+")", err, vfs.CodeNotDir, vfs.CodeIsDir)
			_, err = w.dir.List(w.ctx, s)
			w.wantCode("List("+s+")", err, vfs.CodeNotDir)
			_, err = w.dir.Open(w.ctx, s, os.O_RDONLY, 0)
			w.wantCode("Open("+s+")", err, vfs.CodeNotDir)
			w.wantCode("WriteFile("+s+")", w.dir.WriteFile(w.ctx, s, []byte("x"), 0o644), vfs.CodeNotDir, vfs.CodeIsDir)
		}
		info, err := w.dir.Stat(w.ctx, "file/..")
		if err != nil || !info.IsDir() {
			t.Errorf(`Stat("file/..") = %v, %v; want the Dir's root (lexical cleaning)`, info, err)
		}
		if b, _ := os.ReadFile(w.host("file")); string(b) != insideData {
			t.Errorf("file changed: %q", b)
		}
	})
}

// TestAdvLongNames covers line 11: a 256-byte component is invalid_path (the
// ENAMETOOLONG class); a path of thousands of "a/../" repeats is cleaned in bounded
// work and refused past the path-length limit; a long path of short components
// and a deep link chain with long targets resolve or fail with a code, never hang.
func TestAdvLongNames(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("a/f", "F")
		long := strings.Repeat("x", 256)
		for _, c := range guestCalls() {
			w.wantCode(c.name+"(256-byte name)", c.run(w.ctx, w.dir, long), vfs.CodeInvalidPath)
		}
		ok255 := strings.Repeat("y", 255)
		w.wantOK("WriteFile(255-byte name)", w.dir.WriteFile(w.ctx, ok255, []byte("Y"), 0o644))
		// 10k repeats: over MaxPathLen, refused before any work.
		_, err := w.dir.ReadFile(w.ctx, strings.Repeat("a/../", 10000)+"a/f")
		w.wantCode("ReadFile(10k a/../)", err, vfs.CodeInvalidPath)
		// Just under the limit: cleaned lexically to a/f.
		s := strings.Repeat("a/../", (vfs.MaxPathLen-8)/5) + "a/f"
		if got, err := w.dir.ReadFile(w.ctx, s); err != nil || string(got) != "F" {
			t.Errorf("ReadFile(%d-byte a/../ path) = %q, %v; want F", len(s), got, err)
		}
		// A host link whose target repeats "a/../" thousands of times, in a chain.
		w.link(strings.Repeat("a/../", 800)+"a/f", "l0")
		for i := 1; i <= 8; i++ {
			w.link(strings.Repeat("./", 1000)+"l"+strconv.Itoa(i-1), "l"+strconv.Itoa(i))
		}
		start := time.Now()
		got, err := w.dir.ReadFile(w.ctx, "l8")
		if err != nil || string(got) != "F" {
			// ENAMETOOLONG from a long target is an acceptable refusal.
			w.wantCode("ReadFile(l8)", err, vfs.CodeInvalidPath)
		}
		t.Logf("long-target chain: %v, %v (%v)", string(got), err, time.Since(start))
	})
}

// mkfifo creates a FIFO at path.
func mkfifo(path string) error { return unix.Mkfifo(path, 0o644) }
