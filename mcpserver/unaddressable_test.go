//go:build linux

package mcpserver_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/mcpserver"
	"github.com/capfs/capfs/policy"
)

// TestUnaddressableNamesListed: a host name no path can hold ("a\b") is not
// dropped silently by list (with and without sizes) and tree: each shows it
// once, as an entry of type unaddressable with the reason; with the openat2
// and the portable resolvers. Before, the name was missing from both.
func TestUnaddressableNamesListed(t *testing.T) {
	for _, r := range []struct {
		name string
		mode physical.ResolverMode
	}{{"openat2", physical.ResolverAuto}, {"portable", physical.ResolverPortable}} {
		t.Run(r.name, func(t *testing.T) { unaddressableListed(t, r.mode) })
	}
}

func unaddressableListed(t *testing.T, mode physical.ResolverMode) {
	host := t.TempDir()
	for _, name := range []string{"a.txt", `a\b`, "sub/x", `sub/c\d`} {
		p := filepath.Join(host, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pb, err := physical.New(host, physical.WithResolver(mode))
	if err != nil {
		t.Skipf("physical backend: %v", err)
	}
	t.Cleanup(func() { pb.Close() })
	d, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
	cs := connect(t, d, mcpserver.Options{})
	once := func(what, text, want string) {
		t.Helper()
		if n := strings.Count(text, want); n != 1 {
			t.Errorf("%s shows %q %d times; want once:\n%s", what, want, n, text)
		}
	}
	for _, args := range []map[string]any{{}, {"sizes": false}} {
		r := callTool(t, cs, "list", args)
		if r.isErr {
			t.Fatalf("list %v: %s", args, r.text)
		}
		once("list", r.text, `[SKIPPED] a\\b (cannot be addressed: contains a backslash)`)
		if !strings.Contains(r.text, "a.txt") {
			t.Errorf("list %v lost a.txt:\n%s", args, r.text)
		}
	}
	r := callTool(t, cs, "tree", map[string]any{})
	if r.isErr {
		t.Fatalf("tree: %s", r.text)
	}
	once("tree", r.text, "\n  a\\\\b (cannot be addressed: contains a backslash)\n")
	once("tree", r.text, "\n    c\\\\d (cannot be addressed: contains a backslash)\n")
	if i, j := strings.Index(r.text, "sub/"), strings.Index(r.text, `c\\d`); i < 0 || j < i {
		t.Errorf("tree shows sub's skipped name outside sub:\n%s", r.text)
	}
}

// TestUnaddressableGitNamesListed: a git tree's name no path can hold
// ("a\b"), which the git backend lists, shows in list and tree once as
// unaddressable, not as an entry nothing can reach (list on 8a35f16) nor
// not at all (tree on 8a35f16).
func TestUnaddressableGitNamesListed(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	repo := t.TempDir()
	for _, name := range []string{"ok", `a\b`} {
		if err := os.WriteFile(filepath.Join(repo, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "c"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	g, err := gitree.Open(repo, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	d, _ := dir.New(g, dir.WithPolicy(policy.Defaults()))
	cs := connect(t, d, mcpserver.Options{})
	for _, c := range []struct{ tool, want string }{
		{"list", `[SKIPPED] a\\b (cannot be addressed: contains a backslash)`},
		{"tree", `a\\b (cannot be addressed: contains a backslash)`},
	} {
		r := callTool(t, cs, c.tool, map[string]any{})
		if r.isErr || strings.Count(r.text, c.want) != 1 || strings.Count(r.text, `a\\b`) != 1 {
			t.Errorf("%s (error %v): want %q once, and a\\b nowhere else:\n%s", c.tool, r.isErr, c.want, r.text)
		}
	}
}
