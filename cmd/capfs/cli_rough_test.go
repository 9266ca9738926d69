//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/capfs/capfs/internal/mountkind"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/vfs"
)

// TestSandboxUnavailableMessage: without bubblewrap, run says so once (no
// "run: run:"), says how to install it or run without it, and exits 125.
func TestSandboxUnavailableMessage(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	r := runCapfsEnv(t, dir, []string{"PATH=" + t.TempDir()}, "-m", "p=physical:"+dir, "run", "--work", "p", "--", "true").want(t, exitRunFailed)
	if strings.Contains(r.stderr, "run: run:") || strings.Count(r.stderr, "sandbox unavailable") != 1 {
		t.Errorf("want one \"sandbox unavailable\" and no \"run: run:\":\n%s", r.stderr)
	}
	for _, want := range []string{"install bubblewrap (apt-get install bubblewrap", "--allow-unsandboxed"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("no %q in:\n%s", want, r.stderr)
		}
	}
}

// TestUnknownCommandSuggests: a mistyped command, at the top or in a group,
// is a usage error that names the command meant.
func TestUnknownCommandSuggests(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lss"}, `unknown command "lss" for "capfs"; did you mean ls?`},
		{[]string{"cache", "lss"}, `unknown command "lss" for "capfs cache"; did you mean ls?`},
		{[]string{"snapshot", "sav"}, `did you mean save?`},
	} {
		r := capfsExec(t, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("capfs %q: exit %d, want 2 and %q:\n%s", tc.args, r.code, tc.want, r.stderr)
		}
	}
	if r := capfsExec(t, "xyzzy"); r.code != exitUsage || strings.Contains(r.stderr, "did you mean") {
		t.Errorf("capfs xyzzy: exit %d, want 2 and no suggestion:\n%s", r.code, r.stderr)
	}
}

// TestNotFoundMountHint: a path that lies under no mount is answered with
// the mount that holds it, or the mounts; a path under a mount is not.
func TestNotFoundMountHint(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"main.go": "package main\n"})
	m := []string{"-m", "project=physical:" + dir, "-m", "tmp=memory:"}
	for _, tc := range []struct{ path, want string }{
		{"main.go", "(not_found); paths start with a mount: project/main.go\n"},
		{"nope.go", "(not_found); paths start with a mount: project, tmp (capfs mounts)\n"},
		{"project/nope.go", "(not_found)\n"},
	} {
		r := capfsExec(t, append(m, "cat", tc.path)...).want(t, 1)
		if !strings.HasSuffix(r.stderr, tc.want) {
			t.Errorf("cat %s: want the message to end %q:\n%s", tc.path, tc.want, r.stderr)
		}
	}
}

// TestHelpListsEveryMountKind: capfs --help lists every kind --mount takes
// (mountkind.List), each with its description.
func TestHelpListsEveryMountKind(t *testing.T) {
	r := capfsExec(t, "--help").want(t, 0)
	kinds := mountkind.List()
	if len(kinds) < 6 {
		t.Fatalf("%d registered mount kinds, want physical, git, memory, cas, sqlite and agentfs", len(kinds))
	}
	for _, k := range kinds {
		if k.Name == "fake" || k.Name == "fakescratch" {
			continue // kind_registry_test.go's
		}
		if k.Help == "" {
			t.Errorf("mount kind %s has no Help", k.Name)
		}
		listed := strings.Contains(r.stdout, "  "+k.Usage+"\n") || strings.Contains(r.stdout, "  "+k.Usage+"  ")
		if !listed || !strings.Contains(r.stdout, k.Help) {
			t.Errorf("capfs --help does not list mount kind %s (%s)", k.Name, k.Usage)
		}
	}
	if !strings.Contains(r.stdout, "# "+mountkind.NameList()) {
		t.Errorf("the configuration's kind line does not name every kind (%s)", mountkind.NameList())
	}
}

