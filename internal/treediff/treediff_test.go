package treediff

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// tree builds a memory backend from files: a name ending in "/" is an empty
// directory, "@" a symlink to the value, "*" an executable file.
func tree(t testing.TB, files map[string]string) vfs.Backend {
	t.Helper()
	ctx := context.Background()
	m := memory.New()
	for n, data := range files {
		name := strings.TrimRight(n, "/@*")
		p := vfs.MustParse(name)
		err := vfstest.MkdirAll(ctx, m, p.Dir(), 0o755)
		switch {
		case err != nil:
		case strings.HasSuffix(n, "/"):
			err = vfstest.MkdirAll(ctx, m, p, 0o755)
		case strings.HasSuffix(n, "@"):
			err = m.Symlink(ctx, data, p)
		default:
			if err = vfstest.WriteFile(ctx, m, p, []byte(data)); err == nil && strings.HasSuffix(n, "*") {
				err = m.Chmod(ctx, p, 0o755)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func blobID(s string) string {
	h := sha1.Sum([]byte(fmt.Sprintf("blob %d\x00%s", len(s), s)))
	return hex.EncodeToString(h[:])
}

func TestBackendsKinds(t *testing.T) {
	ctx := context.Background()
	a := tree(t, map[string]string{
		"same.txt": "same\n", "mod.txt": "old\n", "del.txt": "gone\n", "exe": "x\n",
		"lnk@": "same.txt", "d/one": "1\n", "d/two/deep": "2\n", "f": "file\n", "empty/": "",
	})
	b := tree(t, map[string]string{
		"same.txt": "same\n", "mod.txt": "new\n", "add.txt": "hi\n", "exe*": "x\n",
		"lnk": "now a file\n", "d": "a file where a directory was\n", "f/inner": "dir where a file was\n", "empty/": "",
	})
	got, err := Backends(ctx, a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{Kind: Added, Path: "add.txt", NewMode: 0o644, NewID: blobID("hi\n")},
		{Kind: Added, Path: "d", NewMode: 0o644, NewID: blobID("a file where a directory was\n")},
		{Kind: Deleted, Path: "d/one", OldMode: 0o644, OldID: blobID("1\n")},
		{Kind: Deleted, Path: "d/two/deep", OldMode: 0o644, OldID: blobID("2\n")},
		{Kind: Deleted, Path: "del.txt", OldMode: 0o644, OldID: blobID("gone\n")},
		{Kind: ModeChanged, Path: "exe", OldMode: 0o644, NewMode: 0o755, OldID: blobID("x\n"), NewID: blobID("x\n")},
		{Kind: Deleted, Path: "f", OldMode: 0o644, OldID: blobID("file\n")},
		{Kind: Added, Path: "f/inner", NewMode: 0o644, NewID: blobID("dir where a file was\n")},
		{Kind: TypeChanged, Path: "lnk", OldMode: fs.ModeSymlink | 0o777, NewMode: 0o644, OldID: blobID("same.txt"), NewID: blobID("now a file\n")},
		{Kind: Modified, Path: "mod.txt", OldMode: 0o644, NewMode: 0o644, OldID: blobID("old\n"), NewID: blobID("new\n")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Backends:\n%+v\nwant\n%+v", got, want)
	}
}

func TestEmptyTrees(t *testing.T) {
	ctx := context.Background()
	empty := tree(t, nil)
	if got, err := Backends(ctx, empty, tree(t, nil)); err != nil || got != nil {
		t.Fatalf("two empty trees: %+v, %v", got, err)
	}
	full := tree(t, map[string]string{"b/c": "c\n", "a": "a\n", "dir/": ""})
	got, err := Backends(ctx, empty, full)
	if err != nil || len(got) != 2 || got[0].Path != "a" || got[1].Path != "b/c" || got[0].Kind != Added || got[1].Kind != Added {
		t.Fatalf("empty against full: %+v, %v", got, err)
	}
	got, err = Backends(ctx, full, empty)
	if err != nil || len(got) != 2 || got[0].Kind != Deleted || got[1].Kind != Deleted {
		t.Fatalf("full against empty: %+v, %v", got, err)
	}
	var buf bytes.Buffer
	if err := Unified(ctx, full, empty, got, &buf); err != nil {
		t.Fatal(err)
	}
	want := "diff --git a/a b/a\ndeleted file mode 100644\nindex " + blobID("a\n")[:7] + "..0000000\n--- a/a\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n" +
		"diff --git a/b/c b/b/c\ndeleted file mode 100644\nindex " + blobID("c\n")[:7] + "..0000000\n--- a/b/c\n+++ /dev/null\n@@ -1 +0,0 @@\n-c\n"
	if buf.String() != want {
		t.Fatalf("Unified:\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestUnifiedBinaryAndTypeChange(t *testing.T) {
	ctx := context.Background()
	a := tree(t, map[string]string{"bin": "a\x00b", "lnk@": "target", "sp ace": "1\n"})
	b := tree(t, map[string]string{"bin": "a\x00c", "lnk": "text\n", "sp ace": "2\n"})
	cs, err := Backends(ctx, a, b)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Unified(ctx, a, b, cs, &buf); err != nil {
		t.Fatal(err)
	}
	want := "diff --git a/bin b/bin\nindex " + blobID("a\x00b")[:7] + ".." + blobID("a\x00c")[:7] + " 100644\nBinary files a/bin and b/bin differ\n" +
		"diff --git a/lnk b/lnk\ndeleted file mode 120000\nindex " + blobID("target")[:7] + "..0000000\n--- a/lnk\n+++ /dev/null\n@@ -1 +0,0 @@\n-target\n\\ No newline at end of file\n" +
		"diff --git a/lnk b/lnk\nnew file mode 100644\nindex 0000000.." + blobID("text\n")[:7] + "\n--- /dev/null\n+++ b/lnk\n@@ -0,0 +1 @@\n+text\n" +
		"diff --git a/sp ace b/sp ace\nindex " + blobID("1\n")[:7] + ".." + blobID("2\n")[:7] + " 100644\n--- a/sp ace\t\n+++ b/sp ace\t\n@@ -1 +1 @@\n-1\n+2\n"
	if buf.String() != want {
		t.Fatalf("Unified:\n%q\nwant\n%q", buf.String(), want)
	}
}

func TestRenames(t *testing.T) {
	ctx := context.Background()
	body := "alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\n"
	a := tree(t, map[string]string{"old/moved.txt": body, "similar.txt": body + "iota\n", "lnk@": "x", "gone": "bye\n", "tiny": "t\n"})
	b := tree(t, map[string]string{"new/moved.txt": body, "similar2.txt": strings.Replace(body, "delta", "DELTA", 1) + "iota\n",
		"lnk2@": "x", "fresh": "unlike anything\n", "x": "t\n"})
	cs, err := Backends(ctx, a, b)
	if err != nil {
		t.Fatal(err)
	}
	cs, err = Renames(ctx, a, b, cs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, fmt.Sprintf("%s %s>%s %d", c.Kind, c.OldPath, c.Path, c.Score))
	}
	want := []string{"added >fresh 0", "deleted >gone 0", "renamed lnk>lnk2 100", "renamed old/moved.txt>new/moved.txt 100",
		"renamed similar.txt>similar2.txt 88", "renamed tiny>x 100"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Renames:\n%q\nwant\n%q", got, want)
	}
	var buf bytes.Buffer
	if err := Unified(ctx, a, b, cs[2:5], &buf); err != nil {
		t.Fatal(err)
	}
	wantText := "diff --git a/lnk b/lnk2\nsimilarity index 100%\nrename from lnk\nrename to lnk2\n" +
		"diff --git a/old/moved.txt b/new/moved.txt\nsimilarity index 100%\nrename from old/moved.txt\nrename to new/moved.txt\n" +
		"diff --git a/similar.txt b/similar2.txt\nsimilarity index 88%\nrename from similar.txt\nrename to similar2.txt\n" +
		"index " + blobID(body + "iota\n")[:7] + ".." + blobID(strings.Replace(body, "delta", "DELTA", 1) + "iota\n")[:7] + " 100644\n" +
		"--- a/similar.txt\n+++ b/similar2.txt\n@@ -1,7 +1,7 @@\n alpha\n beta\n gamma\n-delta\n+DELTA\n epsilon\n zeta\n eta\n"
	if buf.String() != wantText {
		t.Fatalf("Unified renames:\n%s\nwant\n%s", buf.String(), wantText)
	}
}

// idTree is a Tree whose entries all carry ids; listing a directory named
// "unread" fails.
type idTree map[string][]Entry

func (t idTree) List(_ context.Context, path string, _ Entry) ([]Entry, error) {
	if strings.HasSuffix(path, "unread") {
		return nil, errors.New("listed a subtree whose id is the same on both sides")
	}
	return t[path], nil
}

func (idTree) ObjectID(context.Context, string, Entry) (string, error) {
	return "", errors.New("ObjectID called for an entry with an id")
}

func TestCompareSkipsSubtreesWithEqualIDs(t *testing.T) {
	dir := fs.ModeDir | 0o755
	a := idTree{"": {{Name: "f", Mode: 0o644, ID: "1"}, {Name: "unread", Mode: dir, Dir: true, ID: "t"}, {Name: "x", Mode: dir, Dir: true, ID: "u"}},
		"x": {{Name: "g", Mode: 0o644, ID: "2"}}}
	b := idTree{"": {{Name: "f", Mode: 0o755, ID: "1"}, {Name: "unread", Mode: dir, Dir: true, ID: "t"}, {Name: "x", Mode: dir, Dir: true, ID: "v"}},
		"x": {{Name: "g", Mode: 0o644, ID: "3"}, {Name: "sub", Mode: dir, ID: "c"}}}
	got, err := Compare(context.Background(), a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{Kind: ModeChanged, Path: "f", OldMode: 0o644, NewMode: 0o755, OldID: "1", NewID: "1"},
		{Kind: Modified, Path: "x/g", OldMode: 0o644, NewMode: 0o644, OldID: "2", NewID: "3"},
		{Kind: Added, Path: "x/sub", NewMode: dir, NewID: "c"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Compare:\n%+v\nwant\n%+v", got, want)
	}
}

func TestCompareCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Backends(ctx, tree(t, nil), tree(t, nil))
	if vfs.CodeOf(err) != vfs.CodeCanceled {
		t.Fatalf("canceled: %v", err)
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"plain name": "a/plain name",
		"tab\there":  `"a/tab\there"`,
		"bell\a":     `"a/bell\a"`,
		"q\"b\\":     `"a/q\"b\\"`,
		"é":          `"a/\303\251"`,
		"del\x7f":    `"a/del\177"`,
		"esc\x1b":    `"a/esc\033"`,
	} {
		if got := Quote("a/", in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}
