package vfstest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/capfs/capfs/vfs"
)

// testResolve checks Backend.Resolve and the Resolved path mark: the canonical
// location a path reaches (links followed as the operation would, ".." in link
// targets taken physically, THREATS 24), the errors it shares with the other calls
// (not_found, not_a_directory, too_many_links, path_outside_sandbox), agreement
// with vfs.ResolveBackend (the shared resolver over Lstat and Readlink), and that
// a backend given a Resolved path follows no symlink at all: where one stands on
// it, every call fails with conflict and changes nothing (THREATS 52-54: a swap
// between a Dir's decision and its action reaches nothing undecided).
func testResolve(t *testing.T, cfg Config) {
	t.Run("no-symlinks", func(t *testing.T) { resolveNoSymlinks(t, cfg) })

	t.Run("canonical", func(t *testing.T) { resolveCanonical(t, cfg) })

	t.Run("link-limit", func(t *testing.T) { resolveLinkLimit(t, cfg) })

	t.Run("escaping", func(t *testing.T) { resolveEscaping(t, cfg) })

	t.Run("differential", func(t *testing.T) { resolveDifferential(t, cfg) })

	t.Run("fused", func(t *testing.T) { resolveFused(t, cfg) })

	t.Run("resolved-mark", func(t *testing.T) { resolveResolvedMark(t, cfg) })

	t.Run("resolved-no-symlink", func(t *testing.T) { resolveResolvedNoSymlink(t, cfg) })

	t.Run("swap-after-resolve", func(t *testing.T) { resolveSwapAfterResolve(t, cfg) })
}

// rcase is one Resolve expectation: the canonical path, Found and Type, or an
// error code.
type rcase struct {
	path   string
	follow bool
	want   string
	found  bool
	typ    fs.FileMode
	code   vfs.Code
}

// resolveCases checks each case, that every result carries the Resolved mark,
// and that resolving the result again (Resolved, with the same follow) gives it
// back unchanged.
func (f *fx) resolveCases(cases []rcase) {
	f.t.Helper()
	for _, c := range cases {
		loc, err := f.b.Resolve(f.ctx, p(c.path), c.follow)
		what := fmt.Sprintf("Resolve(%s, follow=%v)", c.path, c.follow)
		if c.code != "" {
			if err == nil {
				f.t.Errorf("%s = %s; want %s", what, describeLoc(loc, nil), c.code)
			} else {
				f.wantCode(err, c.code, "%s", what)
			}
			continue
		}
		if !f.wantOK(err, "%s", what) {
			continue
		}
		got := describeLoc(loc, nil)
		want := describeLoc(vfs.Location{Path: p2(c.want), Found: c.found, Type: c.typ}, nil)
		if got != want {
			f.t.Errorf("%s = %s; want %s", what, got, want)
		}
		if !loc.Path.IsResolved() {
			f.t.Errorf("%s = %s without the Resolved mark", what, loc.Path)
			continue
		}
		again, err := f.b.Resolve(f.ctx, loc.Path, c.follow)
		if f.wantOK(err, "%s of its own result %s", what, loc.Path) && describeLoc(again, nil) != got {
			f.t.Errorf("%s of its own result = %s; want it unchanged: %s", what, describeLoc(again, nil), got)
		}
	}
}

// p2 is p, with "" for the root.
func p2(s string) vfs.Path {
	if s == "" {
		return vfs.Root
	}
	return p(s)
}

// describeLoc renders a Resolve outcome for comparison: the error's code, or the
// canonical path, Found and the type bits.
func describeLoc(loc vfs.Location, err error) string {
	if err != nil {
		return "error " + string(vfs.CodeOf(err))
	}
	s := loc.Path.String()
	if loc.Path.IsRoot() {
		s = "."
	}
	if !loc.Found {
		if loc.Type != 0 {
			return fmt.Sprintf("%q (missing, but Type %v)", s, loc.Type)
		}
		return fmt.Sprintf("%q (missing)", s)
	}
	return fmt.Sprintf("%q (%v)", s, loc.Type.Type())
}

