//go:build linux

package materialize_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// TestCheckoutReportsUnaddressable: a host name no capfs path can hold
// ("a\b", "sub/c\d") is not in a checkout, and Skipped names it
// (invalid_path, with the reason), so the run's summary does; a read-only
// checkout that could bind the host directory copies instead, since a bind
// would show the name. With the openat2 and the portable resolvers. Fails on
// 8a35f16 (Skipped was empty: the names were left out silently).
func TestCheckoutReportsUnaddressable(t *testing.T) {
	for _, r := range []struct {
		name string
		mode physical.ResolverMode
	}{{"openat2", physical.ResolverAuto}, {"portable", physical.ResolverPortable}} {
		t.Run(r.name, func(t *testing.T) {
			host := t.TempDir()
			for _, name := range []string{"a.txt", `a\b`, "sub/x", `sub/c\d`} {
				p := filepath.Join(host, name)
				must(t, os.MkdirAll(filepath.Dir(p), 0o755))
				must(t, os.WriteFile(p, []byte("x"), 0o644))
			}
			pb, err := physical.New(host, physical.WithResolver(r.mode))
			if err != nil {
				t.Skipf("physical backend: %v", err)
			}
			t.Cleanup(func() { pb.Close() })
			d, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
			for _, o := range []materialize.Options{{}, {ReadOnly: true, Host: vfs.ReadOnly(pb)}} {
				src := d
				if o.ReadOnly {
					src = d.ReadOnly()
				}
				tr := checkout(t, src, o)
				if tr.Bound() {
					t.Errorf("read-only checkout bound the host directory, which shows a\\b")
				}
				var got []string
				for _, s := range tr.Skipped() {
					got = append(got, s.Path+" "+string(s.Code)+" "+s.Reason)
				}
				want := []string{`a\b invalid_path no capfs path can name it: contains a backslash`, `sub/c\d invalid_path no capfs path can name it: contains a backslash`}
				if !slices.Equal(got, want) {
					t.Errorf("read-only %v: Skipped = %q; want %q", o.ReadOnly, got, want)
				}
				for _, name := range []string{`a\b`, `sub/c\d`} {
					if _, err := os.Lstat(filepath.Join(tr.Path(), name)); !os.IsNotExist(err) {
						t.Errorf("read-only %v: %s in the checkout: %v", o.ReadOnly, name, err)
					}
				}
				if _, err := os.Stat(filepath.Join(tr.Path(), "sub/x")); err != nil {
					t.Errorf("sub/x: %v", err)
				}
			}
		})
	}
}

// TestCheckoutOfGitTreeWithUnaddressable: a git tree may hold a name no capfs
// path can hold ("a\b"), which the git backend lists: the checkout leaves it
// out and names it in Skipped, and checks out the rest. On 8a35f16 the
// checkout failed (invalid_path).
func TestCheckoutOfGitTreeWithUnaddressable(t *testing.T) {
	repo := gitRepo(t, map[string]string{"ok": "x\n", `a\b`: "odd\n"})
	g, err := gitree.Open(repo, "HEAD")
	must(t, err)
	t.Cleanup(func() { g.Close() })
	d, _ := dir.New(g, dir.WithPolicy(policy.Defaults()))
	tr := checkout(t, d, materialize.Options{})
	var got []string
	for _, s := range tr.Skipped() {
		got = append(got, s.Path+" "+string(s.Code))
	}
	if want := []string{`a\b invalid_path`}; !slices.Equal(got, want) {
		t.Errorf("Skipped = %q; want %q", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(tr.Path(), "ok")); err != nil || string(b) != "x\n" {
		t.Errorf("ok: %q, %v", b, err)
	}
}
