package gitree

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/gitree/internal/gittest"
	"github.com/capfs/capfs/internal/rofile"
	"github.com/capfs/capfs/vfs"
)

// fixture is a repository built with the git CLI.
type fixture struct {
	dir              string
	c1, c2, tree1    string
	deepTree, smHash string
}

func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return gittest.RunGit(t, dir, args...)
}

func write(t *testing.T, path, data string, perm fs.FileMode) {
	t.Helper()
	gittest.Write(t, path, data, perm)
}

func symlink(t *testing.T, target, path string) {
	t.Helper()
	gittest.Symlink(t, target, path)
}

var (
	fixOnce sync.Once
	fix     fixture
	fixErr  string
	// fixStarted is set once a build began, so a failed build is not retried.
	fixStarted bool
)

// newFixture builds (once per test binary) a repository with two commits, an
// annotated tag v1 and a branch old on the first, and a submodule entry in the second.
func newFixture(t *testing.T) fixture {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not on PATH: gitree tests build fixture repositories with it")
	}
	fixOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gitree-fixture-")
		if err != nil {
			fixErr = err.Error()
			return
		}
		fix.dir = dir
	})
	if fixErr != "" {
		t.Fatal(fixErr)
	}
	if fix.c1 != "" {
		return fix
	}
	if fixStarted {
		t.Fatal("building the fixture repository failed in an earlier test")
	}
	fixStarted = true
	d := fix.dir
	runGit(t, d, "init", "-q")
	write(t, filepath.Join(d, "a.txt"), "one\n", 0o644)
	write(t, filepath.Join(d, "run.sh"), "#!/bin/sh\necho hi\n", 0o755)
	write(t, filepath.Join(d, "dir/sub/deep.txt"), "deep\n", 0o644)
	write(t, filepath.Join(d, "b.txt"), "b\n", 0o644)
	write(t, filepath.Join(d, "b/x"), "x\n", 0o644)
	symlink(t, "dir/sub/deep.txt", filepath.Join(d, "link_in"))
	symlink(t, "../a.txt", filepath.Join(d, "dir/up"))
	symlink(t, "sub", filepath.Join(d, "dir/rel"))
	symlink(t, "../../etc/passwd", filepath.Join(d, "esc"))
	symlink(t, "/etc/passwd", filepath.Join(d, "abs"))
	symlink(t, "../../a.txt", filepath.Join(d, "dir/sub/top"))
	runGit(t, d, "add", "-A")
	// A symlink whose target is longer than any host allows: only git can hold it.
	long := filepath.Join(t.TempDir(), "long")
	write(t, long, strings.Repeat("x/", 2100)+"a.txt", 0o644)
	runGit(t, d, "update-index", "--add", "--cacheinfo", "120000,"+runGit(t, d, "hash-object", "-w", long)+",dir/long")
	runGit(t, d, "commit", "-q", "-m", "first")
	fix.c1 = runGit(t, d, "rev-parse", "HEAD")
	fix.tree1 = runGit(t, d, "rev-parse", "HEAD^{tree}")
	fix.deepTree = runGit(t, d, "rev-parse", "HEAD:dir/sub")
	runGit(t, d, "tag", "-a", "v1", "-m", "version one")
	runGit(t, d, "branch", "old")
	runGit(t, d, "update-ref", "refs/remotes/origin/feature", "HEAD")
	// The first commit's objects are packed, later ones stay loose: both stores are read.
	runGit(t, d, "repack", "-adq")
	write(t, filepath.Join(d, "a.txt"), "two\n", 0o644)
	fix.smHash = "1234567890abcdef1234567890abcdef12345678"
	runGit(t, d, "update-index", "--add", "--cacheinfo", "160000,"+fix.smHash+",sm")
	runGit(t, d, "add", "a.txt")
	runGit(t, d, "commit", "-q", "-m", "second")
	fix.c2 = runGit(t, d, "rev-parse", "HEAD")
	// A merge on branch merged: its second parent is topic, which adds side.txt.
	runGit(t, d, "checkout", "-q", "-b", "topic", "old")
	write(t, filepath.Join(d, "side.txt"), "side\n", 0o644)
	runGit(t, d, "add", "side.txt")
	runGit(t, d, "commit", "-q", "-m", "side")
	runGit(t, d, "checkout", "-q", "-b", "merged", "main")
	runGit(t, d, "merge", "-q", "--no-ff", "-m", "merge topic", "topic")
	runGit(t, d, "checkout", "-q", "main")
	return fix
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fix.dir != "" {
		os.RemoveAll(fix.dir)
	}
	os.Exit(code)
}