// openErr opens q with flag and closes it, returning the error.
func (f *fx) openErr(q vfs.Path, flag int) error {
	h, err := f.b.OpenFile(f.ctx, q, flag, 0o644)
	if err == nil {
		err = h.Close()
	}
	return err
}

// readP reads the file q, failing the test on error.
func (f *fx) readP(q vfs.Path) []byte {
	f.t.Helper()
	data, err := ReadFile(f.ctx, f.b, q)
	if err != nil {
		f.t.Fatalf("ReadFile(%s): %v", q, err)
	}
	return data
}

// resolveNoSymlinks is testResolve's "no-symlinks" subtest.
func resolveNoSymlinks(t *testing.T, cfg Config) {
	f := newFx(t, cfg)
	f.seed("d/", "d/e/", "d/e/f=F", "g=G")
	f.resolveCases([]rcase{
		{path: ".", follow: true, want: "", found: true, typ: fs.ModeDir},
		{path: ".", follow: false, want: "", found: true, typ: fs.ModeDir},
		{path: "d", follow: true, want: "d", found: true, typ: fs.ModeDir},
		{path: "d/", follow: false, want: "d", found: true, typ: fs.ModeDir},
		{path: "d/e/f", follow: true, want: "d/e/f", found: true},
		{path: "d/e/f", follow: false, want: "d/e/f", found: true},
		{path: "g", follow: false, want: "g", found: true},
		{path: "new", follow: true, want: "new"},
		{path: "d/e/new", follow: false, want: "d/e/new"},
		{path: "d/e/new/", follow: true, want: "d/e/new"},
		{path: "missing/x", follow: true, code: vfs.CodeNotFound},
		{path: "d/missing/x", follow: false, code: vfs.CodeNotFound},
		{path: "g/x", follow: true, code: vfs.CodeNotDir},
		{path: "g/", follow: false, code: vfs.CodeNotDir},
		{path: "d/e/f/x", follow: false, code: vfs.CodeNotDir},
	})
}

// resolveCanonical is testResolve's "canonical" subtest.
func resolveCanonical(t *testing.T, cfg Config) {
	f := newFx(t, cfg, symlinks)
	f.seed("d/", "d/e/", "d/e/f=F", "b/", "b/c/", "b/t=BT", "t=T",
		"ld -> d", "le -> d/e", "lf -> d/e/f", "chain -> ld/e", "chain2 -> chain/f",
		"a -> b/c", "x -> a/../t", "up -> d/e/..", "d/e/back -> ../../b",
		"dangle -> d/newfile", "dd -> nodir/x", "loop1 -> loop2", "loop2 -> loop1",
		"self -> .", "d/e/fslash -> f/")
	f.resolveCases([]rcase{
		// Intermediate links are always followed.
		{path: "ld/e/f", follow: true, want: "d/e/f", found: true},
		{path: "ld/e/f", follow: false, want: "d/e/f", found: true},
		{path: "chain/f", follow: false, want: "d/e/f", found: true},
		{path: "self/self/ld/e", follow: false, want: "d/e", found: true, typ: fs.ModeDir},
		// The final link only when followed (or by a trailing slash).
		{path: "lf", follow: true, want: "d/e/f", found: true},
		{path: "lf", follow: false, want: "lf", found: true, typ: fs.ModeSymlink},
		{path: "ld", follow: true, want: "d", found: true, typ: fs.ModeDir},
		{path: "ld", follow: false, want: "ld", found: true, typ: fs.ModeSymlink},
		{path: "ld/", follow: false, want: "d", found: true, typ: fs.ModeDir},
		{path: "chain2", follow: true, want: "d/e/f", found: true},
		{path: "ld/e/fslash", follow: false, want: "d/e/fslash", found: true, typ: fs.ModeSymlink},
		{path: "ld/e/fslash", follow: true, code: vfs.CodeNotDir},
		// THREATS 24: ".." in a link target is physical: a -> b/c, so a/.. is b.
		{path: "x", follow: true, want: "b/t", found: true},
		{path: "x", follow: false, want: "x", found: true, typ: fs.ModeSymlink},
		{path: "up", follow: true, want: "d", found: true, typ: fs.ModeDir},
		{path: "le/back/t", follow: true, want: "b/t", found: true},
		{path: "ld/e/back/c", follow: true, want: "b/c", found: true, typ: fs.ModeDir},
		// Missing finals: where a creation would land.
		{path: "ld/new", follow: true, want: "d/new"},
		{path: "dangle", follow: true, want: "d/newfile"},
		{path: "dangle", follow: false, want: "dangle", found: true, typ: fs.ModeSymlink},
		{path: "a/new", follow: false, want: "b/c/new"},
		// Missing intermediates (also through a dangling link's target).
		{path: "ld/nodir/x", follow: true, code: vfs.CodeNotFound},
		{path: "dd", follow: true, code: vfs.CodeNotFound},
		{path: "dangle/x", follow: false, code: vfs.CodeNotFound},
		{path: "lf/x", follow: false, code: vfs.CodeNotDir},
		{path: "lf/", follow: false, code: vfs.CodeNotDir},
		// Loops.
		{path: "loop1", follow: true, code: vfs.CodeTooManyLinks},
		{path: "loop1/x", follow: false, code: vfs.CodeTooManyLinks},
		{path: "loop1", follow: false, want: "loop1", found: true, typ: fs.ModeSymlink},
	})
}

