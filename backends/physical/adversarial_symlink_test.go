//go:build linux

package physical_test

// THREATS.md lines 15-28: static symlinks planted on the host (with os.Symlink,
// as an attacker sharing the host would) pointing out of the root, used through a
// Dir over the physical backend and through the backend itself, with each
// resolver.

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/vfs"
)

// plantEscapes plants the usual escaping links: to the outside directory
// (absolute, relative, relative from a subdirectory) and to the outside file.
func (w *world) plantEscapes() (dirLinks, fileLinks []string) {
	w.t.Helper()
	w.file("victim", insideData)
	w.mkdir("d")
	w.link(w.outside, "absl")
	w.link("../outside", "rell")
	w.link("../../outside", "d/rell")
	w.link(filepath.Join(w.outside, "secret"), "abf")
	w.link("../outside/secret", "relf")
	w.link("../../outside/secret", "d/relf")
	w.link("d/rell", "via") // an in-root hop to an escaping link
	return []string{"absl", "rell", "d/rell", "via"}, []string{"abf", "relf", "d/relf"}
}

// followingCalls are the guest calls that follow a final symlink.
var followingCalls = []string{
	"Stat", "ReadFile", "WriteFile", "Append", "Open(O_RDONLY)", "Open(O_RDWR|O_CREATE)",
	"Open(O_WRONLY|O_TRUNC)", "Open(O_WRONLY|O_APPEND)", "OpenFile+ReadBytes", "Chmod", "Chtimes", "Sub", "List", "ReadDir",
}

// TestAdvEscapingLinks covers lines 15, 16 and 17: a link to the outside directory
// (absolute or relative, also reached through another link) used as an
// intermediate component fails with path_outside_sandbox in every Dir method and
// every path position (Stat, Mkdir, Chmod, Link, Rename among them); used as the
// final component, every method that follows it fails the same way. Nothing
// outside changes, no outside byte is returned, and the backend SPI behaves alike.
func TestAdvEscapingLinks(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		dirLinks, fileLinks := w.plantEscapes()
		before := w.outsideSnap()
		for _, l := range dirLinks {
			for _, rest := range []string{"/secret", "/dir/f", "/dir", "/new", "/dir/new/x"} {
				for _, c := range guestCalls() {
					w.wantCode(c.name+"("+l+rest+")", c.run(w.ctx, w.dir, l+rest), vfs.CodeOutside)
				}
			}
		}
		for _, l := range append(dirLinks, fileLinks...) {
			for _, c := range guestCalls() {
				if slices.Contains(followingCalls, c.name) {
					w.wantCode(c.name+"("+l+")", c.run(w.ctx, w.dir, l), vfs.CodeOutside)
				}
			}
			for _, b := range backendFollowing(w, l) {
				w.wantCode("backend "+b.name+"("+l+")", b.err, vfs.CodeOutside)
			}
		}
		w.intact("calls through escaping links", before)
		// The calls that do not follow act on the link itself, inside the root.
		info, err := w.dir.Lstat(w.ctx, "absl")
		if err != nil || info.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("Lstat(absl) = %v, %v; want the link", info, err)
		}
		w.wantOK("Move(rell, moved)", w.dir.Move(w.ctx, "rell", "moved"))
		w.wantOK("Remove(moved)", w.dir.Remove(w.ctx, "moved"))
		w.wantOK("RemoveAll(absl)", w.dir.RemoveAll(w.ctx, "absl"))
		w.wantOK("RemoveAll(d)", w.dir.RemoveAll(w.ctx, "d"))
		w.intact("removing the links", before)
		if got := hostEntries(t, w.root); !slices.Equal(got, []string{"abf", "relf", "via", "victim"}) {
			t.Errorf("root holds %v after removing links", got)
		}
	})
}

type namedErr struct {
	name string
	err  error
}