func open(t *testing.T, rev string) *FS {
	t.Helper()
	f := newFixture(t)
	g, err := Open(f.dir, rev)
	if err != nil {
		t.Fatalf("Open(%q): %v", rev, err)
	}
	return g
}

func readAll(t *testing.T, b vfs.Backend, p string) string {
	t.Helper()
	h, err := b.OpenFile(context.Background(), vfs.MustParse(p), os.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("open %s: %v", p, err)
	}
	defer h.Close()
	data, err := io.ReadAll(h)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return string(data)
}

func wantCode(t *testing.T, err error, code vfs.Code) {
	t.Helper()
	if got := vfs.CodeOf(err); got != code {
		t.Fatalf("error %v: code %q, want %q", err, got, code)
	}
	if fix.dir != "" && strings.Contains(err.Error(), fix.dir) {
		t.Fatalf("error %q contains the repository's host path", err)
	}
}

func TestRevisions(t *testing.T) {
	f := newFixture(t)
	cases := []struct{ rev, want string }{
		{"HEAD", "two\n"},
		{"main", "two\n"},
		{"HEAD~1", "one\n"},
		{"HEAD^", "one\n"},
		{"v1", "one\n"},
		{"refs/tags/v1", "one\n"},
		{"old", "one\n"},
		{"origin/feature", "one\n"},
		{f.c1, "one\n"},
		{f.c1[:7], "one\n"},
		{f.c2, "two\n"},
		{f.tree1, "one\n"},
		{"v1^{}", "one\n"},
		{"v1^{commit}", "one\n"},
		{"HEAD^{/first}", "one\n"},
		{"merged", "two\n"},
		{"merged^1", "two\n"},
		{"merged^2", "one\n"},
	}
	for _, c := range cases {
		g, err := Open(f.dir, c.rev)
		if err != nil {
			t.Fatalf("Open(%q): %v", c.rev, err)
		}
		if got := readAll(t, g, "a.txt"); got != c.want {
			t.Errorf("rev %q: a.txt = %q, want %q", c.rev, got, c.want)
		}
	}
	// side.txt exists on the merge and its second parent only.
	for rev, want := range map[string]bool{"merged": true, "merged^2": true, "merged^1": false, "merged~1": false, "HEAD": false} {
		g, err := Open(f.dir, rev)
		if err != nil {
			t.Fatal(err)
		}
		_, err = g.Stat(context.Background(), vfs.MustParse("side.txt"))
		if (err == nil) != want {
			t.Errorf("rev %q: stat side.txt: %v, want exists=%v", rev, err, want)
		}
	}
}

func TestBadRevisionAndRepo(t *testing.T) {
	f := newFixture(t)
	for _, rev := range []string{"nope", "HEAD~9", "", "0000000000000000000000000000000000000000", "v1:a.txt", "HEAD@{1}", "v1^{blob}"} {
		_, err := Open(f.dir, rev)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", rev)
		}
		wantCode(t, err, vfs.CodeNotFound)
		if rev != "" && !strings.Contains(err.Error(), rev) {
			t.Errorf("error %q does not name revision %q", err, rev)
		}
	}
	missing := filepath.Join(t.TempDir(), "no-repo")
	_, err := Open(missing, "HEAD")
	wantCode(t, err, vfs.CodeNotFound)
	if strings.Contains(err.Error(), missing) {
		t.Fatalf("error %q names the host path", err)
	}
}

