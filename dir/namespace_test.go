package dir_test

import (
	"context"
	"slices"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// TestNamespaceMounts runs a Dir over a real Namespace: a cross-mount Move needs
// AllowCopy, a read-only mount refuses writes, and a Dir's Backend view mounts into
// another Namespace with its restrictions intact.
func TestNamespaceMounts(t *testing.T) {
	ns := vfs.NewNamespace()
	a, b, ro := memory.New(), memory.New(), memory.New()
	must(t, ns.Mount(vfs.MustParse("a"), a, vfs.MountOptions{}))
	must(t, ns.Mount(vfs.MustParse("b"), b, vfs.MountOptions{}))
	must(t, ns.Mount(vfs.MustParse("ro"), ro, vfs.MountOptions{ReadOnly: true}))
	root, _ := dir.New(ns)
	wantList(t, root, "", "a", "b", "ro")
	must(t, root.MkdirAll(bg, "a/x/y"))
	must(t, root.WriteFile(bg, "a/x/y/f.txt", []byte("F"), 0o644))

	wantCode(t, root.Move(bg, "a/x", "b/x"), vfs.CodeCrossMount)
	must(t, root.Move(bg, "a/x", "b/x", dir.AllowCopy()))
	if readString(t, root, "b/x/y/f.txt") != "F" {
		t.Fatal("copy-move across mounts")
	}
	wantList(t, root, "a")
	wantCode(t, root.WriteFile(bg, "ro/f", nil, 0o644), vfs.CodeReadOnly)

	// A granted Dir, mounted elsewhere through its Backend view, keeps its limits.
	grant, err := root.Sub(bg, "b/x")
	must(t, err)
	ns2 := vfs.NewNamespace()
	must(t, ns2.Mount(vfs.MustParse("granted"), grant.ReadOnly().Backend(), vfs.MountOptions{}))
	outer, _ := dir.New(ns2)
	if readString(t, outer, "granted/y/f.txt") != "F" {
		t.Fatal("read through a mounted view")
	}
	wantCode(t, outer.WriteFile(bg, "granted/y/f.txt", []byte("no"), 0o644), vfs.CodeReadOnly)
	wantCode(t, outer.Symlink(bg, "../../a", "granted/esc"), vfs.CodeOutside)
}

func TestCopyDecidesTheSourceAsARead(t *testing.T) {
	denyRead := policy.Func(func(_ context.Context, r *policy.Request) policy.Decision {
		if r.Op == policy.OpRead && r.Path == "other/.env" {
			return policy.Decision{Effect: policy.Deny, Rule: "deny-read:.env"}
		}
		return policy.Decision{Effect: policy.Allow}
	})
	d, _, _ := newTree(t, dir.WithPolicy(denyRead))
	_, err := d.ReadFile(bg, "other/.env")
	wantCode(t, err, vfs.CodePermission)
	wantCode(t, d.Copy(bg, "other/.env", "leak"), vfs.CodePermission)
	wantCode(t, d.Copy(bg, "other", "other2"), vfs.CodePermission)
	for _, n := range []string{"leak", "other2"} {
		if ok, _ := d.Exists(bg, n); ok {
			t.Fatalf("refused Copy created %s", n)
		}
	}
	must(t, d.Copy(bg, "other/x.md", "x2.md"))
}

func TestCanceledContext(t *testing.T) {
	d, _, _ := newTree(t)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err := d.ReadFile(ctx, "a.txt")
	wantCode(t, err, vfs.CodeCanceled)
	wantCode(t, d.RemoveAll(ctx, "dir"), vfs.CodeCanceled)
	wantCode(t, d.Copy(ctx, "dir", "dir2"), vfs.CodeCanceled)
	names, err := d.List(bg, "")
	must(t, err)
	if !slices.Contains(names, "dir") || slices.Contains(names, "dir2") {
		t.Fatalf("canceled calls changed the tree: %q", names)
	}
}
