//go:build linux

package physical

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

// locString renders a Resolve outcome: the error's code, or path, Found and type.
func locString(loc vfs.Location, err error) string {
	if err != nil {
		return "error " + string(vfs.CodeOf(err))
	}
	return fmt.Sprintf("%q found=%v type=%v resolved=%v", loc.Path.String(), loc.Found, loc.Type, loc.Path.IsResolved())
}

// TestResolveDifferential compares Resolve with vfs.ResolveBackend (the shared
// resolver over this backend's Lstat and Readlink, one component at a time) on
// random trees of directories, files and links planted by the host (relative,
// absolute, escaping, dangling, looping, with ".." and trailing slashes in
// targets), for every path of up to three components over the tree's names, both
// ways of treating the final link, each resolver and each symlink policy.
func TestResolveDifferential(t *testing.T) {
	configs := []struct {
		name string
		opts []Option
	}{
		{"openat2", []Option{WithResolver(ResolverOpenat2)}},
		{"portable", []Option{WithResolver(ResolverPortable)}},
		{"openat2-reject", []Option{WithResolver(ResolverOpenat2), WithSymlinks(SymlinksReject)}},
		{"portable-reject", []Option{WithResolver(ResolverPortable), WithSymlinks(SymlinksReject)}},
	}
	names := []string{"a", "b", "c", "l", "m"}
	targets := []string{"a", "b/c", "../x", "..", ".", "a/..", "b/../a", "/abs", "missing", "a/missing",
		"l", "m/", "b/c/..", "../../a", "c/f", "a/f/", "self/a"}
	compared := 0
	for seed := range uint64(12) {
		h := newHost(t)
		rng := rand.New(rand.NewPCG(seed, 7))
		// A tree of depth 3 over names: each entry a directory, a file or a link.
		var mk func(dir string, depth int)
		mk = func(dir string, depth int) {
			for _, n := range names {
				host := filepath.Join(dir, n)
				switch k := rng.IntN(10); {
				case k < 3 && depth < 3:
					if err := os.Mkdir(host, 0o755); err != nil {
						t.Fatal(err)
					}
					mk(host, depth+1)
				case k < 5:
					h.writeHost(host, n)
				case k < 8:
					if err := os.Symlink(targets[rng.IntN(len(targets))], host); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		mk(h.root, 0)
		if err := os.Symlink(".", filepath.Join(h.root, "self")); err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, a := range names {
			paths = append(paths, a, a+"/")
			for _, b := range names {
				paths = append(paths, a+"/"+b, a+"/"+b+"/")
				for _, c := range names {
					paths = append(paths, a+"/"+b+"/"+c)
				}
			}
		}
		paths = append(paths, ".", "self/a/b", "self/self/l/m", "missing/x")
		for _, c := range configs {
			f, err := New(h.root, c.opts...)
			if err != nil {
				if vfs.CodeOf(err) == vfs.CodeNotSupported {
					t.Logf("%s: %v", c.name, err)
					continue
				}
				t.Fatal(err)
			}
			reject := strings.HasSuffix(c.name, "-reject")
			for _, s := range paths {
				for _, follow := range []bool{false, true} {
					q := P(s)
					got, gerr := f.Resolve(t.Context(), q, follow)
					if gerr != nil {
						checkErr(t, gerr, h)
					}
					// The shared resolver follows links itself, which SymlinksReject
					// refuses: there only the backend's own calls are the reference.
					if !reject {
						want, werr := vfs.ResolveBackend(t.Context(), f, q, follow, "resolve")
						if werr == nil {
							want.Path = want.Path.WithoutDirMark()
						}
						if g, w := locString(got, gerr), locString(want, werr); g != w {
							t.Errorf("seed %d %s: Resolve(%s, follow=%v) = %s; vfs.ResolveBackend: %s", seed, c.name, s, follow, g, w)
						}
					}
					// Stat (following) or Lstat agrees on the outcome.
					var info vfs.Info
					var serr error
					if follow {
						info, serr = f.Stat(t.Context(), q)
					} else {
						info, serr = f.Lstat(t.Context(), q)
					}
					switch {
					case gerr != nil:
						if vfs.CodeOf(gerr) != vfs.CodeOf(serr) {
							t.Errorf("seed %d %s: Resolve(%s, follow=%v) = %s; Stat/Lstat: %s", seed, c.name, s, follow, errText(gerr), errText(serr))
						}
					case !got.Found:
						if vfs.CodeOf(serr) != vfs.CodeNotFound {
							t.Errorf("seed %d %s: Resolve(%s, follow=%v) found nothing; Stat/Lstat: %s", seed, c.name, s, follow, errText(serr))
						}
					case serr != nil || info.Mode.Type() != got.Type:
						t.Errorf("seed %d %s: Resolve(%s, follow=%v) found type %v; Stat/Lstat: %v, %s", seed, c.name, s, follow, got.Type, info.Mode.Type(), errText(serr))
					}
					// ResolveStat: the same location, and Stat's or Lstat's Info.
					sloc, sinfo, rserr := f.ResolveStat(t.Context(), q, follow)
					if g, w := locString(sloc, rserr), locString(got, gerr); g != w {
						t.Errorf("seed %d %s: ResolveStat(%s, follow=%v) = %s; Resolve: %s", seed, c.name, s, follow, g, w)
					}
					if rserr == nil && sloc.Found && sinfo != info {
						t.Errorf("seed %d %s: ResolveStat(%s, follow=%v) info %+v; Stat/Lstat: %+v", seed, c.name, s, follow, sinfo, info)
					}
					compared++
				}
			}
			f.Close()
		}
	}
	t.Logf("%d resolutions compared with vfs.ResolveBackend and Stat/Lstat", compared)
}

// checkErr fails t if err is not a *vfs.Error or names a host path.
func checkErr(t *testing.T, err error, h *host) {
	t.Helper()
	if _, ok := err.(*vfs.Error); !ok {
		t.Errorf("error %v is a %T, not a *vfs.Error", err, err)
	}
	if strings.Contains(err.Error(), h.base) {
		t.Errorf("error %q names a host path", err)
	}
}

// countOpenat2 replaces openat2Call for the rest of t with one that counts calls.
func countOpenat2(t *testing.T) *int {
	n := new(int)
	orig := openat2Call
	openat2Call = func(dirfd int, path string, how *unix.OpenHow) (int, error) {
		*n++
		return orig(dirfd, path, how)
	}
	t.Cleanup(func() { openat2Call = orig })
	return n
}

// TestResolveFastPath checks the cost of Resolve with openat2 in system calls to
// the resolver (not time): a path with no symlink on it takes one openat2, a
// missing final name one more (its parent), a name directly in the root none
// (fstatat); only a path with a link on it walks, and still gets the right answer.
func TestResolveFastPath(t *testing.T) {
	h := newHost(t)
	deep := "d1/d2/d3/d4/d5/d6/d7"
	if err := os.MkdirAll(h.in(deep), 0o755); err != nil {
		t.Fatal(err)
	}
	h.writeHost(h.in(deep+"/f"), "F")
	h.writeHost(h.in("top"), "T")
	h.plant("d1/d2", "l")
	f := newAt(t, h.root, WithResolver(ResolverOpenat2))
	ctx := t.Context()
	n := countOpenat2(t)
	for _, c := range []struct {
		path   string
		follow bool
		calls  int // openat2 calls; -1: more than one (a walk)
		want   string
		found  bool
		typ    fs.FileMode
	}{
		{deep + "/f", true, 1, deep + "/f", true, 0},
		{deep + "/f", false, 1, deep + "/f", true, 0},
		{deep, true, 1, deep, true, fs.ModeDir},
		{deep + "/", false, 1, deep, true, fs.ModeDir},
		{deep + "/new", true, 2, deep + "/new", false, 0},
		{"top", true, 0, "top", true, 0},
		{"newtop", true, 0, "newtop", false, 0},
		{"l", false, 0, "l", true, fs.ModeSymlink},
		{"l/d3/d4", true, -1, "d1/d2/d3/d4", true, fs.ModeDir},
	} {
		*n = 0
		loc, err := f.Resolve(ctx, P(c.path), c.follow)
		if err != nil {
			t.Errorf("Resolve(%s): %v", c.path, err)
			continue
		}
		if loc.Path.String() != c.want || loc.Found != c.found || loc.Type != c.typ || !loc.Path.IsResolved() {
			t.Errorf("Resolve(%s, %v) = %s; want %q found=%v type=%v", c.path, c.follow, locString(loc, nil), c.want, c.found, c.typ)
		}
		switch {
		case c.calls >= 0 && *n != c.calls:
			t.Errorf("Resolve(%s, %v) made %d openat2 calls; want %d", c.path, c.follow, *n, c.calls)
		case c.calls < 0 && *n < 1:
			t.Errorf("Resolve(%s, %v) made %d openat2 calls; want the fast try first", c.path, c.follow, *n)
		}
	}
}

// TestResolveOneFilesystem checks that Resolve refuses a mount crossing under
// WithOneFilesystem as Lstat does. /proc is the mount crossed: a root at / with
// /proc beneath it.
func TestResolveOneFilesystem(t *testing.T) {
	var root, proc unix.Stat_t
	if unix.Stat("/", &root) != nil || unix.Stat("/proc/self", &proc) != nil || root.Dev == proc.Dev {
		t.Skip("no /proc mount beneath /")
	}
	for _, r := range resolvers {
		t.Run(r.name, func(t *testing.T) {
			f := newAt(t, "/", WithResolver(r.mode), WithOneFilesystem())
			for _, s := range []string{"proc", "proc/self", "proc/version"} {
				_, err := f.Resolve(t.Context(), P(s), false)
				_, lerr := f.Lstat(t.Context(), P(s))
				if s != "proc" {
					wantCode(t, err, vfs.CodeOutside, "Resolve(%s) across /proc", s)
				}
				if vfs.CodeOf(err) != vfs.CodeOf(lerr) {
					t.Errorf("Resolve(%s) = %v; Lstat says %v", s, errText(err), errText(lerr))
				}
			}
		})
	}
}

// TestResolvedMarkRace runs the Dir's way of acting against a swap between the
// decision and the action: resolve d/f, then read and append through the Resolved
// path while an attacker exchanges d (RENAME_EXCHANGE) with a link to prot, a
// directory inside the root that a policy would protect (so the confinement
// beneath the root does not stop it). Every call acts on d/f or fails (conflict,
// not_found): prot/f is never read, never written.
func TestResolvedMarkRace(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		for _, d := range []string{"d", "prot"} {
			if err := os.Mkdir(h.in(d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		h.writeHost(h.in("d/f"), "IN")
		h.writeHost(h.in("prot/f"), "PROTECTED")
		h.plant("prot", "evil")
		f := newAt(t, h.root, opts...)
		ctx := t.Context()
		stop := make(chan struct{})
		done := make(chan int)
		go func() {
			swaps := 0
			for {
				select {
				case <-stop:
					done <- swaps
					return
				default:
				}
				if unix.Renameat2(unix.AT_FDCWD, h.in("d"), unix.AT_FDCWD, h.in("evil"), unix.RENAME_EXCHANGE) == nil {
					swaps++
				}
			}
		}()
		leaks, reads, conflicts, resolved, fused := 0, 0, 0, 0, 0
		rounds := 2000
		if os.Getenv("CAPFS_STRESS") != "" {
			rounds = 50_000
		}
		for i := 0; i < rounds; i++ {
			loc, err := f.Resolve(ctx, P("d/f"), true)
			if err != nil || loc.Path.String() != "d/f" {
				continue // resolved through the link: a Dir would decide on prot/f
			}
			resolved++
			if r, err := f.OpenFile(ctx, loc.Path, os.O_RDONLY, 0); err == nil {
				buf := make([]byte, 16)
				k, _ := r.Read(buf)
				r.Close()
				reads++
				if strings.HasPrefix(string(buf[:k]), "PROTECTED") {
					leaks++
				}
			} else if vfs.CodeOf(err) == vfs.CodeConflict {
				conflicts++
			}
			if w, err := f.OpenFile(ctx, loc.Path, os.O_WRONLY|os.O_APPEND, 0); err == nil {
				w.Write([]byte("."))
				w.Close()
			}
			// The fused read: decided on d/f, it opens what was decided on.
			r, _, err := f.ResolveOpen(ctx, P("d/f"), func(l vfs.Location) error {
				if l.Path.String() != "d/f" {
					return vfs.NewError(vfs.CodePermission, "open", P("d/f"), "decided elsewhere")
				}
				return nil
			})
			if err == nil {
				buf := make([]byte, 16)
				k, _ := r.Read(buf)
				r.Close()
				fused++
				if strings.HasPrefix(string(buf[:k]), "PROTECTED") {
					leaks++
				}
			}
		}
		close(stop)
		swaps := <-done
		t.Logf("physical resolved-mark race: %d raced operations (%d resolutions to d/f, %d reads, %d conflicts, %d ResolveOpen reads, appends), %d swaps, %d leaks",
			rounds+3*resolved, resolved, reads, conflicts, fused, swaps, leaks)
		if leaks != 0 {
			t.Errorf("read prot/f %d times through the Resolved path d/f", leaks)
		}
		if data, err := os.ReadFile(h.in("prot/f")); err != nil || string(data) != "PROTECTED" {
			t.Errorf("prot/f = %q, %v: written through the Resolved path d/f", data, err)
		}
	})
}

// TestLocate checks that a Sub reports where its directory is now, relative to
// the root of the FS New returned: after renames of its directory and of that
// root, for nested Subs, for names a kernel path shows ambiguously (a newline, a
// " (deleted)" suffix), with both ways of finding the name (the kernel's
// /proc/self/fd names and the climb of ".."); and not_found once it is moved out
// or removed.
func TestLocate(t *testing.T) {
	for _, how := range []string{"proc", "climb"} {
		t.Run(how, func(t *testing.T) {
			if how == "climb" {
				orig := procNames
				procNames = func(int, int) (string, error) { return "", errNoName }
				t.Cleanup(func() { procNames = orig })
			}
			eachResolver(t, func(t *testing.T, opts ...Option) { testLocate(t, opts...) })
		})
	}
}

func testLocate(t *testing.T, opts ...Option) {
	h := newHost(t)
	ctx := t.Context()
	if err := os.MkdirAll(h.in("a/b/c"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newAt(t, h.root, opts...)
	locate := func(b vfs.Backend) (string, error) {
		l, ok := b.(vfs.Locator)
		if !ok {
			t.Fatalf("%T is not a vfs.Locator", b)
		}
		q, err := l.Locate(ctx)
		if err != nil {
			return "", err
		}
		if q.IsResolved() {
			t.Errorf("Locate returned %s with the Resolved mark", q)
		}
		return q.String(), nil
	}
	want := func(b vfs.Backend, w string, when string) {
		t.Helper()
		got, err := locate(b)
		if err != nil || got != w {
			t.Errorf("%s: Locate = %q, %v; want %q", when, got, errText(err), w)
		}
	}
	want(f, ".", "the FS New returned")
	sb, err := f.Sub(ctx, P("a/b"))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.(*FS).Close()
	want(sb, "a/b", "Sub(a/b)")
	sc, err := sb.Sub(ctx, P("c"))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.(*FS).Close()
	want(sc, "a/b/c", "Sub(a/b).Sub(c)")
	top, err := f.Sub(ctx, vfs.Root)
	if err != nil {
		t.Fatal(err)
	}
	defer top.(*FS).Close()
	want(top, ".", "Sub(.)")

	// The host moves a: rename a -> x/y.
	if err := os.Mkdir(h.in("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(h.in("a"), h.in("x/y")); err != nil {
		t.Fatal(err)
	}
	want(sb, "x/y/b", "after rename a -> x/y")
	want(sc, "x/y/b/c", "nested, after rename a -> x/y")
	// A guest moves it through the backend.
	if err := f.Rename(ctx, P("x/y/b"), P("x/b2"), 0); err != nil {
		t.Fatal(err)
	}
	want(sb, "x/b2", "after Rename(x/y/b, x/b2)")
	// The origin's own directory moves on the host: paths stay relative to it.
	moved := filepath.Join(h.base, "moved root")
	if err := os.Rename(h.root, moved); err != nil {
		t.Fatal(err)
	}
	h.root = moved
	want(sb, "x/b2", "after the root itself moved")
	want(sc, "x/b2/c", "nested, after the root itself moved")
	// Names the kernel's path shows ambiguously.
	odd := "n\nl (deleted)"
	if err := os.Mkdir(h.in(odd), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(h.in("x/b2"), h.in(odd+"/b3 (deleted)")); err != nil {
		t.Fatal(err)
	}
	want(sb, odd+"/b3 (deleted)", "under names with a newline and \" (deleted)\"")
	// Moved out of the origin's tree: not_found; back in: found again.
	if err := os.Rename(h.in(odd+"/b3 (deleted)"), filepath.Join(h.outside, "b")); err != nil {
		t.Fatal(err)
	}
	_, err = locate(sb)
	wantCode(t, err, vfs.CodeNotFound, "Locate after the directory moved out of the root")
	if err != nil {
		checkErr(t, err, h)
	}
	_, err = locate(sc)
	wantCode(t, err, vfs.CodeNotFound, "nested Locate after the directory moved out of the root")
	if err := os.Rename(filepath.Join(h.outside, "b"), h.in("back")); err != nil {
		t.Fatal(err)
	}
	want(sb, "back", "after it moved back in")
	// Removed: not_found.
	if err := os.Remove(h.in("back/c")); err != nil {
		t.Fatal(err)
	}
	_, err = locate(sc)
	wantCode(t, err, vfs.CodeNotFound, "Locate after the directory was removed")
	want(sb, "back", "its parent, still there")
	// A closed origin: closed.
	f.Close()
	_, err = locate(sb)
	wantCode(t, err, vfs.CodeClosed, "Locate after the origin was closed")
}

// TestLocateThroughNamespace checks that a Sub of a Namespace mounting the
// backend reports its place in the namespace.
func TestLocateThroughNamespace(t *testing.T) {
	h := newHost(t)
	ctx := t.Context()
	if err := os.MkdirAll(h.in("a/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newAt(t, h.root)
	ns := vfs.NewNamespace()
	if err := ns.Mount(vfs.MustParse("m"), f, vfs.MountOptions{}); err != nil {
		t.Fatal(err)
	}
	sub, err := ns.Sub(ctx, P("m/a/b"))
	if err != nil {
		t.Fatal(err)
	}
	l, ok := sub.(vfs.Locator)
	if !ok {
		t.Fatalf("the namespace's Sub %T is not a vfs.Locator", sub)
	}
	if err := os.Rename(h.in("a"), h.in("z")); err != nil {
		t.Fatal(err)
	}
	if q, err := l.Locate(ctx); err != nil || q.String() != "m/z/b" {
		t.Errorf("Locate = %q, %v; want m/z/b", q, err)
	}
}

// TestResolveOpen checks the fused read: decide sees the canonical location, a
// refusal opens nothing, the object opened is the one resolved, and errors are
// those of OpenFile, addressed to the guest's path.
func TestResolveOpen(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		if err := os.MkdirAll(h.in("d/e"), 0o755); err != nil {
			t.Fatal(err)
		}
		h.writeHost(h.in("d/e/f"), "F")
		h.plant("d/e", "le")
		h.plant("le/f", "lf")
		h.plant("../outside/secret", "esc")
		if err := unix.Mkfifo(h.in("fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		f := newAt(t, h.root, opts...)
		ctx := t.Context()
		var seen []string
		allow := func(l vfs.Location) error {
			seen = append(seen, fmt.Sprintf("%s %v %v", l.Path, l.Found, l.Path.IsResolved()))
			return nil
		}
		for _, c := range []struct{ path, canon, data string }{
			{"d/e/f", "d/e/f", "F"},
			{"lf", "d/e/f", "F"},
			{"le/f", "d/e/f", "F"},
		} {
			seen = nil
			h2, loc, err := f.ResolveOpen(ctx, P(c.path), allow)
			if err != nil {
				t.Errorf("ResolveOpen(%s): %v", c.path, err)
				continue
			}
			buf := make([]byte, 8)
			k, _ := h2.Read(buf)
			info, _ := h2.Stat()
			h2.Close()
			if string(buf[:k]) != c.data || loc.Path.String() != c.canon || len(seen) != 1 || seen[0] != c.canon+" true true" {
				t.Errorf("ResolveOpen(%s) read %q at %s, decide saw %q; want %q at %s", c.path, buf[:k], loc.Path, seen, c.data, c.canon)
			}
			if want := filepath.Base(c.path); info.Name != want {
				t.Errorf("ResolveOpen(%s): the file's name is %q, want %q", c.path, info.Name, want)
			}
		}
		// A refusal is returned as is and opens nothing.
		deny := vfs.NewError(vfs.CodePermission, "open", P("lf"), "denied")
		if _, _, err := f.ResolveOpen(ctx, P("lf"), func(vfs.Location) error { return deny }); err != deny {
			t.Errorf("ResolveOpen with a refusing decide: %v", err)
		}
		// Missing: decided (Found false), then not_found.
		seen = nil
		_, _, err := f.ResolveOpen(ctx, P("d/missing"), allow)
		wantCode(t, err, vfs.CodeNotFound, "ResolveOpen(d/missing)")
		if len(seen) != 1 || seen[0] != "d/missing false true" {
			t.Errorf("ResolveOpen(d/missing): decide saw %q", seen)
		}
		// Errors before a decision: no decision.
		seen = nil
		_, _, err = f.ResolveOpen(ctx, P("esc"), allow)
		wantCode(t, err, vfs.CodeOutside, "ResolveOpen(esc)")
		if err != nil {
			checkErr(t, err, h)
			if e := err.(*vfs.Error); e.Path != "esc" || e.Op != "open" {
				t.Errorf("ResolveOpen(esc) error addressed to %q, op %q", e.Path, e.Op)
			}
		}
		if len(seen) != 0 {
			t.Errorf("ResolveOpen(esc) asked for a decision: %q", seen)
		}
		// A FIFO is decided on, then refused without being opened.
		_, _, err = f.ResolveOpen(ctx, P("fifo"), allow)
		wantCode(t, err, vfs.CodeNotRegular, "ResolveOpen(fifo)")
		// A Resolved path with a link on it: conflict.
		_, _, err = f.ResolveOpen(ctx, P("le/f").Resolved(), allow)
		wantCode(t, err, vfs.CodeConflict, "ResolveOpen(le/f) Resolved")
	})
}

// TestResolveOpenFastPath checks that a fused read of a path with no symlink on
// it resolves once: one openat2.
func TestResolveOpenFastPath(t *testing.T) {
	h := newHost(t)
	if err := os.MkdirAll(h.in("d1/d2/d3"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.writeHost(h.in("d1/d2/d3/f"), "F")
	f := newAt(t, h.root, WithResolver(ResolverOpenat2))
	n := countOpenat2(t)
	r, _, err := f.ResolveOpen(t.Context(), P("d1/d2/d3/f"), func(vfs.Location) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if *n != 1 {
		t.Errorf("ResolveOpen made %d openat2 calls; want 1", *n)
	}
}

// TestResolveLocateRace runs Resolve and Locate while an attacker exchanges a
// directory with a link to another directory of the root (RENAME_EXCHANGE of d
// and evil -> prot) and moves a Sub's directory back and forth: every answer is a
// place the path or the directory really had at some moment (d/f or prot/f; a/s
// or b/s), or an error with a code the race allows; never another path.
func TestResolveLocateRace(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		for _, d := range []string{"d", "prot", "a", "b", "a/s"} {
			if err := os.Mkdir(h.in(d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		h.writeHost(h.in("d/f"), "IN")
		h.writeHost(h.in("prot/f"), "P")
		h.plant("prot", "evil")
		f := newAt(t, h.root, opts...)
		ctx := t.Context()
		sub, err := f.Sub(ctx, P("a/s"))
		if err != nil {
			t.Fatal(err)
		}
		defer sub.(*FS).Close()
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				unix.Renameat2(unix.AT_FDCWD, h.in("d"), unix.AT_FDCWD, h.in("evil"), unix.RENAME_EXCHANGE)
				from, to := h.in("a/s"), h.in("b/s")
				if i&1 == 1 {
					from, to = to, from
				}
				os.Rename(from, to)
			}
		}()
		rounds := 1000
		if os.Getenv("CAPFS_STRESS") != "" {
			rounds = 20_000
		}
		got := map[string]int{}
		for range rounds {
			for _, follow := range []bool{true, false} {
				loc, err := f.Resolve(ctx, P("d/f"), follow)
				switch {
				case err != nil:
					got["resolve error "+string(vfs.CodeOf(err))]++
				case !loc.Found:
					got["resolve missing "+loc.Path.String()]++
				default:
					got["resolve "+loc.Path.String()]++
				}
			}
			q, err := sub.(*FS).Locate(ctx)
			if err != nil {
				got["locate error "+string(vfs.CodeOf(err))]++
			} else {
				got["locate "+q.String()]++
			}
		}
		close(stop)
		<-done
		t.Logf("%v", got)
		allowed := map[string]bool{
			"resolve d/f": true, "resolve prot/f": true,
			// A walk that met a name while it was being exchanged.
			"resolve error not_found": true, "resolve error conflict": true,
			"resolve missing d/f": true, "resolve missing prot/f": true,
			"locate a/s": true, "locate b/s": true,
			"locate error conflict": true, "locate error not_found": true,
		}
		for k, n := range got {
			if !allowed[k] {
				t.Errorf("%d answers %q: not a place the path or the directory had", n, k)
			}
		}
		if got["resolve d/f"] == 0 || got["locate a/s"]+got["locate b/s"] == 0 {
			t.Errorf("no successful answer at all: %v", got)
		}
	})
}
