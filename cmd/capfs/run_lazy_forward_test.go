package main

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
	wrap := func(b vfs.Backend) vfs.Backend { return hidingLower{Backend: b, view: lazyViewPolicy{root: "/"}} }
	vfstest.CheckForwards(t, memory.New(), wrap, vfstest.Forwarding{
		Withheld: map[string]string{
			"HostPather": "binding the host directory would show what it hides",
			"Chowner":    "a lower layer is only read",
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
	h := hidingLower{Backend: b, view: lazyViewPolicy{inner: deny}}
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