func TestBareRepository(t *testing.T) {
	f := newFixture(t)
	g, err := Open(filepath.Join(f.dir, ".git"), "v1")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, g, "dir/sub/deep.txt"); got != "deep\n" {
		t.Fatalf("deep.txt = %q", got)
	}
}

func TestModesAndInfo(t *testing.T) {
	f := newFixture(t)
	g := open(t, "HEAD")
	ctx := context.Background()
	cases := []struct {
		p    string
		mode fs.FileMode
		kind string
	}{
		{"a.txt", 0o644, "blob"},
		{"run.sh", 0o755, "executable"},
		{"dir", fs.ModeDir | 0o755, "tree"},
		{"sm", fs.ModeDir | 0o755, "submodule"},
		{".", fs.ModeDir | 0o755, "tree"},
	}
	for _, c := range cases {
		i, err := g.Stat(ctx, vfs.MustParse(c.p))
		if err != nil {
			t.Fatalf("stat %s: %v", c.p, err)
		}
		if i.Mode != c.mode {
			t.Errorf("%s: mode %v, want %v", c.p, i.Mode, c.mode)
		}
		if e, ok := i.Sys.(*Entry); !ok || e.Kind != c.kind {
			t.Errorf("%s: Sys %#v, want kind %s", c.p, i.Sys, c.kind)
		}
		if i.ID != 0 {
			t.Errorf("%s: ID %d; content-addressed objects must not pose as hard links", c.p, i.ID)
		}
		if i.ModTime.Unix() != 1577934245 {
			t.Errorf("%s: mtime %v, want the commit time", c.p, i.ModTime)
		}
	}
	i, _ := g.Stat(ctx, vfs.MustParse("sm"))
	if i.Sys.(*Entry).ID != f.smHash {
		t.Errorf("submodule commit %q, want %q", i.Sys.(*Entry).ID, f.smHash)
	}
	ents, err := g.ReadDir(ctx, vfs.MustParse("sm"))
	if err != nil || len(ents) != 0 {
		t.Fatalf("submodule ReadDir = %v, %v; want empty", ents, err)
	}
	i, err = g.Stat(ctx, vfs.MustParse("a.txt"))
	if err != nil || i.Size != 4 || i.Name != "a.txt" {
		t.Fatalf("a.txt info %+v, %v", i, err)
	}
	l, err := g.Lstat(ctx, vfs.MustParse("link_in"))
	if err != nil || l.Mode != fs.ModeSymlink|0o777 || l.Size != int64(len("dir/sub/deep.txt")) {
		t.Fatalf("lstat link_in %+v, %v", l, err)
	}
	// A tree id has no commit, hence no time.
	tg, err := Open(f.dir, f.tree1)
	if err != nil {
		t.Fatal(err)
	}
	if i, err := tg.Stat(ctx, vfs.MustParse("a.txt")); err != nil || !i.ModTime.IsZero() {
		t.Fatalf("tree-id mtime %v, %v; want zero", i.ModTime, err)
	}
	_, err = g.Stat(ctx, vfs.MustParse("missing"))
	wantCode(t, err, vfs.CodeNotFound)
	_, err = g.Stat(ctx, vfs.MustParse("sm/x"))
	wantCode(t, err, vfs.CodeNotFound)
	_, err = g.Stat(ctx, vfs.MustParse("a.txt/x"))
	wantCode(t, err, vfs.CodeNotDir)
}

func TestCanceledContext(t *testing.T) {
	g := open(t, "HEAD")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := g.Stat(ctx, vfs.MustParse("a.txt"))
	wantCode(t, err, vfs.CodeCanceled)
	_, err = g.OpenFile(ctx, vfs.MustParse("a.txt"), os.O_RDONLY, 0)
	wantCode(t, err, vfs.CodeCanceled)
}