// backendFollowing calls the backend's following methods on s.
func backendFollowing(w *world, s string) []namedErr {
	q := p(s)
	_, statErr := w.fs.Stat(w.ctx, q)
	_, dirErr := w.fs.ReadDir(w.ctx, q)
	_, subErr := w.fs.Sub(w.ctx, q)
	var out []namedErr
	for _, flag := range []int{os.O_RDONLY, os.O_WRONLY, os.O_RDWR | os.O_CREATE, os.O_WRONLY | os.O_TRUNC, os.O_WRONLY | os.O_APPEND} {
		f, err := w.fs.OpenFile(w.ctx, q, flag, 0o644)
		if err == nil {
			f.Close()
		}
		out = append(out, namedErr{"OpenFile(" + strconv.Itoa(flag) + ")", err})
	}
	return append(out,
		namedErr{"Stat", statErr},
		namedErr{"ReadDir", dirErr},
		namedErr{"Sub", subErr},
		namedErr{"Mkdir(x/new)", w.fs.Mkdir(w.ctx, p(s+"/new"), 0o755)},
		namedErr{"Chmod", w.fs.Chmod(w.ctx, q, 0o777)},
		namedErr{"Chtimes", w.fs.Chtimes(w.ctx, q, time.Unix(1, 0), time.Unix(1, 0))},
		namedErr{"Link(x/secret, y)", w.fs.Link(w.ctx, p(s+"/secret"), p("y"))},
		namedErr{"Rename(x/secret, y)", w.fs.Rename(w.ctx, p(s+"/secret"), p("y"), 0)},
		namedErr{"Rename(victim, x/v)", w.fs.Rename(w.ctx, p("victim"), p(s+"/v"), 0)},
		namedErr{"Remove(x/secret)", w.fs.Remove(w.ctx, p(s+"/secret"))},
	)
}

// TestAdvAbsoluteLinksNeverRerooted covers the second half of line 15 and pins
// the policy: an absolute target is never followed, even when it names a place
// inside the root by its host path, and it is never re-rooted at the root (as
// libpathrs does): "/victim" does not mean the root's victim.
func TestAdvAbsoluteLinksNeverRerooted(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("victim", insideData)
		w.link(w.host("victim"), "abin")
		w.link(w.root, "abroot")
		w.link("/victim", "rerooted")
		for _, s := range []string{"abin", "abroot/victim", "rerooted"} {
			got, err := w.dir.ReadFile(w.ctx, s)
			if advViaNamespace && s != "rerooted" {
				// A Namespace follows an absolute host path that names a place
				// in the mount to that very place (vfs.HostLinkResolver): the
				// same file, not a re-rooting ("/victim" is still refused).
				if err != nil || string(got) != insideData {
					t.Errorf("ReadFile(%s) through the namespace = %q, %v; want the file it names", s, got, err)
				}
			} else {
				w.wantCode("ReadFile("+s+")", err, vfs.CodeOutside)
				if len(got) > 0 {
					t.Errorf("ReadFile(%s) returned %q", s, got)
				}
			}
			// The backend itself never follows an absolute target.
			_, err = w.fs.Stat(w.ctx, p(s))
			w.wantCode("backend Stat("+s+")", err, vfs.CodeOutside)
		}
	})
}

// TestAdvTrailingSlashAfterLink covers line 18 (CVE-2026-39822): a trailing slash
// after a link to outside ("absl/", "absl/.") follows it, and is refused; calls
// that would otherwise not follow the link (Lstat, Readlink) follow it because of
// the slash and are refused too; Walk never lists the outside directory.
func TestAdvTrailingSlashAfterLink(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		dirLinks, _ := w.plantEscapes()
		before := w.outsideSnap()
		for _, l := range dirLinks {
			for _, s := range []string{l + "/", l + "/.", l + "//"} {
				for _, c := range guestCalls() {
					err := c.run(w.ctx, w.dir, s)
					switch {
					case slices.Contains(followingCalls, c.name), c.name == "Lstat", c.name == "Readlink":
						w.wantCode(c.name+"("+s+")", err, vfs.CodeOutside)
					case err != nil:
						w.noHostPath(c.name+"("+s+")", err)
					}
				}
				var seen []string
				err := w.dir.Walk(w.ctx, s, func(path string, _ fs.DirEntry, err error) error {
					seen = append(seen, path)
					return nil
				})
				if slices.ContainsFunc(seen, func(x string) bool { return strings.Contains(x, "secret") }) {
					t.Errorf("Walk(%s) listed the outside directory: %v (%v)", s, seen, err)
				}
				info, err := w.fs.Stat(w.ctx, p(s))
				w.wantCode("backend Stat("+s+")", err, vfs.CodeOutside)
				if err == nil && info.Mode.IsDir() {
					t.Errorf("backend Stat(%s) reached a directory", s)
				}
			}
		}
		w.intact("calls with a trailing slash", before)
	})
}

