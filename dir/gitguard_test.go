package dir_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// ggTree is one backend seen two ways: host (a plain Dir, for setting up what a
// guest could not) and guest (a Dir with the git guard and no policy, so every
// refusal below is the guard's).
type ggTree struct {
	name        string
	host, guest *dir.Dir
	hostRoot    string // the physical backend's host directory, "" for memory
}

func ggTrees(t *testing.T, opts ...dir.GitGuardOption) []ggTree {
	t.Helper()
	var out []ggTree
	m := memory.New()
	out = append(out, ggNew("memory", m, "", opts))
	root := t.TempDir()
	p, err := physical.New(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	out = append(out, ggNew("physical", p, root, opts))
	return out
}

func ggNew(name string, b vfs.Backend, hostRoot string, opts []dir.GitGuardOption) ggTree {
	host, _ := dir.New(b)
	guest, _ := dir.New(b, dir.WithHooks(dir.GitGuard(b, opts...)))
	return ggTree{name: name, host: host, guest: guest, hostRoot: hostRoot}
}

func ggMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ggRefused fails unless err is the guard's refusal, addressed to the guest's
// path and naming no host path.
func ggRefused(t *testing.T, tr ggTree, what string, err error) {
	t.Helper()
	var ve *vfs.Error
	if !errors.As(err, &ve) || ve.Code != vfs.CodePermission {
		t.Errorf("%s: %s: got %v, want fs_permission_denied", tr.name, what, err)
		return
	}
	if !strings.Contains(err.Error(), "git dir") {
		t.Errorf("%s: %s: %v does not say why", tr.name, what, err)
	}
	if tr.hostRoot != "" && strings.Contains(err.Error(), tr.hostRoot) {
		t.Errorf("%s: %s: error names the host path: %v", tr.name, what, err)
	}
}

// bare lays out d as a git dir from the host side.
func bare(t *testing.T, host *dir.Dir, d string) {
	t.Helper()
	ggMust(t, host.MkdirAll(bg, d+"/objects/ab"))
	ggMust(t, host.MkdirAll(bg, d+"/refs/heads"))
	ggMust(t, host.WriteFile(bg, d+"/HEAD", []byte("ref: refs/heads/main\n"), 0o644))
	ggMust(t, host.WriteFile(bg, d+"/config", []byte("[core]\n\tbare = true\n"), 0o644))
}

// TestGitGuardCompletion builds a git dir layout entry by entry in every order: the
// entry that would complete it is refused, the others are not.
func TestGitGuardCompletion(t *testing.T) {
	type step struct {
		name string
		do   func(ctx context.Context, d *dir.Dir, p string) error
	}
	mkdir := func(ctx context.Context, d *dir.Dir, p string) error { return d.MkdirAll(ctx, p) }
	write := func(ctx context.Context, d *dir.Dir, p string) error {
		return d.WriteFile(ctx, p, []byte("ref: refs/heads/main\n"), 0o644)
	}
	steps := []step{{"HEAD", write}, {"objects", mkdir}, {"refs", mkdir}}
	orders := [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, tr := range ggTrees(t) {
		for i, o := range orders {
			d := fmt.Sprintf("x%d", i)
			ggMust(t, tr.guest.MkdirAll(bg, d))
			for k, si := range o {
				s := steps[si]
				err := s.do(bg, tr.guest, d+"/"+s.name)
				if k < 2 {
					if err != nil {
						t.Errorf("%s: %s/%s (step %d): %v", tr.name, d, s.name, k, err)
					}
					continue
				}
				ggRefused(t, tr, d+"/"+s.name, err)
				if ok, _ := tr.host.Exists(bg, d+"/"+s.name); ok {
					t.Errorf("%s: %s/%s was created", tr.name, d, s.name)
				}
			}
		}
		// HEAD and commondir make a git dir too (objects and refs are looked for
		// in the common dir), in either order.
		ggMust(t, tr.guest.MkdirAll(bg, "w1"))
		ggMust(t, tr.guest.WriteFile(bg, "w1/HEAD", []byte("ref: refs/heads/main\n"), 0o644))
		ggRefused(t, tr, "w1/commondir", tr.guest.WriteFile(bg, "w1/commondir", []byte("../.git\n"), 0o644))
		ggMust(t, tr.guest.MkdirAll(bg, "w2"))
		ggMust(t, tr.guest.WriteFile(bg, "w2/commondir", []byte("../.git\n"), 0o644))
		ggRefused(t, tr, "w2/HEAD", tr.guest.WriteFile(bg, "w2/HEAD", []byte("ref: refs/heads/main\n"), 0o644))
		// A name differing in case counts (case-folding backends).
		ggMust(t, tr.guest.MkdirAll(bg, "w3/objects"))
		ggMust(t, tr.guest.MkdirAll(bg, "w3/refs"))
		ggRefused(t, tr, "w3/head", tr.guest.WriteFile(bg, "w3/head", nil, 0o644))
	}
}

// TestGitGuardOtherRoutes completes a layout by MkdirAll, rename, symlink, link and
// copy.
func TestGitGuardOtherRoutes(t *testing.T) {
	for _, tr := range ggTrees(t) {
		g, h := tr.guest, tr.host
		// x has HEAD and refs: objects would complete it.
		ggMust(t, h.MkdirAll(bg, "x/refs"))
		ggMust(t, h.WriteFile(bg, "x/HEAD", []byte("ref: refs/heads/main\n"), 0o644))
		ggRefused(t, tr, "MkdirAll x/objects/ab", g.MkdirAll(bg, "x/objects/ab"))
		ggMust(t, g.MkdirAll(bg, "tmp/objs"))
		ggRefused(t, tr, "Move tmp/objs x/objects", g.Move(bg, "tmp/objs", "x/objects"))
		ggRefused(t, tr, "Symlink x/objects", g.Symlink(bg, "../tmp/objs", "x/objects"))
		ggRefused(t, tr, "Copy tmp/objs x/objects", g.Copy(bg, "tmp/objs", "x/objects"))
		// y has objects and refs: a HEAD by any route would complete it.
		ggMust(t, h.MkdirAll(bg, "y/objects"))
		ggMust(t, h.MkdirAll(bg, "y/refs"))
		ggMust(t, g.WriteFile(bg, "tmp/head", []byte("ref: refs/heads/main\n"), 0o644))
		ggRefused(t, tr, "Link tmp/head y/HEAD", g.Link(bg, "tmp/head", "y/HEAD"))
		ggRefused(t, tr, "Move tmp/head y/HEAD", g.Move(bg, "tmp/head", "y/HEAD"))
		ggRefused(t, tr, "Copy tmp/head y/HEAD", g.Copy(bg, "tmp/head", "y/HEAD"))
		ggRefused(t, tr, "Symlink y/HEAD", g.Symlink(bg, "../tmp/head", "y/HEAD"))
		// Through an intermediate symlink to y, and through a final one into it.
		ggMust(t, h.Symlink(bg, "y", "ylink"))
		ggRefused(t, tr, "WriteFile ylink/HEAD", g.WriteFile(bg, "ylink/HEAD", nil, 0o644))
		ggMust(t, h.Symlink(bg, "y/HEAD", "dangling-head"))
		ggRefused(t, tr, "WriteFile dangling-head", g.WriteFile(bg, "dangling-head", []byte("ref: refs/heads/main\n"), 0o644))
		for _, p := range []string{"y/HEAD", "x/objects"} {
			if ok, _ := h.Exists(bg, p); ok {
				t.Errorf("%s: %s was created", tr.name, p)
			}
		}
	}
}

// TestGitGuardInside refuses every write inside (or to) a directory laid out as a
// git dir, whoever made it, and the git dir's moves and new names.
func TestGitGuardInside(t *testing.T) {
	for _, tr := range ggTrees(t) {
		g, h := tr.guest, tr.host
		bare(t, h, "proj/b")
		ggMust(t, h.MkdirAll(bg, "proj/keep"))
		ggMust(t, h.WriteFile(bg, "proj/note", []byte("n"), 0o644))
		ggMust(t, h.Symlink(bg, "b", "proj/alias"))
		ggMust(t, h.Symlink(bg, "b/config", "proj/cfglink"))
		cases := map[string]error{
			"WriteFile b/config":         g.WriteFile(bg, "proj/b/config", []byte("[core]\n\tfsmonitor = sh -c 'touch /tmp/pwned'\n"), 0o644),
			"Append b/config":            g.Append(bg, "proj/b/config", []byte("x")),
			"MkdirAll b/hooks":           g.MkdirAll(bg, "proj/b/hooks"),
			"WriteFile b/hooks/x":        g.WriteFile(bg, "proj/b/hooks/pre-commit", []byte("#!/bin/sh\n"), 0o755),
			"Remove b/HEAD":              g.Remove(bg, "proj/b/HEAD"),
			"RemoveAll b/refs":           g.RemoveAll(bg, "proj/b/refs"),
			"Chmod b/objects":            g.Chmod(bg, "proj/b/objects", 0o700),
			"Move b":                     g.Move(bg, "proj/b", "proj/c"),
			"Move b/config":              g.Move(bg, "proj/b/config", "proj/config"),
			"Move into b":                g.Move(bg, "proj/note", "proj/b/note"),
			"Move keep b/x":              g.Move(bg, "proj/keep", "proj/b/info"),
			"Symlink to b":               g.Symlink(bg, "b", "proj/b2"),
			"Symlink to b/config":        g.Symlink(bg, "b/config", "proj/c2"),
			"Symlink in b":               g.Symlink(bg, "../note", "proj/b/x"),
			"Link b/config":              g.Link(bg, "proj/b/config", "proj/cfg"),
			"Link into b":                g.Link(bg, "proj/note", "proj/b/note"),
			"Copy b":                     g.Copy(bg, "proj/b", "proj/c"),
			"Copy proj":                  g.Copy(bg, "proj", "proj2"),
			"Copy into b":                g.Copy(bg, "proj/note", "proj/b/note"),
			"WriteFile alias/config":     g.WriteFile(bg, "proj/alias/config", []byte("x"), 0o644),
			"WriteFile cfglink":          g.WriteFile(bg, "proj/cfglink", []byte("x"), 0o644),
			"Chmod cfglink":              g.Chmod(bg, "proj/cfglink", 0o600),
			"WriteFile alias/hooks/post": g.WriteFile(bg, "proj/alias/hooks/post-checkout", []byte("x"), 0o755),
		}
		for what, err := range cases {
			ggRefused(t, tr, what, err)
		}
		// Through a Sub: the request's Path is from the tree's root.
		sub, err := g.Sub(bg, "proj")
		ggMust(t, err)
		ggRefused(t, tr, "Sub WriteFile b/config", sub.WriteFile(bg, "b/config", []byte("x"), 0o644))
		inner, err := g.Sub(bg, "proj/b")
		ggMust(t, err)
		ggRefused(t, tr, "Sub of b WriteFile config", inner.WriteFile(bg, "config", []byte("x"), 0o644))
		if data, _ := h.ReadFile(bg, "proj/b/config"); string(data) != "[core]\n\tbare = true\n" {
			t.Errorf("%s: b/config changed: %q", tr.name, data)
		}
		// Reading stays allowed, and so does copying a file out.
		if _, err := g.ReadFile(bg, "proj/b/config"); err != nil {
			t.Errorf("%s: ReadFile b/config: %v", tr.name, err)
		}
		ggMust(t, g.Copy(bg, "proj/b/config", "proj/config.txt"))
	}
}

// TestGitGuardLeavesOrdinaryWork checks the names alone refuse nothing.
func TestGitGuardLeavesOrdinaryWork(t *testing.T) {
	for _, tr := range ggTrees(t) {
		g := tr.guest
		ggMust(t, g.MkdirAll(bg, "refs/heads"))  // the root has no HEAD
		ggMust(t, g.MkdirAll(bg, "src/objects")) // src has no HEAD
		ggMust(t, g.MkdirAll(bg, "docs/refs"))   // nor does docs
		ggMust(t, g.WriteFile(bg, "docs/HEAD", nil, 0o644))
		ggMust(t, g.WriteFile(bg, "src/HEAD.txt", []byte("x"), 0o644))
		ggMust(t, g.WriteFile(bg, "src/objects/a.go", []byte("package objects\n"), 0o644))
		ggMust(t, g.Move(bg, "src/objects", "src/objs"))
		ggMust(t, g.Copy(bg, "src", "src2"))
		ggMust(t, g.Symlink(bg, "src", "s"))
		ggMust(t, g.RemoveAll(bg, "src2"))
		ggMust(t, g.WriteFile(bg, "a.txt", []byte("a"), 0o644))
		ggMust(t, g.Chmod(bg, "a.txt", 0o600))
	}
}

// TestGitGuardAllowDotGit leaves a ".git" directory to the policy and still guards
// other git dirs.
func TestGitGuardAllowDotGit(t *testing.T) {
	for _, tr := range ggTrees(t, dir.GitGuardAllowDotGit()) {
		g, h := tr.guest, tr.host
		bare(t, h, ".git")
		bare(t, h, ".git/modules/lib")
		ggMust(t, g.WriteFile(bg, ".git/refs/heads/topic", []byte("0000\n"), 0o644))
		ggMust(t, g.WriteFile(bg, ".git/modules/lib/refs/heads/topic", []byte("0000\n"), 0o644))
		ggMust(t, g.MkdirAll(bg, "sub/.git/objects"))
		bare(t, h, "x")
		ggRefused(t, tr, "WriteFile x/config", g.WriteFile(bg, "x/config", []byte("x"), 0o644))
		ggMust(t, g.MkdirAll(bg, "y/objects"))
		ggMust(t, g.MkdirAll(bg, "y/refs"))
		ggRefused(t, tr, "WriteFile y/HEAD", g.WriteFile(bg, "y/HEAD", nil, 0o644))
	}
}

// TestGitGuardConcurrentHalves races the two last entries of a layout: at most one
// of them may succeed, every time.
func TestGitGuardConcurrentHalves(t *testing.T) {
	const rounds = 200
	for _, tr := range ggTrees(t) {
		for i := range rounds {
			d := fmt.Sprintf("r%d", i)
			ggMust(t, tr.guest.MkdirAll(bg, d+"/objects"))
			var wg sync.WaitGroup
			var errHead, errRefs error
			wg.Add(2)
			go func() {
				defer wg.Done()
				errHead = tr.guest.WriteFile(bg, d+"/HEAD", []byte("ref: refs/heads/main\n"), 0o644)
			}()
			go func() {
				defer wg.Done()
				_, errRefs = tr.guest.CreateDir(bg, d+"/refs")
			}()
			wg.Wait()
			if errHead == nil && errRefs == nil {
				t.Fatalf("%s: round %d: both halves of the layout were made", tr.name, i)
			}
		}
	}
}

// TestGitGuardWaitHonoursContext: a request waiting for the lock another holds
// gives up with its context, and the lock is free again after the holder's After.
func TestGitGuardWaitHonoursContext(t *testing.T) {
	g := dir.GitGuard(memory.New())
	holder := &policy.Request{ID: "1", Op: policy.OpMkdir, Path: "x/refs", Size: -1}
	ggMust(t, g.Before(bg, holder))
	ctx, cancel := context.WithCancel(bg)
	cancel()
	waiter := &policy.Request{ID: "2", Op: policy.OpCreate, Path: "x/HEAD", Size: -1}
	err := g.Before(ctx, waiter)
	if vfs.CodeOf(err) != vfs.CodeCanceled {
		t.Fatalf("Before while the lock is held, context canceled: %v, want canceled", err)
	}
	g.After(bg, holder, nil)
	ggMust(t, g.Before(bg, waiter))
	g.After(bg, waiter, nil)
	// Reads and requests without an ID take no lock.
	ggMust(t, g.Before(bg, &policy.Request{Op: policy.OpRead, Path: "x/HEAD"}))
	ggMust(t, g.Before(bg, &policy.Request{Op: policy.OpCreate, Path: "y/HEAD"}))
	ggMust(t, g.Before(bg, &policy.Request{ID: "3", Op: policy.OpCreate, Path: "x/HEAD"}))
	g.After(bg, &policy.Request{ID: "3"}, nil)
}