// resolveLinkLimit is testResolve's "link-limit" subtest.
func resolveLinkLimit(t *testing.T, cfg Config) {
	f := newFx(t, cfg, symlinks)
	f.seed("d/", "d/f=F", "self -> .")
	ok := ""
	for range vfs.MaxSymlinks {
		ok += "self/"
	}
	f.resolveCases([]rcase{
		{path: ok + "d/f", follow: true, want: "d/f", found: true},
		{path: ok + "self/d/f", follow: true, code: vfs.CodeTooManyLinks},
	})
}

// resolveEscaping is testResolve's "escaping" subtest.
func resolveEscaping(t *testing.T, cfg Config) {
	f := newFx(t, cfg, symlinks)
	f.seed("d/", "d/f=F", "d/e/", "outside/", "outside/secret=S")
	// A Sub whose links climb above its own root.
	f.seed("d/up -> ..", "d/e/up2 -> ../..", "d/in -> e/../f")
	sub, err := f.b.Sub(f.ctx, p("d"))
	if !f.wantOK(err, "Sub(d)") {
		return
	}
	s := f.on(sub)
	s.resolveCases([]rcase{
		{path: "in", follow: true, want: "f", found: true},
		{path: "up", follow: false, want: "up", found: true, typ: fs.ModeSymlink},
		{path: "up", follow: true, code: vfs.CodeOutside},
		{path: "up/outside/secret", follow: false, code: vfs.CodeOutside},
		{path: "e/up2", follow: true, code: vfs.CodeOutside},
		{path: "e/up2/new", follow: true, code: vfs.CodeOutside},
	})
	// Links planted to leave the root itself.
	f.plant("/outside", "absl")
	f.plant("../outside", "rell")
	f.plant("../outside/new", "rdangle")
	f.resolveCases([]rcase{
		{path: "absl", follow: true, code: vfs.CodeOutside},
		{path: "absl/secret", follow: false, code: vfs.CodeOutside},
		{path: "absl/", follow: false, code: vfs.CodeOutside},
		{path: "rell/secret", follow: true, code: vfs.CodeOutside},
		{path: "rell", follow: false, want: "rell", found: true, typ: fs.ModeSymlink},
		{path: "rdangle", follow: true, code: vfs.CodeOutside},
	})
}