func TestReadDirOrder(t *testing.T) {
	g := open(t, "HEAD")
	ents, err := g.ReadDir(context.Background(), vfs.Path{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	want := "a.txt abs b b.txt dir esc link_in run.sh sm"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("ReadDir = %s, want %s", got, want)
	}
	types := map[string]fs.FileMode{}
	for _, e := range ents {
		types[e.Name] = e.Type
	}
	if types["b"] != fs.ModeDir || types["esc"] != fs.ModeSymlink || types["a.txt"] != 0 || types["sm"] != fs.ModeDir {
		t.Fatalf("types %v", types)
	}
	_, err = g.ReadDir(context.Background(), vfs.MustParse("a.txt"))
	wantCode(t, err, vfs.CodeNotDir)
}

func TestSymlinks(t *testing.T) {
	g := open(t, "HEAD")
	ctx := context.Background()
	if got := readAll(t, g, "link_in"); got != "deep\n" {
		t.Errorf("link_in = %q", got)
	}
	if got := readAll(t, g, "dir/up"); got != "two\n" {
		t.Errorf("dir/up = %q", got)
	}
	if got := readAll(t, g, "dir/rel/deep.txt"); got != "deep\n" {
		t.Errorf("dir/rel/deep.txt = %q", got)
	}
	if tgt, err := g.Readlink(ctx, vfs.MustParse("esc")); err != nil || tgt != "../../etc/passwd" {
		t.Errorf("readlink esc = %q, %v", tgt, err)
	}
	_, err := g.Readlink(ctx, vfs.MustParse("a.txt"))
	wantCode(t, err, vfs.CodeInvalidPath)
	// A target longer than PATH_MAX is refused without being loaded.
	_, err = g.Readlink(ctx, vfs.MustParse("dir/long"))
	wantCode(t, err, vfs.CodeInvalidPath)
	_, err = g.Stat(ctx, vfs.MustParse("dir/long"))
	wantCode(t, err, vfs.CodeInvalidPath)
	for _, p := range []string{"esc", "abs"} {
		_, err := g.OpenFile(ctx, vfs.MustParse(p), os.O_RDONLY, 0)
		wantCode(t, err, vfs.CodeOutside)
		_, err = g.Stat(ctx, vfs.MustParse(p))
		wantCode(t, err, vfs.CodeOutside)
		if _, err := g.Lstat(ctx, vfs.MustParse(p)); err != nil {
			t.Errorf("lstat %s: %v", p, err)
		}
	}
}

func TestReadOnly(t *testing.T) {
	g := open(t, "HEAD")
	ctx := context.Background()
	p := vfs.MustParse("a.txt")
	q := vfs.MustParse("new")
	errs := []error{
		g.Mkdir(ctx, q, 0o755),
		g.Remove(ctx, p),
		g.Rename(ctx, p, q, 0),
		g.Symlink(ctx, "a.txt", q),
		g.Link(ctx, p, q),
		g.Chmod(ctx, p, 0o600),
		g.Chtimes(ctx, p, time.Time{}, time.Time{}),
	}
	for _, fl := range []int{os.O_WRONLY, os.O_RDWR, os.O_CREATE, os.O_TRUNC | os.O_RDONLY, os.O_APPEND} {
		_, err := g.OpenFile(ctx, q, fl, 0o644)
		errs = append(errs, err)
	}
	h, err := g.OpenFile(ctx, p, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Write([]byte("x"))
	errs = append(errs, err)
	_, err = h.WriteAt([]byte("x"), 0)
	errs = append(errs, err, h.Truncate(0))
	for i, err := range errs {
		if vfs.CodeOf(err) != vfs.CodeReadOnly {
			t.Errorf("mutation %d: %v, want read_only", i, err)
		}
	}
	if !g.Features().ReadOnly || !g.Features().Symlinks {
		t.Errorf("features %+v", g.Features())
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = h.Read(make([]byte, 1))
	wantCode(t, err, vfs.CodeClosed)
	wantCode(t, h.Close(), vfs.CodeClosed)
}

func TestFileReadAtSeek(t *testing.T) {
	f := newFixture(t)
	for name, opts := range map[string][]Option{
		"memory":   nil,
		"streamed": {WithStreamThreshold(0), WithLargeObjectThreshold(1)},
	} {
		t.Run(name, func(t *testing.T) {
			g, err := Open(f.dir, "HEAD", opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			testFileReadAtSeek(t, g, name == "streamed")
		})
	}
}

func testFileReadAtSeek(t *testing.T, g *FS, streamed bool) {
	ctx := context.Background()
	h, err := g.OpenFile(ctx, vfs.MustParse("run.sh"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, got := h.(*rofile.File).Source().(*streamSource); got != streamed {
		t.Fatalf("streamed = %v, want %v", got, streamed)
	}
	content := "#!/bin/sh\necho hi\n"
	b := make([]byte, 4)
	if n, err := h.ReadAt(b, 10); n != 4 || err != nil || string(b) != "echo" {
		t.Fatalf("ReadAt = %d %v %q", n, err, b)
	}
	if n, err := h.ReadAt(b, int64(len(content)-2)); n != 2 || err != io.EOF {
		t.Fatalf("short ReadAt = %d %v", n, err)
	}
	if off, err := h.Seek(-3, io.SeekEnd); err != nil || off != int64(len(content)-3) {
		t.Fatalf("Seek = %d %v", off, err)
	}
	rest, _ := io.ReadAll(h)
	if string(rest) != "hi\n" {
		t.Fatalf("after seek %q", rest)
	}
	// Backwards after reading to the end, then forwards past a gap.
	if n, err := h.ReadAt(b[:2], 0); n != 2 || err != nil || string(b[:2]) != "#!" {
		t.Fatalf("ReadAt(0) = %d %v %q", n, err, b[:2])
	}
	if n, err := h.ReadAt(b[:2], 15); n != 2 || err != nil || string(b[:2]) != "hi" {
		t.Fatalf("ReadAt(15) = %d %v %q", n, err, b[:2])
	}
	if n, err := h.ReadAt(b, int64(len(content))); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt(end) = %d %v", n, err)
	}
	if _, err := h.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if all, err := io.ReadAll(h); err != nil || string(all) != content {
		t.Fatalf("ReadAll after rewind = %q %v", all, err)
	}
	_, err = h.Seek(-1, io.SeekStart)
	wantCode(t, err, vfs.CodeInvalidPath)
	if i, err := h.Stat(); err != nil || i.Mode != 0o755 || i.Size != int64(len(content)) {
		t.Fatalf("Stat %+v %v", i, err)
	}
	d, err := g.OpenFile(ctx, vfs.MustParse("dir"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Read(b)
	wantCode(t, err, vfs.CodeIsDir)
	if tf, ok := d.(vfs.TypedFile); !ok || tf.Type() != fs.ModeDir {
		t.Fatal("directory handle does not report its type")
	}
	d.Close()
}

func TestSub(t *testing.T) {
	f := newFixture(t)
	g := open(t, "HEAD")
	ctx := context.Background()
	s, err := g.Sub(ctx, vfs.MustParse("dir/sub"))
	if err != nil {
		t.Fatal(err)
	}
	if id := s.(*FS).TreeID(); id != f.deepTree {
		t.Fatalf("Sub tree id %s, want %s", id, f.deepTree)
	}
	if got := readAll(t, s, "deep.txt"); got != "deep\n" {
		t.Fatalf("sub deep.txt = %q", got)
	}
	// dir/sub/top -> ../../a.txt works from the root but escapes the Sub.
	if got := readAll(t, g, "dir/sub/top"); got != "two\n" {
		t.Fatalf("top from root = %q", got)
	}
	_, err = s.Stat(ctx, vfs.MustParse("top"))
	wantCode(t, err, vfs.CodeOutside)
	// Sub through a symlink to a directory.
	s2, err := g.Sub(ctx, vfs.MustParse("dir/rel"))
	if err != nil || s2.(*FS).TreeID() != f.deepTree {
		t.Fatalf("Sub via link: %v", err)
	}
	_, err = g.Sub(ctx, vfs.MustParse("a.txt"))
	wantCode(t, err, vfs.CodeNotDir)
	sm, err := g.Sub(ctx, vfs.MustParse("sm"))
	if err != nil {
		t.Fatal(err)
	}
	if ents, err := sm.ReadDir(ctx, vfs.Path{}); err != nil || len(ents) != 0 {
		t.Fatalf("submodule Sub ReadDir %v %v", ents, err)
	}
}

func TestConcurrentReadsAndSmallCache(t *testing.T) {
	f := newFixture(t)
	g, err := Open(f.dir, "HEAD", WithTreeCacheSize(2), WithStreamThreshold(2))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			for i := 0; i < 20; i++ {
				for _, p := range []string{"dir/sub/deep.txt", "b/x", "link_in", "dir/up"} {
					h, err := g.OpenFile(context.Background(), vfs.MustParse(p), os.O_RDONLY, 0)
					if err != nil {
						t.Error(err)
						return
					}
					if _, err := io.ReadAll(h); err != nil {
						t.Error(err)
					}
					h.Close()
				}
			}
		})
	}
	wg.Wait()
	if n := g.r.cache.len(); n > 2 {
		t.Fatalf("tree cache holds %d trees, bound is 2", n)
	}
}

func TestLRU(t *testing.T) {
	c := newLRU(2)
	var h1, h2, h3 [20]byte
	h1[0], h2[0], h3[0] = 1, 2, 3
	d := &dir{}
	c.put(h1, d)
	c.put(h2, d)
	c.get(h1) // h2 becomes the least recent
	c.put(h3, d)
	if _, ok := c.get(h2); ok {
		t.Fatal("least recently used entry was not evicted")
	}
	if _, ok := c.get(h1); !ok {
		t.Fatal("recently used entry was evicted")
	}
	if c.len() != 2 {
		t.Fatalf("len %d", c.len())
	}
}

func TestErrorsNeverNameHostPath(t *testing.T) {
	f := newFixture(t)
	g := open(t, "HEAD")
	ctx := context.Background()
	var errs []error
	_, err := g.Stat(ctx, vfs.MustParse("nope/x"))
	errs = append(errs, err)
	_, err = g.OpenFile(ctx, vfs.MustParse("esc"), os.O_RDONLY, 0)
	errs = append(errs, err)
	_, err = Open(f.dir, "no-such-branch")
	errs = append(errs, err)
	_, err = Open(filepath.Join(f.dir, "dir"), "HEAD")
	errs = append(errs, err)
	for _, err := range errs {
		if err == nil {
			t.Fatal("expected an error")
		}
		var ve *vfs.Error
		if !errors.As(err, &ve) {
			t.Fatalf("%v is not a *vfs.Error", err)
		}
		if strings.Contains(err.Error(), f.dir) {
			t.Fatalf("error %q contains host path", err)
		}
	}
}

func TestCloseAndStorageOptions(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, opts := range [][]Option{
		nil,
		{WithMaxOpenDescriptors(0)},
		{WithLargeObjectThreshold(2), WithMaxOpenDescriptors(1)},
	} {
		g, err := Open(f.dir, "HEAD~1", opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, g, "run.sh"); got != "#!/bin/sh\necho hi\n" {
			t.Fatalf("run.sh = %q", got)
		}
		if got := readAll(t, g, "link_in"); got != "deep\n" {
			t.Fatalf("link_in = %q", got)
		}
		s, err := g.Sub(ctx, vfs.MustParse("dir"))
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		if err := g.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		_, err = g.Stat(ctx, vfs.MustParse("a.txt"))
		wantCode(t, err, vfs.CodeClosed)
		_, err = s.ReadDir(ctx, vfs.Path{})
		wantCode(t, err, vfs.CodeClosed)
	}
}

// treeWithPrefix returns the body of a one-entry tree (an empty file named by a
// counter) whose id starts with prefix, and that id, trying names from start on.
func treeWithPrefix(t *testing.T, prefix string, start int) ([]byte, string, int) {
	t.Helper()
	empty, _ := hex.DecodeString("e69de29bb2d1d6434b8b29ae775ad8c2e48c5391")
	for i := start; i < start+1<<24; i++ {
		body := append([]byte(fmt.Sprintf("100644 f%d\x00", i)), empty...)
		h := sha1.Sum(append([]byte(fmt.Sprintf("tree %d\x00", len(body))), body...))
		if id := hex.EncodeToString(h[:]); strings.HasPrefix(id, prefix) {
			return body, id, i
		}
	}
	t.Fatalf("no tree id starts with %s", prefix)
	return nil, "", 0
}

// TestAbbreviatedTreeID opens revisions by unique prefixes of a tree id, and
// refuses a prefix that two trees, or a tree and a commit, share.
func TestAbbreviatedTreeID(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not on PATH")
	}
	d := t.TempDir()
	runGit(t, d, "init", "-q")
	write(t, filepath.Join(d, "a.txt"), "one\n", 0o644)
	runGit(t, d, "add", "-A")
	runGit(t, d, "commit", "-q", "-m", "one")
	tree := runGit(t, d, "rev-parse", "HEAD^{tree}")
	commit := runGit(t, d, "rev-parse", "HEAD")
	for _, n := range []int{4, 7, 12, 39} {
		for _, rev := range []string{tree[:n], strings.ToUpper(tree[:n])} {
			g, err := Open(d, rev)
			if err != nil {
				t.Fatalf("Open(%q): %v", rev, err)
			}
			if g.TreeID() != tree || !g.modTime.IsZero() {
				t.Fatalf("Open(%q): tree %s, time %v; want %s, zero", rev, g.TreeID(), g.modTime, tree)
			}
			if got := readAll(t, g, "a.txt"); got != "one\n" {
				t.Fatalf("a.txt = %q", got)
			}
			g.Close()
		}
	}
	// A short commit id still resolves to the commit, with its time.
	g, err := Open(d, commit[:7])
	if err != nil || g.TreeID() != tree || g.modTime.IsZero() {
		t.Fatalf("Open(short commit): %v", err)
	}
	g.Close()

	// Two trees that share a 4-digit prefix, and a tree sharing the commit's.
	hashObject := func(body []byte) string {
		cmd := exec.Command("git", "hash-object", "-w", "-t", "tree", "--stdin")
		cmd.Dir = d
		cmd.Stdin = bytes.NewReader(body)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	runGit(t, d, "hash-object", "-w", "a.txt")
	b1, id1, i := treeWithPrefix(t, "", 0)
	b2, id2, _ := treeWithPrefix(t, id1[:4], i+1)
	b3, id3, _ := treeWithPrefix(t, commit[:4], 0)
	if hashObject(b1) != id1 || hashObject(b2) != id2 || hashObject(b3) != id3 {
		t.Fatal("git computed other tree ids")
	}
	for _, c := range []struct{ prefix, a, b string }{{id1[:4], id1, id2}, {commit[:4], commit, id3}} {
		_, err := Open(d, c.prefix)
		wantCode(t, err, vfs.CodeNotFound)
		msg := err.Error()
		if !strings.Contains(msg, "ambiguous") || !strings.Contains(msg, c.a[:12]) || !strings.Contains(msg, c.b[:12]) {
			t.Fatalf("Open(%q): %v", c.prefix, err)
		}
	}
	// One more digit tells them apart again (unless they share it too).
	for _, id := range []string{id1, id2} {
		k := 5
		for id1[:k] == id2[:k] {
			k++
		}
		g, err := Open(d, id[:k])
		if err != nil || g.TreeID() != id {
			t.Fatalf("Open(%q): %v", id[:k], err)
		}
		g.Close()
	}
	_, err = Open(d, "0000000")
	wantCode(t, err, vfs.CodeNotFound)
}