// TestAdvLinkChains covers line 19: a five-hop chain resolves when every hop stays
// inside; a chain where one hop leaves the root (even one that would come back
// in through the outside tree) is refused. A hop that names the root by its host
// path is refused by the backend, and followed by a Namespace to that same place.
func TestAdvLinkChains(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("data/f", "CHAIN")
		w.mkdir("sub")
		// All inside: c1 -> c2 -> sub/c3 -> ../c4 -> sub/../c5 -> data/f.
		w.link("c2", "c1")
		w.link("sub/c3", "c2")
		w.link("../c4", "sub/c3")
		w.link("sub/../c5", "c4")
		w.link("data/f", "c5")
		if got, err := w.dir.ReadFile(w.ctx, "c1"); err != nil || string(got) != "CHAIN" {
			t.Errorf("ReadFile(c1) through five inside hops = %q, %v; want CHAIN", got, err)
		}
		// Hop 3 leaves the root and hop 4 comes back in.
		w.link("e2", "e1")
		w.link("sub/e3", "e2")
		w.link("../../outside/e4", "sub/e3")
		must(t, os.Symlink("../root/e5", w.out("e4")))
		w.link("data/f", "e5")
		// The last hop leaves.
		w.link("x2", "x1")
		w.link("x3", "x2")
		w.link("x4", "x3")
		w.link("x5", "x4")
		w.link("../outside/secret", "x5")
		// Hop 2 names the root by its absolute host path.
		w.link("y2", "y1")
		w.link(w.host("y3"), "y2")
		w.link("data/f", "y3")
		chains := []string{"e1", "x1", "y1"}
		if advViaNamespace {
			// Through a Namespace, hop 2 of y1 (the root named by its host path)
			// leads to the same place inside, and is followed.
			chains = chains[:2]
			if got, err := w.dir.ReadFile(w.ctx, "y1"); err != nil || string(got) != "CHAIN" {
				t.Errorf("ReadFile(y1) through the namespace = %q, %v; want CHAIN", got, err)
			}
		}
		for _, s := range chains {
			got, err := w.dir.ReadFile(w.ctx, s)
			w.wantCode("ReadFile("+s+")", err, vfs.CodeOutside)
			if len(got) > 0 {
				t.Errorf("ReadFile(%s) = %q", s, got)
			}
			_, err = w.dir.Stat(w.ctx, s)
			w.wantCode("Stat("+s+")", err, vfs.CodeOutside)
		}
	})
}

// TestAdvLinkLoops covers line 20: a->a, a->b->a, loops through directories and a
// link into itself fail with too_many_links for every following call, and every
// call returns (the resolvers stop after vfs.MaxSymlinks links).
func TestAdvLinkLoops(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("victim", insideData)
		w.link("a", "a")
		w.link("b2", "b1")
		w.link("b1", "b2")
		w.link("../d2/l", "d1/l")
		w.link("../d1/l", "d2/l")
		w.link("x/y", "x")
		w.link("d1/l/z", "viadir")
		before := snap(t, w.tmp)
		// Through a loop as an intermediate component, every call fails.
		for _, s := range []string{"a/f", "b2/f/g", "d1/l/f", "x/f", "viadir/f"} {
			for _, c := range guestCalls() {
				w.wantCode(c.name+"("+s+")", c.run(w.ctx, w.dir, s), vfs.CodeTooManyLinks)
			}
		}
		// As the final component, every call that follows it fails.
		for _, s := range []string{"a", "b1", "d1/l", "x", "viadir"} {
			for _, c := range guestCalls() {
				if slices.Contains(followingCalls, c.name) {
					w.wantCode(c.name+"("+s+")", c.run(w.ctx, w.dir, s), vfs.CodeTooManyLinks)
				}
			}
		}
		if d := before.diff(snap(t, w.tmp)); len(d) > 0 {
			t.Errorf("calls through loops changed the host: %v", d)
		}
	})
}

