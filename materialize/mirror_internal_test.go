//go:build linux

package materialize

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize/internal/hostfs"
)

// TestRemoveTreeUnmountsPrivate: a kept private checkout (a tmpfs of its own)
// is removed by hostfs.RemoveTree, as Recover does, mount and directory alike.
func TestRemoveTreeUnmountsPrivate(t *testing.T) {
	ctx := context.Background()
	d, _ := dir.New(memory.New())
	if err := d.WriteFile(ctx, "a", []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := Checkout(ctx, d, Options{Private: true})
	if err != nil {
		t.Fatal(err)
	}
	p := tr.Path()
	if !hostfs.PrivateMount(p) {
		tr.Close()
		t.Skipf("no private tmpfs here (not root, or %s is not on a tmpfs)", p)
	}
	tr.Keep()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if !hostfs.PrivateMount(p) {
		t.Fatal("a kept private checkout was unmounted by Close")
	}
	if err := hostfs.RemoveTree(p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after hostfs.RemoveTree: %v", err)
	}
	// A plain directory named like a checkout is not taken for a mount.
	plain := t.TempDir() + "/capfs-checkout-1"
	if err := os.Mkdir(plain, 0o700); err != nil {
		t.Fatal(err)
	}
	if hostfs.PrivateMount(plain) {
		t.Fatal("a plain directory taken for a private mount")
	}
}