// resolveDifferential is testResolve's "differential" subtest.
func resolveDifferential(t *testing.T, cfg Config) {
	f := newFx(t, cfg, symlinks)
	f.seed("d/", "d/e/", "d/e/f=F", "b/", "b/c/", "b/t=BT", "t=T",
		"ld -> d", "lf -> d/e/f", "a -> b/c", "x -> a/../t", "d/e/back -> ../../b",
		"dangle -> d/newfile", "dd -> nodir/x", "loop1 -> loop2", "loop2 -> loop1", "self -> .",
		"d/e/fslash -> f/", "empty/", "ln -> ld/e/back/c/../../t")
	paths := []string{".", "d", "d/", "d/e/f", "ld", "ld/", "ld/e/f", "lf", "lf/", "lf/x", "a", "a/new",
		"x", "d/e/back", "d/e/back/t", "ld/e/back/c/", "dangle", "dangle/", "dangle/x", "dd", "loop1",
		"loop1/x", "self", "self/self/d/e", "d/e/fslash", "d/e/fslash/", "empty", "missing", "missing/x",
		"t/x", "ln", "ld/missing", "self/lf"}
	for _, s := range paths {
		for _, follow := range []bool{false, true} {
			got, gerr := f.b.Resolve(f.ctx, p(s), follow)
			want, werr := vfs.ResolveBackend(f.ctx, f.b, p(s), follow, "resolve")
			g, w := describeLoc(got, gerr), describeLoc(want, werr)
			if g != w {
				t.Errorf("Resolve(%s, follow=%v) = %s; vfs.ResolveBackend says %s", s, follow, g, w)
			}
		}
	}
}

// resolveFused is testResolve's "fused" subtest.
func resolveFused(t *testing.T, cfg Config) {
	// ResolveReadDir and ResolveOpen (the backend's own, vfs.ListResolver and
	// vfs.OpenResolver, or the vfs fallbacks) decide on what Resolve(p, true)
	// reports and give what listing that location gives; a refusal is
	// returned unchanged and nothing is opened.
	f := newFx(t, cfg, symlinks)
	f.seed("d/", "d/e/", "d/e/f=F", "d/g=G", "b/", "b/c/", "b/t=BT", "t=T",
		"ld -> d", "lf -> d/e/f", "a -> b/c", "d/e/back -> ../../b",
		"dangle -> d/newfile", "loop1 -> loop2", "loop2 -> loop1", "self -> .")
	paths := []string{".", "d", "d/", "d/e", "ld", "ld/", "ld/e", "a", "d/e/back", "self/ld",
		"d/e/f", "lf", "lf/", "t/x", "dangle", "loop1", "missing", "missing/x", "d/e/back/c"}
	// f.b is the checking wrapper, whose ResolveReadDir and ResolveOpen
	// reach the backend's own or the fallbacks.
	refusal := errors.New("refused by the test")
	for _, s := range paths {
		want, werr := f.b.Resolve(f.ctx, p(s), true)
		check := func(what string, got vfs.Location, called bool, err error) {
			t.Helper()
			switch {
			case werr != nil && called:
				t.Errorf("%s(%s): decided on %s where Resolve fails (%v)", what, s, describeLoc(got, nil), werr)
			case werr != nil && vfs.CodeOf(err) != vfs.CodeOf(werr):
				t.Errorf("%s(%s): %v; Resolve fails with %v", what, s, err, werr)
			case werr == nil && !called:
				t.Errorf("%s(%s): no decision (%v); Resolve reports %s", what, s, err, describeLoc(want, nil))
			case werr == nil && describeLoc(got, nil) != describeLoc(want, nil):
				t.Errorf("%s(%s): decided on %s; Resolve reports %s", what, s, describeLoc(got, nil), describeLoc(want, nil))
			}
		}
		{ // The listing: decided where Resolve leads, and ReadDir's entries there.
			var got vfs.Location
			called := false
			_, _, err := vfs.ResolveReadDir(f.ctx, f.b, p(s), func(l vfs.Location) error { got, called = l, true; return refusal })
			check("ResolveReadDir", got, called, err)
			if called && err != refusal {
				t.Errorf("ResolveReadDir(%s): a refusing decision gave %v, not the refusal itself", s, err)
			}
			ents, _, err := vfs.ResolveReadDir(f.ctx, f.b, p(s), func(vfs.Location) error { return nil })
			var wantEnts []vfs.DirEntry
			var wantErr error = werr
			if werr == nil {
				wantEnts, wantErr = f.b.ReadDir(f.ctx, want.Path)
			}
			if vfs.CodeOf(err) != vfs.CodeOf(wantErr) || fmt.Sprint(ents) != fmt.Sprint(wantEnts) {
				t.Errorf("ResolveReadDir(%s) = %v, %v; ReadDir of where it leads = %v, %v", s, ents, err, wantEnts, wantErr)
			}
		}
		{ // The open: decided where Resolve leads, and nothing opened on a refusal.
			var got vfs.Location
			called := false
			h, _, err := vfs.ResolveOpen(f.ctx, f.b, p(s), func(l vfs.Location) error { got, called = l, true; return refusal })
			if h != nil {
				h.Close()
				t.Errorf("ResolveOpen(%s): a refusing decision opened a file", s)
			}
			check("ResolveOpen", got, called, err)
			if called && err != refusal {
				t.Errorf("ResolveOpen(%s): a refusing decision gave %v, not the refusal itself", s, err)
			}
		}
	}
}