// TestAdvSymlinkLimit covers line 21 and documents the limit: a resolution
// follows at most vfs.MaxSymlinks (40) links, the kernel's own limit, with both
// resolvers: 9 and 40 links resolve, 41 fail with too_many_links.
func TestAdvSymlinkLimit(t *testing.T) {
	if vfs.MaxSymlinks != 40 {
		t.Fatalf("vfs.MaxSymlinks = %d; the physical backend documents the kernel's 40", vfs.MaxSymlinks)
	}
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("f", "END")
		w.link("f", "l0") // l(n) is a chain of n+1 links
		for i := 1; i <= 41; i++ {
			w.link("l"+strconv.Itoa(i-1), "l"+strconv.Itoa(i))
		}
		for links, ok := range map[int]bool{1: true, 9: true, 40: true, 41: false, 42: false} {
			s := "l" + strconv.Itoa(links-1)
			got, err := w.dir.ReadFile(w.ctx, s)
			if ok {
				if err != nil || string(got) != "END" {
					t.Errorf("ReadFile through %d links = %q, %v; want END", links, got, err)
				}
			} else {
				w.wantCode("ReadFile through "+strconv.Itoa(links)+" links", err, vfs.CodeTooManyLinks)
			}
		}
		// Intermediate links count too: "self -> ." 40 and 41 times.
		w.link(".", "self")
		for n, ok := range map[int]bool{40: true, 41: false} {
			s := strings.Repeat("self/", n) + "f"
			got, err := w.dir.ReadFile(w.ctx, s)
			if ok && (err != nil || string(got) != "END") {
				t.Errorf("ReadFile(self/ x%d f) = %q, %v; want END", n, got, err)
			}
			if !ok {
				w.wantCode("ReadFile(self/ x"+strconv.Itoa(n)+" f)", err, vfs.CodeTooManyLinks)
			}
		}
	})
}

// TestAdvDanglingLinks covers line 22: dangling links and deep dangling chains
// are not_found to open and stat; MkdirAll through them is not_a_directory (or,
// when the target lies outside, path_outside_sandbox) and never creates the
// link's target, inside or outside.
func TestAdvDanglingLinks(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.link("nothere", "dang")
		w.link("dd2", "dd1")
		w.link("dd3", "dd2")
		w.link("missing/x", "dd3")
		w.link("../outside/newdir", "dangout")
		w.link(w.out("newdir2"), "dangabs")
		w.link("../../outside/newdir3", "d/dangout")
		before := snap(t, w.tmp)
		for _, s := range []string{"dang", "dd1", "dd2"} {
			_, err := w.dir.ReadFile(w.ctx, s)
			w.wantCode("ReadFile("+s+")", err, vfs.CodeNotFound)
			_, err = w.dir.Stat(w.ctx, s)
			w.wantCode("Stat("+s+")", err, vfs.CodeNotFound)
			_, err = w.dir.Open(w.ctx, s, os.O_RDONLY, 0)
			w.wantCode("Open("+s+")", err, vfs.CodeNotFound)
			w.wantCode("MkdirAll("+s+")", w.dir.MkdirAll(w.ctx, s), vfs.CodeNotDir)
			w.wantCode("MkdirAll("+s+"/sub)", w.dir.MkdirAll(w.ctx, s+"/sub"), vfs.CodeNotDir, vfs.CodeNotFound)
			w.wantCode("CreateDir("+s+")", func() error { _, err := w.dir.CreateDir(w.ctx, s); return err }(), vfs.CodeExists)
		}
		for _, s := range []string{"dangout", "dangabs", "d/dangout"} {
			w.wantCode("MkdirAll("+s+")", w.dir.MkdirAll(w.ctx, s), vfs.CodeOutside, vfs.CodeNotDir)
			w.wantCode("MkdirAll("+s+"/sub)", w.dir.MkdirAll(w.ctx, s+"/sub"), vfs.CodeOutside)
			w.wantCode("backend Mkdir("+s+"/sub)", w.fs.Mkdir(w.ctx, p(s+"/sub"), 0o755), vfs.CodeOutside)
			_, err := w.dir.Stat(w.ctx, s)
			w.wantCode("Stat("+s+")", err, vfs.CodeOutside)
		}
		if d := before.diff(snap(t, w.tmp)); len(d) > 0 {
			t.Errorf("calls through dangling links changed the host: %v", d)
		}
	})
}

