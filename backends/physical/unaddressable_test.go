//go:build linux

package physical_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// noted collects what listings report under vfs.WithUnaddressable.
type noted struct {
	mu   sync.Mutex
	seen []string
}

func (n *noted) ctx() context.Context {
	return vfs.WithUnaddressable(context.Background(), func(u vfs.Unaddressable) {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.seen = append(n.seen, u.String())
	})
}

func (n *noted) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.seen
	n.seen = nil
	return s
}

// TestUnaddressableNamesAreReported: a host name no vfs.Path can hold ("a\b")
// is left out of every listing, as before, and each listing that meets it
// reports it once, with its reason, under vfs.WithUnaddressable: the
// backend's ReadDir, ReadDirInfo and ResolveReadDir, and a Dir's List,
// ReadDir, Walk and Sub over a read-only Namespace mount, with a policy; with
// the openat2 and the portable resolvers. Before, the name vanished silently.
func TestUnaddressableNamesAreReported(t *testing.T) {
	for _, r := range []struct {
		name string
		mode physical.ResolverMode
	}{{"openat2", physical.ResolverAuto}, {"portable", physical.ResolverPortable}} {
		t.Run(r.name, func(t *testing.T) { unaddressableReported(t, r.mode) })
	}
}

func unaddressableReported(t *testing.T, mode physical.ResolverMode) {
	host := t.TempDir()
	for _, name := range []string{"ok", `a\b`, `sub\`, "sub/x", `sub/c\d`} {
		p := filepath.Join(host, name)
		if name == `sub\` {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := physical.New(host, physical.WithResolver(mode))
	if err != nil {
		t.Skipf("physical backend: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	var n noted
	ctx := n.ctx()
	root := []string{`"a\\b": contains a backslash`, `"sub\\": contains a backslash`}
	sub := []string{`"c\\d": contains a backslash`}
	want := func(what string, got, want []string) {
		t.Helper()
		want = slices.Sorted(slices.Values(want))
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s reported %q; want %q", what, got, want)
		}
	}

	ents, err := b.ReadDir(ctx, vfs.Root)
	if err != nil || len(ents) != 2 || ents[0].Name != "ok" || ents[1].Name != "sub" {
		t.Fatalf("ReadDir: %v, %v", ents, err)
	}
	want("ReadDir", n.take(), root)
	if _, err := b.ReadDir(context.Background(), vfs.Root); err != nil {
		t.Fatal(err)
	}
	want("ReadDir without the context", n.take(), nil)
	if infos, err := vfs.ReadDirInfo(ctx, b, vfs.MustParse("sub")); err != nil || len(infos) != 1 {
		t.Fatalf("ReadDirInfo: %v, %v", infos, err)
	}
	want("ReadDirInfo", n.take(), sub)
	if _, _, err := vfs.ResolveReadDir(ctx, b, vfs.MustParse("sub"), func(vfs.Location) error { return nil }); err != nil {
		t.Fatal(err)
	}
	want("ResolveReadDir", n.take(), sub)

	ns := vfs.NewNamespace()
	if err := ns.Mount(vfs.MustParse("p"), vfs.ReadOnly(b), vfs.MountOptions{}); err != nil {
		t.Fatal(err)
	}
	d, _ := dir.New(ns, dir.WithPolicy(policy.Defaults()))
	if names, err := d.List(ctx, "p"); err != nil || !slices.Equal(names, []string{"ok", "sub"}) {
		t.Fatalf("List: %v, %v", names, err)
	}
	want("Dir.List", n.take(), root)
	if _, err := d.ReadDir(ctx, "p/sub"); err != nil {
		t.Fatal(err)
	}
	want("Dir.ReadDir", n.take(), sub)
	if _, err := d.ReadDirVisible(ctx, "p/sub"); err != nil {
		t.Fatal(err)
	}
	want("Dir.ReadDirVisible", n.take(), sub)
	if err := d.Walk(ctx, "", func(string, fs.DirEntry, error) error { return nil }); err != nil {
		t.Fatal(err)
	}
	want("Dir.Walk", n.take(), append(append([]string(nil), root...), sub...))
	s, err := d.Sub(ctx, "p/sub")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadDir(ctx, ""); err != nil {
		t.Fatal(err)
	}
	want("Sub's ReadDir", n.take(), sub)
}
