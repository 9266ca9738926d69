package vfs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// A link that leaves its mount only to come back into it, and an absolute link
// naming a place under its physical mount's host directory, are followed by the
// namespace (as a reference MCP filesystem server follows them when the real path
// stays inside); one that lands outside its mount is still path_outside_sandbox.
func TestNamespaceLinksReenteringTheirMount(t *testing.T) {
	type backend struct {
		name string
		new  func(t *testing.T) (vfs.Backend, string) // the backend and its host directory ("" if none)
	}
	backends := []backend{
		{"memory", func(t *testing.T) (vfs.Backend, string) { return memory.New(), "" }},
	}
	for _, mode := range []struct {
		name string
		m    physical.ResolverMode
	}{{"physical-openat2", physical.ResolverAuto}, {"physical-portable", physical.ResolverPortable}} {
		backends = append(backends, backend{mode.name, func(t *testing.T) (vfs.Backend, string) {
			host := t.TempDir()
			b, err := physical.New(host, physical.WithResolver(mode.m))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return b, host
		}})
	}
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			b, host := bk.new(t)
			base := memWith(t, "secret=base secret")
			n := vfs.NewNamespace()
			nsMount(t, n, ".", base, vfs.MountOptions{})
			nsMount(t, n, "proj", b, vfs.MountOptions{})
			nsMust(t, n.Mkdir(nsCtx, nsP("proj/src"), 0o755))
			nsMust(t, n.Mkdir(nsCtx, nsP("proj/src/d"), 0o755))
			f, err := n.OpenFile(nsCtx, nsP("proj/src/x.txt"), os.O_WRONLY|os.O_CREATE, 0o644)
			nsMust(t, err)
			f.Write([]byte("X"))
			f.Close()
			// Links planted in the backend directly (as a host or a sandbox would).
			// (physical.Symlink refuses targets that climb above its root, so
			// those are planted on the host.)
			plant := func(target, at string) {
				if host != "" {
					if err := os.Symlink(target, filepath.Join(host, filepath.FromSlash(at))); err != nil {
						t.Fatal(err)
					}
					return
				}
				nsMust(t, b.Symlink(nsCtx, target, nsP(at)))
			}
			plant("../../../proj/src/x.txt", "src/d/re")      // leaves proj, comes back
			plant("../../../proj/src", "src/d/redir")         // the same, to a directory
			plant("../../../proj/src/new.txt", "src/d/renew") // dangling, comes back
			plant("../../../secret", "src/d/out")             // lands in the base mount
			plant("../../../../x", "src/d/above")             // above the namespace root
			if host != "" {
				// Host-planted absolute links: physical.Symlink refuses them, so
				// plant them on the host.
				must := func(err error) {
					if err != nil {
						t.Fatal(err)
					}
				}
				must(os.Symlink(filepath.Join(host, "src", "x.txt"), filepath.Join(host, "src", "abs")))
				must(os.Symlink(host, filepath.Join(host, "src", "absroot")))
				must(os.Symlink("/etc/passwd", filepath.Join(host, "src", "absout")))
				must(os.Symlink(host+"/../"+filepath.Base(host)+"/src/x.txt", filepath.Join(host, "src", "absdots")))
				must(os.Symlink(host+"x/src", filepath.Join(host, "src", "absprefix")))
			}
			for _, name := range []string{"proj/src/d/re", "proj/src/d/redir/x.txt"} {
				if got := nsRead(t, n, name); got != "X" {
					t.Errorf("read %s = %q, want X", name, got)
				}
				loc, err := n.Resolve(nsCtx, nsP(name), true)
				if err != nil || loc.Path.String() != "proj/src/x.txt" || !loc.Found {
					t.Errorf("Resolve(%s) = %+v, %v; want proj/src/x.txt", name, loc, err)
				}
				info, err := n.Stat(nsCtx, nsP(name))
				if err != nil || info.Size != 1 {
					t.Errorf("Stat(%s) = %+v, %v", name, info, err)
				}
			}
			if ents, err := n.ReadDir(nsCtx, nsP("proj/src/d/redir")); err != nil || len(ents) == 0 {
				t.Errorf("ReadDir through redir: %v, %v", ents, err)
			}
			// A write through the dangling re-entering link lands where it leads.
			w, err := n.OpenFile(nsCtx, nsP("proj/src/d/renew"), os.O_WRONLY|os.O_CREATE, 0o644)
			nsMust(t, err)
			w.Write([]byte("N"))
			w.Close()
			if got := nsRead(t, n, "proj/src/new.txt"); got != "N" {
				t.Errorf("proj/src/new.txt = %q after a write through renew", got)
			}
			for _, name := range []string{"proj/src/d/out", "proj/src/d/above"} {
				_, err := n.Stat(nsCtx, nsP(name))
				nsWantErr(t, err, vfs.CodeOutside, name, "")
				_, err = n.Resolve(nsCtx, nsP(name), true)
				if vfs.CodeOf(err) != vfs.CodeOutside {
					t.Errorf("Resolve(%s): %v, want path_outside_sandbox", name, err)
				}
				_, err = n.OpenFile(nsCtx, nsP(name), os.O_WRONLY|os.O_CREATE, 0o644)
				nsWantErr(t, err, vfs.CodeOutside, name, "")
			}
			if got := nsRead(t, base, "secret"); got != "base secret" {
				t.Errorf("the base's secret changed: %q", got)
			}
			if host == "" {
				return
			}
			if got := nsRead(t, n, "proj/src/abs"); got != "X" {
				t.Errorf("read proj/src/abs = %q, want X", got)
			}
			if got := nsRead(t, n, "proj/src/absroot/src/x.txt"); got != "X" {
				t.Errorf("read proj/src/absroot/src/x.txt = %q, want X", got)
			}
			for _, name := range []string{"proj/src/absout", "proj/src/absdots", "proj/src/absprefix"} {
				_, err := n.Stat(nsCtx, nsP(name))
				nsWantErr(t, err, vfs.CodeOutside, name, "")
			}
			// Through a Dir with the default policy, a secret reached by either
			// kind of link is refused: the decision is on where it leads.
			if err := os.WriteFile(filepath.Join(host, ".env"), []byte("TOKEN"), 0o600); err != nil {
				t.Fatal(err)
			}
			plant("../../../proj/.env", "src/d/reenv")
			if err := os.Symlink(filepath.Join(host, ".env"), filepath.Join(host, "src", "absenv")); err != nil {
				t.Fatal(err)
			}
			guest, _ := dir.New(n, dir.WithPolicy(policy.Defaults()))
			for _, name := range []string{"proj/src/d/reenv", "proj/src/absenv"} {
				if b, err := guest.ReadFile(nsCtx, name); vfs.CodeOf(err) != vfs.CodePermission {
					t.Errorf("guest ReadFile(%s) = %q, %v; want fs_permission_denied", name, b, err)
				}
			}
			if b, err := guest.ReadFile(nsCtx, "proj/src/abs"); err != nil || string(b) != "X" {
				t.Errorf("guest ReadFile(proj/src/abs) = %q, %v", b, err)
			}
			// Inside a Sub of the mount, the same links stay confined to the Sub.
			sub, err := n.Sub(nsCtx, nsP("proj/src/d"))
			nsMust(t, err)
			if _, err := sub.Stat(nsCtx, nsP("re")); vfs.CodeOf(err) != vfs.CodeOutside {
				t.Errorf("Sub(proj/src/d).Stat(re): %v, want path_outside_sandbox", err)
			}
		})
	}
}