// TestAdvCreateThroughDanglingLink covers line 23 and pins the policy: O_CREATE
// through a dangling link whose target lies outside fails with
// path_outside_sandbox and creates nothing, for every creating call; through a
// dangling link that stays inside it creates the target inside (as open(2) and
// os.Root do; the link is kept), while O_CREATE|O_EXCL (CreateFile) refuses the
// existing link.
func TestAdvCreateThroughDanglingLink(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.link("../outside/new", "dangle")
		w.link(w.out("new"), "dangabs")
		w.link("../../outside/new", "d/dangle")
		w.link("x/../../outside/new", "dotdot") // x does not exist
		w.mkdir("x")
		before := snap(t, w.tmp)
		for _, s := range []string{"dangle", "dangabs", "d/dangle", "dotdot"} {
			for _, c := range guestCalls() {
				switch c.name {
				case "WriteFile", "Append", "Open(O_RDWR|O_CREATE)", "Chmod", "Chtimes", "Stat":
					w.wantCode(c.name+"("+s+")", c.run(w.ctx, w.dir, s), vfs.CodeOutside)
				case "CreateFile", "CreateDir", "Symlink(link)":
					w.wantCode(c.name+"("+s+")", c.run(w.ctx, w.dir, s), vfs.CodeExists)
				}
			}
			for _, flag := range []int{os.O_WRONLY | os.O_CREATE, os.O_RDWR | os.O_CREATE | os.O_TRUNC, os.O_WRONLY | os.O_CREATE | os.O_APPEND} {
				_, err := w.fs.OpenFile(w.ctx, p(s), flag, 0o644)
				w.wantCode("backend OpenFile("+s+", "+strconv.Itoa(flag)+")", err, vfs.CodeOutside)
			}
			_, err := w.fs.OpenFile(w.ctx, p(s), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			w.wantCode("backend OpenFile("+s+", O_EXCL)", err, vfs.CodeExists)
		}
		if d := before.diff(snap(t, w.tmp)); len(d) > 0 {
			t.Errorf("creating through escaping dangling links changed the host: %v", d)
		}
		if _, err := os.Lstat(w.out("new")); err == nil {
			t.Fatal("outside/new was created")
		}

		// Inside: created at the target.
		w.link("inside-new", "dangle-in")
		w.link("x/inside2", "dangle-in2")
		_, err := w.dir.CreateFile(w.ctx, "dangle-in")
		w.wantCode("CreateFile(dangle-in)", err, vfs.CodeExists)
		if _, err := os.Lstat(w.host("inside-new")); err == nil {
			t.Error("CreateFile (O_EXCL) through a dangling link created its target")
		}
		w.wantOK("WriteFile(dangle-in)", w.dir.WriteFile(w.ctx, "dangle-in", []byte("via link"), 0o644))
		if b, err := os.ReadFile(w.host("inside-new")); err != nil || string(b) != "via link" {
			t.Errorf("inside-new = %q, %v; want the data written through dangle-in", b, err)
		}
		if fi, err := os.Lstat(w.host("dangle-in")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("dangle-in is no longer a link: %v, %v", fi, err)
		}
		h, err := w.dir.Open(w.ctx, "dangle-in2", os.O_WRONLY|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatalf("Open(dangle-in2, O_CREATE): %v", err)
		}
		h.Write([]byte("two"))
		h.Close()
		if b, err := os.ReadFile(w.host("x/inside2")); err != nil || string(b) != "two" {
			t.Errorf("x/inside2 = %q, %v", b, err)
		}
	})
}

// TestAdvDotDotAfterLink covers line 24: ".." inside a link target is physical
// (a -> b/c, x -> a/../t reads b/t), while ".." in a guest path is lexical
// ("a/../t" is "t").
func TestAdvDotDotAfterLink(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("b/t", "B/T")
		w.mkdir("b/c")
		w.file("t", "ROOT/T")
		w.link("b/c", "a")
		w.link("a/../t", "x")
		w.link("../../a/../t", "b/c/y")
		for _, s := range []string{"x", "b/c/y"} {
			if got, err := w.dir.ReadFile(w.ctx, s); err != nil || string(got) != "B/T" {
				t.Errorf("ReadFile(%s) = %q, %v; want b/t (physical ..)", s, got, err)
			}
		}
		if got, err := w.dir.ReadFile(w.ctx, "a/../t"); err != nil || string(got) != "ROOT/T" {
			t.Errorf("ReadFile(a/../t) = %q, %v; want t (lexical ..)", got, err)
		}
		// From a Sub, a physical ".." above the Sub is refused.
		w.link("c/../../t", "b/up")
		sub, err := w.dir.Sub(w.ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		_, err = sub.ReadFile(w.ctx, "up")
		w.wantCode("Sub(b).ReadFile(up -> c/../../t)", err, vfs.CodeOutside)
	})
}