// resolveResolvedMark is testResolve's "resolved-mark" subtest.
func resolveResolvedMark(t *testing.T, cfg Config) {
	f := newFx(t, cfg, symlinks)
	f.seed("d/", "d/f=F", "real/", "real/f=R", "real/sub/", "l -> real", "lf -> d/f", "ldir -> real/sub")
	rp := func(s string) vfs.Path { return p(s).Resolved() }
	before := f.snapshot()
	conflict := func(err error, what string) {
		t.Helper()
		f.wantCode(err, vfs.CodeConflict, "%s on a Resolved path with a symlink on it", what)
	}
	// An intermediate symlink on a Resolved path: every call refuses it.
	for _, s := range []string{"l/f", "l/sub/x", "ldir/x"} {
		q := rp(s)
		_, err := f.b.Stat(f.ctx, q)
		conflict(err, "Stat("+s+")")
		_, err = f.b.Lstat(f.ctx, q)
		conflict(err, "Lstat("+s+")")
		conflict(f.openErr(q, os.O_RDONLY), "OpenFile("+s+", O_RDONLY)")
		conflict(f.openErr(q, os.O_WRONLY|os.O_CREATE|os.O_TRUNC), "OpenFile("+s+", O_CREATE|O_TRUNC)")
		conflict(f.openErr(q, os.O_WRONLY|os.O_CREATE|os.O_EXCL), "OpenFile("+s+", O_CREATE|O_EXCL)")
		conflict(f.openErr(q, os.O_RDWR|os.O_APPEND), "OpenFile("+s+", O_RDWR|O_APPEND)")
		conflict(f.b.Mkdir(f.ctx, rp(s+"new"), 0o755), "Mkdir("+s+"new)")
		conflict(f.b.Remove(f.ctx, q), "Remove("+s+")")
		conflict(f.b.Rename(f.ctx, q, rp("d/moved"), 0), "Rename("+s+", d/moved)")
		conflict(f.b.Rename(f.ctx, rp("d/f"), q, 0), "Rename(d/f, "+s+")")
		conflict(f.b.Symlink(f.ctx, "f", rp(s+"link")), "Symlink(f, "+s+"link)")
		_, err = f.b.Readlink(f.ctx, q)
		conflict(err, "Readlink("+s+")")
		_, err = f.b.ReadDir(f.ctx, q.Dir())
		conflict(err, "ReadDir("+q.Dir().String()+")")
		_, err = f.b.Sub(f.ctx, q.Dir())
		conflict(err, "Sub("+q.Dir().String()+")")
		_, err = f.b.Resolve(f.ctx, q, false)
		conflict(err, "Resolve("+s+")")
		if f.feat.Chmod {
			conflict(f.b.Chmod(f.ctx, q, 0o600), "Chmod("+s+")")
		}
		if f.feat.Chtimes {
			conflict(f.b.Chtimes(f.ctx, q, time.Unix(1, 0), time.Unix(1, 0)), "Chtimes("+s+")")
		}
		if f.feat.HardLinks {
			conflict(f.b.Link(f.ctx, q, rp("d/hl")), "Link("+s+", d/hl)")
			conflict(f.b.Link(f.ctx, rp("d/f"), rp(s+"hl")), "Link(d/f, "+s+"hl)")
		}
	}
	// A final symlink on a Resolved path: refused where the call follows it.
	for _, s := range []string{"lf", "l", "ldir"} {
		q := rp(s)
		_, err := f.b.Stat(f.ctx, q)
		conflict(err, "Stat("+s+")")
		_, err = f.b.Stat(f.ctx, rp(s+"/"))
		conflict(err, "Stat("+s+"/)")
		_, err = f.b.Lstat(f.ctx, rp(s+"/"))
		conflict(err, "Lstat("+s+"/)")
		conflict(f.openErr(q, os.O_RDONLY), "OpenFile("+s+", O_RDONLY)")
		conflict(f.openErr(q, os.O_WRONLY|os.O_CREATE|os.O_TRUNC), "OpenFile("+s+", O_CREATE|O_TRUNC)")
		conflict(f.openErr(q, os.O_WRONLY), "OpenFile("+s+", O_WRONLY)")
		_, err = f.b.Resolve(f.ctx, q, true)
		conflict(err, "Resolve("+s+", follow)")
		if s != "lf" {
			_, err = f.b.ReadDir(f.ctx, q)
			conflict(err, "ReadDir("+s+")")
			_, err = f.b.Sub(f.ctx, q)
			conflict(err, "Sub("+s+")")
		}
		if f.feat.Chmod {
			conflict(f.b.Chmod(f.ctx, q, 0o600), "Chmod("+s+")")
		}
		if f.feat.Chtimes {
			conflict(f.b.Chtimes(f.ctx, q, time.Unix(1, 0), time.Unix(1, 0)), "Chtimes("+s+")")
		}
	}
	if after := f.snapshot(); after != before {
		t.Errorf("refused calls on Resolved paths changed the tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := f.read("real/f"); got != "R" {
		t.Errorf("real/f = %q after refused writes through l/f", got)
	}
	if got := f.read("d/f"); got != "F" {
		t.Errorf("d/f = %q after refused writes through lf", got)
	}
	// Calls that do not follow a final link work on a Resolved path.
	if info, err := f.b.Lstat(f.ctx, rp("lf")); f.wantOK(err, "Lstat(lf) Resolved") && info.Mode.Type() != fs.ModeSymlink {
		t.Errorf("Lstat(lf) Resolved: mode %v, want a symlink", info.Mode)
	}
	if s, err := f.b.Readlink(f.ctx, rp("lf")); f.wantOK(err, "Readlink(lf) Resolved") && s != "d/f" {
		t.Errorf("Readlink(lf) Resolved = %q, want d/f", s)
	}
	if loc, err := f.b.Resolve(f.ctx, rp("lf"), false); f.wantOK(err, "Resolve(lf, false) Resolved") &&
		(loc.Path.String() != "lf" || loc.Type != fs.ModeSymlink) {
		t.Errorf("Resolve(lf, false) Resolved = %s %v", loc.Path, loc.Type)
	}
	f.wantOK(f.b.Rename(f.ctx, rp("lf"), rp("d/lf2"), 0), "Rename(lf, d/lf2) Resolved")
	f.wantOK(f.b.Remove(f.ctx, rp("d/lf2")), "Remove(d/lf2) Resolved")
	if got := f.read("d/f"); got != "F" {
		t.Errorf("d/f = %q after the link to it was moved and removed", got)
	}
}

// resolveResolvedNoSymlink is testResolve's "resolved-no-symlink" subtest.
func resolveResolvedNoSymlink(t *testing.T, cfg Config) {
	f := newFx(t, cfg)
	f.seed("d/", "d/f=F", "d/e/")
	rp := func(s string) vfs.Path { return p(s).Resolved() }
	if info, err := f.b.Stat(f.ctx, rp("d/f")); f.wantOK(err, "Stat(d/f) Resolved") && (info.Size != 1 || info.Name != "f") {
		t.Errorf("Stat(d/f) Resolved = size %d name %q", info.Size, info.Name)
	}
	if _, err := f.b.Stat(f.ctx, rp("d/")); !f.wantOK(err, "Stat(d/) Resolved") {
		return
	}
	if got := string(f.readP(rp("d/f"))); got != "F" {
		t.Errorf("read d/f Resolved = %q", got)
	}
	f.wantOK(WriteFile(f.ctx, f.b, rp("d/f"), []byte("F2")), "WriteFile(d/f) Resolved")
	f.wantOK(WriteFile(f.ctx, f.b, rp("d/e/new"), []byte("N")), "WriteFile(d/e/new) Resolved")
	f.wantOK(f.b.Mkdir(f.ctx, rp("d/e/sub"), 0o755), "Mkdir(d/e/sub) Resolved")
	f.wantOK(f.b.Rename(f.ctx, rp("d/e/new"), rp("d/e/sub/moved"), 0), "Rename Resolved")
	if _, err := f.b.ReadDir(f.ctx, rp("d/e/sub")); !f.wantOK(err, "ReadDir(d/e/sub) Resolved") {
		return
	}
	if sub, err := f.b.Sub(f.ctx, rp("d/e")); f.wantOK(err, "Sub(d/e) Resolved") {
		f.on(sub).wantNames(".", "sub")
	}
	if f.feat.Symlinks {
		f.wantOK(f.b.Symlink(f.ctx, "f", rp("d/l")), "Symlink(f, d/l) Resolved")
		if s, err := f.b.Readlink(f.ctx, rp("d/l")); f.wantOK(err, "Readlink(d/l) Resolved") && s != "f" {
			t.Errorf("Readlink(d/l) Resolved = %q", s)
		}
	}
	if f.feat.Chmod {
		f.wantOK(f.b.Chmod(f.ctx, rp("d/f"), 0o600), "Chmod(d/f) Resolved")
	}
	if f.feat.Chtimes {
		f.wantOK(f.b.Chtimes(f.ctx, rp("d/f"), time.Unix(5, 0), time.Unix(7, 0)), "Chtimes(d/f) Resolved")
	}
	f.wantOK(f.b.Remove(f.ctx, rp("d/e/sub/moved")), "Remove(d/e/sub/moved) Resolved")
	if got := f.read("d/f"); got != "F2" {
		t.Errorf("d/f = %q after a write through its Resolved path", got)
	}
	if f.exists("d/e/sub/moved") {
		t.Error("d/e/sub/moved survived its Remove through a Resolved path")
	}
}

// resolveSwapAfterResolve is testResolve's "swap-after-resolve" subtest.
func resolveSwapAfterResolve(t *testing.T, cfg Config) {
	// What a Dir does: resolve, decide, act. A directory swapped for a link in
	// between makes the action fail instead of reaching the link's target.
	f := newFx(t, cfg, symlinks)
	f.seed("d/", "d/f=F", "other/", "other/f=O")
	loc, err := f.b.Resolve(f.ctx, p("d/f"), true)
	if !f.wantOK(err, "Resolve(d/f)") {
		return
	}
	if !loc.Path.IsResolved() || loc.Path.String() != "d/f" || !loc.Found {
		t.Fatalf("Resolve(d/f) = %q found=%v resolved=%v", loc.Path, loc.Found, loc.Path.IsResolved())
	}
	f.wantOK(f.b.Rename(f.ctx, p("d"), p("d-old"), 0), "Rename(d, d-old)")
	f.symlink("other", "d")
	_, err = f.b.Stat(f.ctx, loc.Path)
	f.wantCode(err, vfs.CodeConflict, "Stat(d/f) after d became a link")
	f.wantCode(f.openErr(loc.Path, os.O_WRONLY|os.O_TRUNC), vfs.CodeConflict, "OpenFile(d/f, O_TRUNC) after d became a link")
	f.wantCode(f.b.Remove(f.ctx, loc.Path), vfs.CodeConflict, "Remove(d/f) after d became a link")
	if got := f.read("other/f"); got != "O" {
		t.Errorf("other/f = %q: reached through the swapped-in link", got)
	}
	// Resolving again gives the new canonical path.
	if loc, err := f.b.Resolve(f.ctx, p("d/f"), true); f.wantOK(err, "Resolve(d/f) again") && loc.Path.String() != "other/f" {
		t.Errorf("Resolve(d/f) after the swap = %q, want other/f", loc.Path)
	}
}
