//go:build linux

package materialize_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	gitmemory "github.com/go-git/go-git/v5/storage/memory"

	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/billyfs"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// leavingLinks are links whose target leaves the tree, as repositories hold
// them: absolute, and climbing above the root.
var leavingLinks = map[string]string{
	"bin/env":   "/usr/bin/env",
	"etc":       "/etc",
	"up":        "../outside",
	"src/climb": "../../x",
}

// wantLinks fails t unless each of leavingLinks is a link in host directory
// root with its target as written.
func wantLinks(t *testing.T, root string) {
	t.Helper()
	for name, target := range leavingLinks {
		if got, err := os.Readlink(filepath.Join(root, name)); err != nil || got != target {
			t.Errorf("%s: link = %q, %v; want %q", name, got, err, target)
		}
	}
}

// TestCheckoutCarriesLeavingLinks: a checkout writes a link whose target is
// absolute or climbs above the source's root as it is (issue 29: a target is
// data), and a sync-back of the checkout, the links unchanged, has nothing to
// refuse. Before, each was skipped (path_outside_sandbox).
func TestCheckoutCarriesLeavingLinks(t *testing.T) {
	b := memory.New()
	d, _ := dir.New(b, dir.WithPolicy(policy.Defaults()))
	fill(t, d)
	must(t, d.MkdirAll(ctx, "bin"))
	for name, target := range leavingLinks {
		must(t, d.Symlink(ctx, target, name))
	}
	before := snapshot(t, d)
	tr := checkout(t, d, materialize.Options{})
	if sk := tr.Skipped(); len(sk) != 0 {
		t.Fatalf("skipped %v", sk)
	}
	wantLinks(t, tr.Path())
	// Nothing changed: nothing to apply, nothing refused.
	rep, err := syncback.Run(ctx, tr, syncback.Options{})
	must(t, err)
	if len(rep.Applied) != 0 || len(rep.NotApplied) != 0 {
		t.Fatalf("report %+v", rep)
	}
	// A change beside them is applied; the links are no change.
	must(t, os.WriteFile(filepath.Join(tr.Path(), "README"), []byte("edited"), 0o644))
	rep, err = syncback.Run(ctx, tr, syncback.Options{})
	must(t, err)
	if len(rep.Applied) != 1 || len(rep.NotApplied) != 0 || rep.Applied[0].Path != "README" {
		t.Fatalf("report %+v", rep)
	}
	before["README"] = "f -rw-r--r-- edited"
	sameMap(t, snapshot(t, d), before)
	// A new one made in the checkout is still refused.
	must(t, os.Symlink("/etc/shadow", filepath.Join(tr.Path(), "new")))
	rep, err = syncback.Run(ctx, tr, syncback.Options{})
	if vfs.CodeOf(err) != vfs.CodeOutside || len(rep.NotApplied) != 1 || rep.NotApplied[0].Change.Path != "new" || rep.NotApplied[0].Code != vfs.CodeOutside {
		t.Fatalf("report %+v, %v", rep, err)
	}
	if ok, _ := d.Exists(ctx, "new"); ok {
		t.Fatal("a new absolute link reached the source")
	}
}

// TestCheckoutPhysicalLeavingLinks: from a host directory, a climbing link is
// checked out as it is; an absolute one, whose target the physical backend
// does not show (a host path), is skipped.
func TestCheckoutPhysicalLeavingLinks(t *testing.T) {
	host := t.TempDir()
	must(t, os.Symlink("/etc/passwd", filepath.Join(host, "abs")))
	must(t, os.Symlink("../outside", filepath.Join(host, "esc")))
	pb, err := physical.New(host)
	must(t, err)
	defer pb.Close()
	d, _ := dir.New(pb)
	tr := checkout(t, d, materialize.Options{})
	sk := tr.Skipped()
	if len(sk) != 1 || sk[0].Path != "abs" || sk[0].Code != vfs.CodeOutside {
		t.Fatalf("skipped %v", sk)
	}
	if got, err := os.Readlink(filepath.Join(tr.Path(), "esc")); err != nil || got != "../outside" {
		t.Fatalf("esc = %q, %v", got, err)
	}
}

// linksRepo builds a repository holding leavingLinks and a file with the git CLI
// and returns its directory.
func linksRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not on PATH")
	}
	repo := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@e", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q")
	must(t, os.MkdirAll(filepath.Join(repo, "src"), 0o755))
	must(t, os.MkdirAll(filepath.Join(repo, "bin"), 0o755))
	must(t, os.WriteFile(filepath.Join(repo, "src/main.go"), []byte("package main\n"), 0o644))
	for name, target := range leavingLinks {
		must(t, os.Symlink(target, filepath.Join(repo, name)))
	}
	run("add", "-A")
	run("commit", "-q", "-m", "links")
	return repo
}

// TestRepositoryWithAbsoluteLinks: a repository holding absolute and climbing
// links clones through billyfs into a Dir (with the default policy) and checks
// out from its git tree (issue 29). Before, the clone failed as a whole
// (Dir.Symlink: path_outside_sandbox) and the checkout skipped the links.
func TestRepositoryWithAbsoluteLinks(t *testing.T) {
	repo := linksRepo(t)
	t.Run("clone", func(t *testing.T) {
		d, _ := dir.New(memory.New(), dir.WithPolicy(policy.Defaults()))
		_, err := git.Clone(gitmemory.NewStorage(), billyfs.New(d), &git.CloneOptions{URL: repo})
		if err != nil {
			t.Fatalf("clone: %v", err)
		}
		for name, target := range leavingLinks {
			if got, err := d.Readlink(ctx, name); err != nil || got != target {
				t.Errorf("%s: link = %q, %v; want %q", name, got, err, target)
			}
		}
		// Never followed: through the link is outside the sandbox.
		_, err = d.ReadFile(ctx, "etc/passwd")
		if vfs.CodeOf(err) != vfs.CodeOutside {
			t.Fatalf("read through etc: %v", err)
		}
		tr := checkout(t, d, materialize.Options{})
		wantLinks(t, tr.Path())
	})
	t.Run("gitree", func(t *testing.T) {
		g, err := gitree.Open(repo, "HEAD")
		must(t, err)
		t.Cleanup(func() { g.Close() })
		d, _ := dir.New(g)
		tr := checkout(t, d, materialize.Options{})
		if sk := tr.Skipped(); len(sk) != 0 {
			t.Fatalf("skipped %v", sk)
		}
		wantLinks(t, tr.Path())
		if b, err := os.ReadFile(filepath.Join(tr.Path(), "src/main.go")); err != nil || !strings.HasPrefix(string(b), "package") {
			t.Fatalf("src/main.go = %q, %v", b, err)
		}
	})
}