// TestAdvLinkToParent covers line 25: with d/d -> "..", "d/d/new" is the root's
// new; a link to ".." at the root itself leads nowhere (path_outside_sandbox) and
// creates nothing beside the root.
func TestAdvLinkToParent(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.mkdir("d")
		w.link("..", "d/d")
		if _, err := w.dir.CreateDir(w.ctx, "d/d/new"); err != nil {
			t.Fatalf("CreateDir(d/d/new): %v", err)
		}
		if fi, err := os.Stat(w.host("new")); err != nil || !fi.IsDir() {
			t.Errorf("d/d/new did not create the root's new: %v", err)
		}
		w.wantOK("WriteFile(d/d/d/d/d/f)", w.dir.WriteFile(w.ctx, "d/d/d/d/d/f", []byte("F"), 0o644))
		if b, err := os.ReadFile(w.host("d/f")); err != nil || string(b) != "F" {
			t.Errorf("d/f = %q, %v", b, err)
		}
		w.link("..", "top")
		w.link("../..", "d/top2")
		before, tmpNames := w.outsideSnap(), hostEntries(t, w.tmp)
		for _, s := range []string{"top/new", "top/outside/secret", "d/top2/x", "top", "d/top2"} {
			_, err := w.dir.CreateDir(w.ctx, s)
			w.wantCode("CreateDir("+s+")", err, vfs.CodeOutside, vfs.CodeExists)
			_, err = w.dir.Stat(w.ctx, s)
			w.wantCode("Stat("+s+")", err, vfs.CodeOutside)
			_, err = w.dir.List(w.ctx, s)
			w.wantCode("List("+s+")", err, vfs.CodeOutside)
			w.wantCode("WriteFile("+s+"/f)", w.dir.WriteFile(w.ctx, s+"/f", nil, 0o644), vfs.CodeOutside)
		}
		w.intact("calls through top -> ..", before)
		if got := hostEntries(t, w.tmp); !slices.Equal(got, tmpNames) {
			t.Errorf("the root's parent changed: %v, was %v", got, tmpNames)
		}
	})
}

// TestAdvEscapingSymlinkCreation covers line 26: creating a link whose target is
// absolute or climbs above the root is refused (path_outside_sandbox), through a
// Dir, a Sub and the backend, also when the link's directory is reached through
// a link that makes the climb look shorter than it is.
func TestAdvEscapingSymlinkCreation(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.mkdir("d/e")
		w.link("../..", "d/e/top") // d/e/top is the root, two levels up from d/e
		before := snap(t, w.tmp)
		for _, tc := range [][2]string{
			{"/etc/passwd", "x"},
			{w.outside, "x"},
			{"../outside", "x"},
			{"../../outside", "d/x"},
			{"e/../../../outside", "d/x"},
			{"../../x", "d/e/top/l"}, // lexically d/x, physically above the root
			{"../x", "d/e/top/l"},
		} {
			w.wantCode("Symlink("+tc[0]+", "+tc[1]+")", w.dir.Symlink(w.ctx, tc[0], tc[1]), vfs.CodeOutside)
			w.wantCode("backend Symlink("+tc[0]+", "+tc[1]+")", w.fs.Symlink(w.ctx, tc[0], p(tc[1])), vfs.CodeOutside)
		}
		sub, err := w.dir.Sub(w.ctx, "d")
		if err != nil {
			t.Fatal(err)
		}
		w.wantCode("Sub(d).Symlink(../x)", sub.Symlink(w.ctx, "../x", "l"), vfs.CodeOutside)
		w.wantCode("Sub(d).Symlink(../../x, e/l)", sub.Symlink(w.ctx, "../../x", "e/l"), vfs.CodeOutside)
		// e/top is the root, above the Sub: the link's directory is out of reach.
		w.wantCode("Sub(d).Symlink(x, e/top/l)", sub.Symlink(w.ctx, "x", "e/top/l"), vfs.CodeOutside)
		if d := before.diff(snap(t, w.tmp)); len(d) > 0 {
			t.Errorf("refused symlink creation changed the host: %v", d)
		}
		// Inside targets are fine.
		w.wantOK("Symlink(e, d/l)", w.dir.Symlink(w.ctx, "e", "d/l"))
		w.wantOK("Symlink(../d, d/e/l)", w.dir.Symlink(w.ctx, "../d", "d/e/l"))
	})
}

