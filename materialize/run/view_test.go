//go:build linux

package run

import (
	"context"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// hidingLower keeps the optional interfaces of the view beneath it; its
// listings are its own (they leave hidden names out).
func TestHidingLowerForwardsOptionalInterfaces(t *testing.T) {
	wrap := func(b vfs.Backend) vfs.Backend { return hidingLower{Backend: b, view: ViewPolicy{Root: "/"}} }
	vfstest.CheckForwards(t, memory.New(), wrap, vfstest.Forwarding{
		Withheld: map[string]string{
			"HostPather": "binding the host directory would show what it hides",
			"Chowner":    "a lower layer is only read",
			"LinkTimer":  "a lower layer is only read",
			"Locator":    "the Dir's view beneath withholds it",
		},
		Sub: &vfstest.Forwarding{}, // hidingLower's Sub is the view's own
	})
	vfstest.CheckClaims(t, memory.New(), wrap)
}

// Its fused listing leaves out what its ReadDir leaves out.
func TestHidingLowerResolveReadDirHides(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	for _, name := range []string{"shown", "secret"} {
		if err := b.Mkdir(ctx, vfs.MustParse(name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	deny := policy.Func(func(_ context.Context, r *policy.Request) policy.Decision {
		if r.GuestPath == "secret" {
			return policy.Decision{Effect: policy.Deny}
		}
		return policy.Decision{Effect: policy.Allow}
	})
	h := hidingLower{Backend: b, view: ViewPolicy{Inner: deny}}
	ents, _, err := h.ResolveReadDir(ctx, vfs.Root, func(vfs.Location) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name != "shown" {
		t.Errorf("ResolveReadDir(.) = %v, want only shown", ents)
	}
	plain, err := h.ReadDir(ctx, vfs.Root)
	if err != nil || len(plain) != 1 {
		t.Errorf("ReadDir(.) = %v, %v; want only shown", plain, err)
	}
}

// TestGitViewShows: the lazy view shows the root's .git (and, when the
// scan fingerprinted it, only the objects it covered), never a nested one.
func TestGitViewShows(t *testing.T) {
	var hidden *GitView
	open := &GitView{Shown: true}
	limited := &GitView{Shown: true, Objects: map[string]bool{"objects": true, "objects/ab": true, "objects/ab/cd": true}}
	for _, c := range []struct {
		g    *GitView
		p    string
		want bool
	}{
		{hidden, ".git/HEAD", false},
		{open, ".git", true},
		{open, ".git/HEAD", true},
		{open, ".git/objects/ab/cd", true},
		{open, "sub/.git/HEAD", false},
		{open, ".git/modules/m/.git/HEAD", false},
		{limited, ".git/HEAD", true},
		{limited, ".git/objects/ab/cd", true},
		{limited, ".git/objects/ab/ef", false},
		{limited, ".git/objects/pack", false},
		{limited, ".git/modules", false},
	} {
		if got := c.g.Shows(c.p); got != c.want {
			t.Errorf("%+v.Shows(%q) = %v, want %v", c.g, c.p, got, c.want)
		}
	}
}

// TestInGitBeneathGit: InGit finds a ".git" component anywhere in a path,
// BeneathGit only in its parent.
func TestInGitBeneathGit(t *testing.T) {
	for _, c := range []struct {
		p               string
		in, beneathWant bool
	}{
		{"", false, false},
		{".git", true, false},
		{".git/HEAD", true, true},
		{"a/.git", true, false},
		{"a/.git/objects/ab", true, true},
		{"a/.gitx/b", false, false},
		{"x.git/b", false, false},
		{"a/b/c", false, false},
		{"a//.git", true, false},
	} {
		if got := InGit(c.p); got != c.in {
			t.Errorf("InGit(%q) = %v, want %v", c.p, got, c.in)
		}
		if got := BeneathGit(c.p); got != c.beneathWant {
			t.Errorf("BeneathGit(%q) = %v, want %v", c.p, got, c.beneathWant)
		}
	}
}