// TestCacheLsOnlyProjectCaches: cache ls lists project caches only (not the
// CAS store that shares the cache directory, shown before as "cas 0 B
// 0001-01-01"), and cache clean never removes anything else.
func TestCacheLsOnlyProjectCaches(t *testing.T) {
	root := t.TempDir()
	t.Setenv("CAPFS_CACHE_DIR", root)
	name := "0123456789abcdef"
	writeTree(t, root, map[string]string{
		"cas/blobs/x":                name + "-not",
		name + "/data/go-build/x":    "cached",
		name + "/meta.json":          `{"project":"physical:/p","last_used":"2026-01-02T03:04:05Z"}`,
		"fedcba9876543210/data/keep": "",
	})
	r := capfsExec(t, "cache", "ls").want(t, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], name+" ") || !strings.Contains(lines[1], "physical:/p") {
		t.Fatalf("cache ls: want a header and two project caches:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "cas") || strings.Contains(r.stdout, "0001-01-01") {
		t.Errorf("cache ls shows what is no project cache:\n%s", r.stdout)
	}
	if !strings.HasPrefix(lines[2], "fedcba9876543210 ") || !strings.Contains(lines[2], " -  ") {
		t.Errorf("a cache without its record: want \"-\" for its last use and project:\n%s", r.stdout)
	}
	capfsExec(t, "cache", "clean", "cas").want(t, exitUsage)
	capfsExec(t, "cache", "clean", "--all").want(t, 0)
	ents, _ := os.ReadDir(root)
	if len(ents) != 1 || ents[0].Name() != "cas" {
		t.Errorf("cache clean --all: want only cas left, got %v", ents)
	}
}

// TestSummaryTellingFirst: the text summary lists executables and top-level
// outputs before object files, however the paths sort.
func TestSummaryTellingFirst(t *testing.T) {
	rep := &syncback.Report{}
	add := func(p string, mode os.FileMode) {
		rep.Applied = append(rep.Applied, materialize.Change{Kind: materialize.Added, Path: p, New: &materialize.Entry{Size: 10, Mode: mode}})
	}
	for i := range 10 {
		add(fmt.Sprintf("src/l%d.o", i), 0o644)
	}
	add("src/liblua.a", 0o644)
	add("src/lua", 0o755)
	add("src/luac", 0o755)
	add("lua.pc", 0o644)
	add("a.o", 0o644)
	s := newSummary(vfs.MustParse("project"), "applied", rep)
	s.show = 4
	var b bytes.Buffer
	writeSummary(&b, s, nil)
	var listed []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "  A ") {
			listed = append(listed, strings.Fields(l)[1])
		}
	}
	if want := []string{"project/src/lua", "project/src/luac", "project/lua.pc", "project/a.o"}; !slices.Equal(listed, want) {
		t.Errorf("listed %q first, want %q:\n%s", listed, want, b.String())
	}
}

// TestNotInSandboxGrouped: many paths left out of a checkout for one reason
// are one line with a count; a few are one a line.
func TestNotInSandboxGrouped(t *testing.T) {
	var b bytes.Buffer
	r := &runner{stderr: &b}
	var skips []materialize.Skip
	for i := range 32 {
		skips = append(skips, materialize.Skip{Path: fmt.Sprintf("testdata/k%02d.pem", i), Code: vfs.CodePermission})
	}
	skips = append(skips, materialize.Skip{Path: "fifo", Code: vfs.CodeNotRegular})
	r.sayNotInSandbox(vfs.MustParse("project"), skips)
	want := "capfs: run: not in the sandbox: 32 paths the policy hides (project/testdata/k00.pem, project/testdata/k01.pem and 30 more; --show -1 lists them)\n" +
		"capfs: run: not in the sandbox: project/fifo (" + string(vfs.CodeNotRegular) + ")\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	r.show = -1
	r.sayNotInSandbox(vfs.MustParse("project"), skips)
	if n := strings.Count(b.String(), "\n"); n != 33 || !strings.Contains(b.String(), "not in the sandbox: project/testdata/k31.pem (fs_permission_denied)\n") {
		t.Errorf("--show -1: want every path on its own line, got %d lines:\n%s", n, b.String())
	}
}