// TestAdvReadlinkNoHostPath covers line 27: Readlink returns the stored relative
// text; a planted absolute target is never shown (path_outside_sandbox), through
// the Dir, its io/fs and afero views and the backend, and no error names a host
// path.
func TestAdvReadlinkNoHostPath(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.plantEscapes()
		w.link("victim", "in")
		for _, s := range []string{"absl", "abf"} {
			got, err := w.dir.Readlink(w.ctx, s)
			w.wantCode("Readlink("+s+")", err, vfs.CodeOutside)
			if got != "" {
				t.Errorf("Readlink(%s) = %q", s, got)
			}
			got, err = w.fs.Readlink(w.ctx, p(s))
			w.wantCode("backend Readlink("+s+")", err, vfs.CodeOutside)
			if got != "" {
				t.Errorf("backend Readlink(%s) = %q", s, got)
			}
			if got, err := fs.ReadLink(w.dir.FS(), s); err == nil || strings.Contains(got+err.Error(), w.tmp) {
				t.Errorf("FS ReadLink(%s) = %q, %v", s, got, err)
			}
		}
		for s, want := range map[string]string{"rell": "../outside", "in": "victim", "d/rell": "../../outside"} {
			got, err := w.dir.Readlink(w.ctx, s)
			if err != nil || got != want {
				t.Errorf("Readlink(%s) = %q, %v; want the stored text %q", s, got, err, want)
			}
		}
		sub, err := w.dir.Sub(w.ctx, "d")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := sub.Readlink(w.ctx, "rell"); err != nil || got != "../../outside" || strings.Contains(got, w.tmp) {
			t.Errorf("Sub(d).Readlink(rell) = %q, %v; want the stored text", got, err)
		}
		// Every error of every call on every planted link is free of host paths.
		for _, s := range []string{"absl", "abf", "rell", "relf", "absl/secret", "rell/dir/f"} {
			for _, c := range guestCalls() {
				w.noHostPath(c.name+"("+s+")", c.run(w.ctx, w.dir, s))
			}
		}
	})
}

// TestAdvChmodChtimesOnLinks covers line 28: Chmod and Chtimes on a link name act
// on its in-root target (the link is followed, as chmod(2) does) and fail on a
// link to outside, whose target keeps its mode and times. (On this kernel
// fchmodat2 exists; without it the backend changes the mode through the
// resolved handle's /proc/self/fd link, never by name: there is no by-name path
// to test.)
func TestAdvChmodChtimesOnLinks(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.plantEscapes()
		w.link("victim", "lin")
		w.wantOK("Chmod(lin)", w.dir.Chmod(w.ctx, "lin", 0o600))
		if fi, err := os.Stat(w.host("victim")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("victim mode = %v, %v; want 0600 (Chmod through lin)", fi.Mode(), err)
		}
		when := time.Unix(1234567890, 0)
		w.wantOK("Chtimes(lin)", w.dir.Chtimes(w.ctx, "lin", when, when))
		if fi, err := os.Stat(w.host("victim")); err != nil || !fi.ModTime().Equal(when) {
			t.Errorf("victim mtime = %v, %v; want %v", fi.ModTime(), err, when)
		}
		before := w.outsideSnap()
		for _, s := range []string{"abf", "relf", "d/relf", "absl", "rell", "absl/secret"} {
			w.wantCode("Chmod("+s+")", w.dir.Chmod(w.ctx, s, 0o777), vfs.CodeOutside)
			w.wantCode("Chtimes("+s+")", w.dir.Chtimes(w.ctx, s, when, when), vfs.CodeOutside)
		}
		w.intact("Chmod and Chtimes through escaping links", before)
	})
}
