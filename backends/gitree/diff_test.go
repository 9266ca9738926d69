package gitree

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
)

// diffFixture builds a repository with two commits covering every kind of change.
type diffFixture struct {
	dir, c1, c2 string
}

func lines(prefix string, from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%s%d\n", prefix, i)
	}
	return b.String()
}

func newDiffFixture(t *testing.T) diffFixture {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not on PATH")
	}
	d := t.TempDir()
	runGit(t, d, "init", "-q")
	write(t, filepath.Join(d, "keep.txt"), "same\n", 0o644)
	write(t, filepath.Join(d, "mod.txt"), lines("line", 1, 20), 0o644)
	write(t, filepath.Join(d, "del.txt"), "gone\n", 0o644)
	write(t, filepath.Join(d, "old.txt"), "renamed\n", 0o644)
	write(t, filepath.Join(d, "exec.sh"), "#!/bin/sh\n", 0o644)
	write(t, filepath.Join(d, "tolink"), "file\n", 0o644)
	write(t, filepath.Join(d, "d/x"), "x\n", 0o644)
	write(t, filepath.Join(d, "d/y"), "y\n", 0o644)
	write(t, filepath.Join(d, "sub/unchanged/z"), "z\n", 0o644)
	write(t, filepath.Join(d, "bin.dat"), "a\x00b", 0o644)
	symlink(t, "keep.txt", filepath.Join(d, "lnk"))
	runGit(t, d, "add", "-A")
	runGit(t, d, "commit", "-q", "-m", "one")
	c1 := runGit(t, d, "rev-parse", "HEAD")

	write(t, filepath.Join(d, "add.txt"), "new\n", 0o644)
	mod := strings.Replace(lines("line", 1, 20), "line2\n", "line two\n", 1)
	mod = strings.Replace(mod, "line15\n", "", 1) + "line21"
	write(t, filepath.Join(d, "mod.txt"), mod, 0o644)
	must(t, os.Remove(filepath.Join(d, "del.txt")))
	must(t, os.Rename(filepath.Join(d, "old.txt"), filepath.Join(d, "new.txt")))
	must(t, os.Chmod(filepath.Join(d, "exec.sh"), 0o755))
	must(t, os.Remove(filepath.Join(d, "tolink")))
	symlink(t, "keep.txt", filepath.Join(d, "tolink"))
	must(t, os.RemoveAll(filepath.Join(d, "d")))
	write(t, filepath.Join(d, "d"), "now a file\n", 0o644)
	write(t, filepath.Join(d, "bin.dat"), "a\x00c", 0o644)
	must(t, os.Remove(filepath.Join(d, "lnk")))
	symlink(t, "mod.txt", filepath.Join(d, "lnk"))
	runGit(t, d, "add", "-A")
	runGit(t, d, "commit", "-q", "-m", "two")
	return diffFixture{dir: d, c1: c1, c2: runGit(t, d, "rev-parse", "HEAD")}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func openAt(t *testing.T, dir, rev string) *FS {
	t.Helper()
	g, err := Open(dir, rev)
	if err != nil {
		t.Fatalf("Open(%q): %v", rev, err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func TestDiffRevisions(t *testing.T) {
	f := newDiffFixture(t)
	a, b := openAt(t, f.dir, f.c1), openAt(t, f.dir, f.c2)
	id := func(rev, p string) string { return runGit(t, f.dir, "rev-parse", rev+":"+p) }
	const lnk = fs.ModeSymlink | 0o777
	want := []Change{
		{Kind: Added, Path: "add.txt", NewMode: 0o644, NewID: id(f.c2, "add.txt")},
		{Kind: Modified, Path: "bin.dat", OldMode: 0o644, NewMode: 0o644, OldID: id(f.c1, "bin.dat"), NewID: id(f.c2, "bin.dat")},
		{Kind: Added, Path: "d", NewMode: 0o644, NewID: id(f.c2, "d")},
		{Kind: Deleted, Path: "d/x", OldMode: 0o644, OldID: id(f.c1, "d/x")},
		{Kind: Deleted, Path: "d/y", OldMode: 0o644, OldID: id(f.c1, "d/y")},
		{Kind: Deleted, Path: "del.txt", OldMode: 0o644, OldID: id(f.c1, "del.txt")},
		{Kind: ModeChanged, Path: "exec.sh", OldMode: 0o644, NewMode: 0o755, OldID: id(f.c1, "exec.sh"), NewID: id(f.c2, "exec.sh")},
		{Kind: Modified, Path: "lnk", OldMode: lnk, NewMode: lnk, OldID: id(f.c1, "lnk"), NewID: id(f.c2, "lnk")},
		{Kind: Modified, Path: "mod.txt", OldMode: 0o644, NewMode: 0o644, OldID: id(f.c1, "mod.txt"), NewID: id(f.c2, "mod.txt")},
		{Kind: Added, Path: "new.txt", NewMode: 0o644, NewID: id(f.c2, "new.txt")},
		{Kind: Deleted, Path: "old.txt", OldMode: 0o644, OldID: id(f.c1, "old.txt")},
		{Kind: TypeChanged, Path: "tolink", OldMode: 0o644, NewMode: lnk, OldID: id(f.c1, "tolink"), NewID: id(f.c2, "tolink")},
	}
	got, err := Diff(context.Background(), a, b)
	must(t, err)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Diff:\n got %+v\nwant %+v", got, want)
	}
	// The generic walk agrees with the tree diff on the same two revisions.
	gen, err := DiffBackends(context.Background(), a, b)
	must(t, err)
	if !reflect.DeepEqual(gen, want) {
		t.Fatalf("DiffBackends:\n got %+v\nwant %+v", gen, want)
	}
	// Nothing differs between a revision and itself; the reverse diff mirrors.
	same, err := Diff(context.Background(), a, openAt(t, f.dir, f.c1))
	must(t, err)
	if len(same) != 0 {
		t.Fatalf("Diff(c1, c1) = %+v", same)
	}
	rev, err := Diff(context.Background(), b, a)
	must(t, err)
	if len(rev) != len(want) || rev[0].Kind != Deleted || rev[0].Path != "add.txt" || rev[6].Kind != ModeChanged || rev[6].OldMode != 0o755 {
		t.Fatalf("Diff(c2, c1) = %+v", rev)
	}
}

func TestDiffCanceled(t *testing.T) {
	f := newDiffFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Diff(ctx, openAt(t, f.dir, f.c1), openAt(t, f.dir, f.c2))
	wantCode(t, err, vfs.CodeCanceled)
	_, err = DiffBackends(ctx, openAt(t, f.dir, f.c1), openAt(t, f.dir, f.c2))
	wantCode(t, err, vfs.CodeCanceled)
}

// normalizeGit drops index lines (git abbreviates ids to unique prefixes).
func normalizeGit(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "index ") {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

func TestUnifiedDiffMatchesGit(t *testing.T) {
	f := newDiffFixture(t)
	a, b := openAt(t, f.dir, f.c1), openAt(t, f.dir, f.c2)
	changes, err := Diff(context.Background(), a, b)
	must(t, err)

	var mod []Change
	for _, c := range changes {
		if c.Path == "mod.txt" {
			mod = append(mod, c)
		}
	}
	var buf bytes.Buffer
	must(t, UnifiedDiff(context.Background(), a, b, mod, &buf))
	gitOut := runGit(t, f.dir, "diff", "--no-color", "--no-renames", f.c1, f.c2, "--", "mod.txt") + "\n"
	hunks := func(s string) string { return s[strings.Index(s, "\n@@")+1:] }
	if got, want := normalizeGit(hunks(buf.String())), normalizeGit(hunks(gitOut)); got != want {
		t.Fatalf("mod.txt hunks:\n%s\ngit:\n%s", got, want)
	}
	if !strings.Contains(buf.String(), "@@ -1,5 +1,5 @@\n line1\n-line2\n+line two\n") ||
		!strings.Contains(buf.String(), "+line21\n\\ No newline at end of file\n") ||
		!strings.Contains(buf.String(), " @@ line11\n") {
		t.Fatalf("unexpected hunks:\n%s", buf.String())
	}

	// Every kind of change, against git's whole patch (without renames).
	buf.Reset()
	must(t, UnifiedDiff(context.Background(), a, b, changes, &buf))
	gitOut = runGit(t, f.dir, "diff", "--no-color", "--no-renames", f.c1, f.c2) + "\n"
	if got, want := normalizeGit(buf.String()), normalizeGit(gitOut); got != want {
		t.Fatalf("patch:\n%s\ngit:\n%s", got, want)
	}
}

// copyTree copies every entry of src into the memory backend dst.
func copyTree(t *testing.T, src vfs.Backend, dst *memory.FS, p vfs.Path) {
	t.Helper()
	ctx := context.Background()
	es, err := src.ReadDir(ctx, p)
	must(t, err)
	for _, e := range es {
		cp, err := p.Child(e.Name)
		must(t, err)
		info, err := src.Lstat(ctx, cp)
		must(t, err)
		switch {
		case info.Mode.IsDir():
			must(t, dst.Mkdir(ctx, cp, 0o755))
			copyTree(t, src, dst, cp)
		case info.Mode&fs.ModeSymlink != 0:
			target, err := src.Readlink(ctx, cp)
			must(t, err)
			must(t, dst.Symlink(ctx, target, cp))
		default:
			data := readAll(t, src, cp.String())
			h, err := dst.OpenFile(ctx, cp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode.Perm())
			must(t, err)
			_, err = h.Write([]byte(data))
			must(t, err)
			must(t, h.Close())
			must(t, dst.Chmod(ctx, cp, info.Mode.Perm()))
		}
	}
}

func TestDiffBackendsMemoryCopy(t *testing.T) {
	f := newDiffFixture(t)
	ctx := context.Background()
	g := openAt(t, f.dir, f.c2)
	m := memory.New()
	copyTree(t, g, m, vfs.Path{})
	got, err := DiffBackends(ctx, g, m)
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("identical copy differs: %+v", got)
	}
	// One edit in the copy, same size, so content has to be read to see it.
	h, err := m.OpenFile(ctx, vfs.MustParse("keep.txt"), os.O_WRONLY, 0)
	must(t, err)
	_, err = h.WriteAt([]byte("SAME"), 0)
	must(t, err)
	must(t, h.Close())
	got, err = DiffBackends(ctx, g, m)
	must(t, err)
	tmp := filepath.Join(t.TempDir(), "k")
	write(t, tmp, "SAME\n", 0o644)
	want := []Change{{Kind: Modified, Path: "keep.txt", OldMode: 0o644, NewMode: 0o644,
		OldID: runGit(t, f.dir, "rev-parse", f.c2+":keep.txt"), NewID: runGit(t, f.dir, "hash-object", tmp)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DiffBackends:\n got %+v\nwant %+v", got, want)
	}
	var buf bytes.Buffer
	must(t, UnifiedDiff(ctx, g, m, got, &buf))
	wantText := "diff --git a/keep.txt b/keep.txt\nindex " + want[0].OldID[:7] + ".." + want[0].NewID[:7] +
		" 100644\n--- a/keep.txt\n+++ b/keep.txt\n@@ -1 +1 @@\n-same\n+SAME\n"
	if buf.String() != wantText {
		t.Fatalf("UnifiedDiff:\n%s\nwant:\n%s", buf.String(), wantText)
	}
	// A chmod alone is a mode change; a replaced symlink target is a modification.
	must(t, m.Chmod(ctx, vfs.MustParse("add.txt"), 0o755))
	must(t, m.Remove(ctx, vfs.MustParse("lnk")))
	must(t, m.Symlink(ctx, "keep.txt", vfs.MustParse("lnk")))
	got, err = DiffBackends(ctx, g, m)
	must(t, err)
	if len(got) != 3 || got[0].Path != "add.txt" || got[0].Kind != ModeChanged || got[0].NewMode != 0o755 ||
		got[2].Path != "lnk" || got[2].Kind != Modified || got[2].NewID != runGit(t, f.dir, "rev-parse", f.c1+":lnk") {
		t.Fatalf("DiffBackends after chmod and relink: %+v", got)
	}
}

func TestUnifiedDiffEdgeCases(t *testing.T) {
	ctx := context.Background()
	a, b := memory.New(), memory.New()
	put := func(m *memory.FS, p, data string) {
		h, err := m.OpenFile(ctx, vfs.MustParse(p), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		must(t, err)
		_, err = h.Write([]byte(data))
		must(t, err)
		must(t, h.Close())
	}
	put(a, "empty", "")
	put(b, "empty", "now\n")
	put(a, "gone", "1\n2\n")
	put(a, "bin", "x")
	put(b, "bin", "\x00")
	changes, err := DiffBackends(ctx, a, b)
	must(t, err)
	var buf bytes.Buffer
	must(t, UnifiedDiff(ctx, a, b, changes, &buf))
	want := "diff --git a/bin b/bin\nindex c1b0730..f76dd23 100644\nBinary files a/bin and b/bin differ\n" +
		"diff --git a/empty b/empty\nindex e69de29..b6ed15e 100644\n--- a/empty\n+++ b/empty\n@@ -0,0 +1 @@\n+now\n" +
		"diff --git a/gone b/gone\ndeleted file mode 100644\nindex 1191247..0000000\n--- a/gone\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-1\n-2\n"
	if buf.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestDiffSubmodule(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not on PATH")
	}
	ctx := context.Background()
	d := t.TempDir()
	h1, h2 := strings.Repeat("1", 40), strings.Repeat("2", 40)
	runGit(t, d, "init", "-q")
	write(t, filepath.Join(d, "f"), "f\n", 0o644)
	runGit(t, d, "add", "f")
	runGit(t, d, "update-index", "--add", "--cacheinfo", "160000,"+h1+",sm")
	runGit(t, d, "commit", "-q", "-m", "one")
	c1 := runGit(t, d, "rev-parse", "HEAD")
	runGit(t, d, "update-index", "--cacheinfo", "160000,"+h2+",sm")
	runGit(t, d, "commit", "-q", "-m", "two")
	a, b := openAt(t, d, c1), openAt(t, d, "HEAD")
	want := []Change{{Kind: Modified, Path: "sm", OldMode: fs.ModeDir | 0o755, NewMode: fs.ModeDir | 0o755, OldID: h1, NewID: h2}}
	got, err := Diff(ctx, a, b)
	must(t, err)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Diff: %+v", got)
	}
	gen, err := DiffBackends(ctx, a, b)
	must(t, err)
	if !reflect.DeepEqual(gen, want) {
		t.Fatalf("DiffBackends: %+v", gen)
	}
	var buf bytes.Buffer
	must(t, UnifiedDiff(ctx, a, b, got, &buf))
	if g, w := normalizeGit(buf.String()), normalizeGit(runGit(t, d, "diff", "--no-color", c1, "HEAD")+"\n"); g != w {
		t.Fatalf("patch:\n%s\ngit:\n%s", g, w)
	}
}

func TestUnifiedDiffQuotesNamesLikeGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not on PATH")
	}
	ctx := context.Background()
	d := t.TempDir()
	names := []string{"tab\tname", "\u00e9t\u00e9.txt", `quo"te`, "plain name"}
	runGit(t, d, "init", "-q")
	for _, n := range names {
		write(t, filepath.Join(d, n), "old\n", 0o644)
	}
	runGit(t, d, "add", "-A")
	runGit(t, d, "commit", "-q", "-m", "one")
	c1 := runGit(t, d, "rev-parse", "HEAD")
	for _, n := range names {
		write(t, filepath.Join(d, n), "new\n", 0o644)
	}
	runGit(t, d, "commit", "-q", "-am", "two")
	a, b := openAt(t, d, c1), openAt(t, d, "HEAD")
	changes, err := Diff(ctx, a, b)
	must(t, err)
	if len(changes) != len(names) {
		t.Fatalf("Diff: %+v", changes)
	}
	var buf bytes.Buffer
	must(t, UnifiedDiff(ctx, a, b, changes, &buf))
	if g, w := normalizeGit(buf.String()), normalizeGit(runGit(t, d, "diff", "--no-color", c1, "HEAD")+"\n"); g != w {
		t.Fatalf("patch:\n%s\ngit:\n%s", g, w)
	}
	if !strings.Contains(buf.String(), `diff --git "a/tab\tname" "b/tab\tname"`) {
		t.Fatalf("tab not quoted:\n%s", buf.String())
	}
}

func TestUnifiedDiffIndexLinesMatchGit(t *testing.T) {
	// The fixture's objects are fixed (fixed content and dates), and none of their
	// 7-digit prefixes collide, so git abbreviates to 7 as UnifiedDiff does.
	f := newDiffFixture(t)
	a, b := openAt(t, f.dir, f.c1), openAt(t, f.dir, f.c2)
	changes, err := Diff(context.Background(), a, b)
	must(t, err)
	var buf bytes.Buffer
	must(t, UnifiedDiff(context.Background(), a, b, changes, &buf))
	if want := runGit(t, f.dir, "diff", "--no-color", "--no-renames", f.c1, f.c2) + "\n"; buf.String() != want {
		t.Fatalf("patch:\n%s\ngit:\n%s", buf.String(), want)
	}
}

func TestUnifiedDiffMissingPath(t *testing.T) {
	f := newDiffFixture(t)
	a, b := openAt(t, f.dir, f.c1), openAt(t, f.dir, f.c2)
	var buf bytes.Buffer
	err := UnifiedDiff(context.Background(), a, b, []Change{{Kind: Modified, Path: "nope", OldMode: 0o644, NewMode: 0o644}}, &buf)
	wantCode(t, err, vfs.CodeNotFound)
	if strings.Contains(err.Error(), f.dir) || buf.Len() != 0 {
		t.Fatalf("err %v, output %q", err, buf.String())
	}
}

func TestDiffSkipsUnchangedSubtrees(t *testing.T) {
	f := newDiffFixture(t)
	a, b := openAt(t, f.dir, f.c1), openAt(t, f.dir, f.c2)
	_, err := Diff(context.Background(), a, b)
	must(t, err)
	for _, p := range []string{"sub", "sub/unchanged"} {
		h := plumbing.NewHash(runGit(t, f.dir, "rev-parse", f.c1+":"+p))
		if _, ok := a.r.cache.get(h); ok {
			t.Fatalf("unchanged tree %s was decoded", p)
		}
		if _, ok := b.r.cache.get(h); ok {
			t.Fatalf("unchanged tree %s was decoded", p)
		}
	}
	// The changed directory d was read to list its deleted files.
	if _, ok := a.r.cache.get(plumbing.NewHash(runGit(t, f.dir, "rev-parse", f.c1+":d"))); !ok {
		t.Fatal("tree d was not decoded: the cache probe proves nothing")
	}
}
