package authority

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// resolvers are the physical backend's two ways of resolving paths; each
// test runs on both.
var resolvers = []struct {
	name string
	mode physical.ResolverMode
}{
	{"openat2", physical.ResolverOpenat2},
	{"portable", physical.ResolverPortable},
}

// linkedProject makes, in a new host directory, a cloned project that holds
// links to protected places, and returns the directory:
//
//	.ssh/id_rsa
//	.git/HEAD, .git/config, .git/hooks/, .git/objects/, .git/refs/
//	src/main.go, w/a.txt
//	bare/HEAD, bare/objects/, bare/refs/ (a git dir under a name the policy does not know)
//	keys -> .ssh
//	hk -> .git/hooks
//	d/g -> ../.git
//	bl -> bare
func linkedProject(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{".ssh", ".git/hooks", ".git/objects", ".git/refs", "bare/objects", "bare/refs", "src", "w", "d"} {
		must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	for p, s := range map[string]string{".ssh/id_rsa": "PRIVATE KEY", ".git/HEAD": "ref: refs/heads/main\n",
		".git/config": "[core]\n", "bare/HEAD": "ref: refs/heads/main\n", "src/main.go": "package main", "w/a.txt": "A"} {
		must(t, os.WriteFile(filepath.Join(root, p), []byte(s), 0o644))
	}
	for link, target := range map[string]string{"keys": ".ssh", "hk": ".git/hooks", "d/g": "../.git", "bl": "bare"} {
		must(t, os.Symlink(target, filepath.Join(root, link)))
	}
	return root
}

// physicalRoot opens host directory root with resolver mode m, skipping the
// test where the kernel lacks what m needs.
func physicalRoot(t *testing.T, root string, m physical.ResolverMode) vfs.Backend {
	t.Helper()
	b, err := physical.New(root, physical.WithResolver(m))
	if vfs.CodeOf(err) == vfs.CodeNotSupported {
		t.Skipf("resolver unavailable here: %v", err)
	}
	must(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// TestGrantIsDecidedWhereItLeads: a grant's path is resolved to the place it
// reaches, decided there by the host policy and the GitGuard, and the grant's
// Dir decides and audits canonical paths beneath it. Before the fix, a read
// grant on keys -> .ssh read id_rsa, and write grants on hk -> .git/hooks and
// d/g -> ../.git wrote a pre-commit hook and .git/config.
func TestGrantIsDecidedWhereItLeads(t *testing.T) {
	for _, rs := range resolvers {
		t.Run(rs.name, func(t *testing.T) {
			root := linkedProject(t)
			ring := audit.NewRing(1000)
			a := New(WithPolicy(policy.Defaults()), WithAudit(ring), WithGitGuard())
			must(t, a.Register("project", physicalRoot(t, root, rs.mode)))
			grant := func(path string, access ...Access) (GrantRequest, error) {
				req := GrantRequest{Subject: agent, Root: "project", Path: path, Access: access, Reason: "test", Source: SourceUserApproval}
				d, g, err := a.Grant(ctx, req)
				if err == nil && path == "keys" {
					if data, rerr := d.ReadFile(ctx, "id_rsa"); rerr == nil {
						t.Errorf("the grant on keys -> .ssh read id_rsa: %q", data)
					}
				}
				if err == nil && g.Path != path {
					t.Errorf("record path %q, want %q as asked", g.Path, path)
				}
				return req, err
			}

			// A read grant on a link to a hidden place is refused, and audited there.
			if _, err := grant("keys", ReadOnlyAccess()...); vfs.CodeOf(err) != vfs.CodePermission {
				t.Fatalf("grant on keys -> .ssh: %v, want fs_permission_denied", err)
			}
			if ev := lastEvent(t, ring); ev.Path != ".ssh" || ev.Outcome != audit.Denied {
				t.Fatalf("the refused grant was audited as %+v, want path .ssh, denied", ev)
			}

			// Write grants on links into .git: every write beneath is decided in .git.
			for _, c := range []struct{ path, canon, file string }{
				{"hk", ".git/hooks", "pre-commit"},
				{"d/g", ".git", "config"},
			} {
				req := GrantRequest{Subject: agent, Root: "project", Path: c.path, Access: FullAccess(), Reason: "test", Source: SourceUserApproval}
				d, g, err := a.Grant(ctx, req)
				if err != nil {
					t.Fatalf("grant on %s: %v", c.path, err)
				}
				if g.Path != c.path || g.Resolved != c.canon {
					t.Fatalf("grant on %s recorded path %q resolved %q, want resolved %q", c.path, g.Path, g.Resolved, c.canon)
				}
				err = d.WriteFile(ctx, c.file, []byte("#!/bin/sh\necho owned\n"), 0o755)
				wantCode(t, c.path+"/"+c.file, err, vfs.CodePermission)
				if ev := lastEvent(t, ring); ev.Path != c.canon+"/"+c.file || ev.GuestPath != c.file || ev.Grant != g.ID || ev.Outcome != audit.Denied {
					t.Fatalf("the write under %s was audited as %+v, want path %s/%s", c.path, ev, c.canon, c.file)
				}
			}
			// The GitGuard guards where a grant leads too: a git dir the
			// policy's patterns do not know.
			d, g, err := a.Grant(ctx, GrantRequest{Subject: agent, Root: "project", Path: "bl", Access: FullAccess(), Reason: "test", Source: SourceUserApproval})
			if err != nil || g.Resolved != "bare" {
				t.Fatalf("grant on bl -> bare: %+v, %v", g, err)
			}
			wantCode(t, "bl/config", d.WriteFile(ctx, "config", []byte("[core]\n\tfsmonitor = evil\n"), 0o644), vfs.CodePermission)
			if ev := lastEvent(t, ring); ev.Path != "bare/config" || ev.Rule != "hook:gitguard" {
				t.Fatalf("the write under bl was audited as %+v, want path bare/config, rule hook:gitguard", ev)
			}
			if data, _ := os.ReadFile(filepath.Join(root, ".git/config")); string(data) != "[core]\n" {
				t.Fatalf(".git/config = %q", data)
			}
			for _, p := range []string{".git/hooks/pre-commit", "bare/config"} {
				if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
					t.Fatalf("%s was written", p)
				}
			}

			// A grant remade from a record must still lead where it led.
			req := GrantRequest{Subject: agent, Root: "project", Path: "w", Resolved: "src", Access: ReadOnlyAccess(), Reason: "test", Source: SourceUserApproval}
			if _, _, err := a.Grant(ctx, req); !errors.Is(err, fs.ErrPermission) {
				t.Fatalf("grant on w expected at src: %v, want an error wrapping fs.ErrPermission", err)
			}
			req.Resolved = "w"
			if _, g, err := a.Grant(ctx, req); err != nil || g.Resolved != "w" {
				t.Fatalf("grant on w expected at w: %+v, %v", g, err)
			}
		})
	}
}

// TestGrantStaysWhereItLed: a symlink put at a grant's path after the grant
// was made does not move it, neither while it lives (its Dir is pinned, and
// decides on where that directory is now) nor when it is restored from the
// store (the path must still lead where it led). Before the fix, Restore
// followed the new link.
func TestGrantStaysWhereItLed(t *testing.T) {
	for _, rs := range resolvers {
		t.Run(rs.name, func(t *testing.T) {
			root := linkedProject(t)
			store := filepath.Join(t.TempDir(), "grants.json")
			ring := audit.NewRing(1000)
			a, err := Open(store, WithPolicy(policy.Defaults()), WithAudit(ring))
			must(t, err)
			must(t, a.Register("project", physicalRoot(t, root, rs.mode)))
			d, g, err := a.Grant(ctx, GrantRequest{Subject: agent, Root: "project", Path: "w", Access: ReadOnlyAccess(), Reason: "test", Source: SourceUserApproval})
			must(t, err)
			// The host (or a pull) moves w away and puts a link in its place.
			must(t, os.Rename(filepath.Join(root, "w"), filepath.Join(root, "w.old")))
			must(t, os.Symlink("src", filepath.Join(root, "w")))

			if _, err := d.ReadFile(ctx, "main.go"); vfs.CodeOf(err) != vfs.CodeNotFound {
				t.Fatalf("the live grant read main.go through the new link: %v", err)
			}
			if data, err := d.ReadFile(ctx, "a.txt"); err != nil || string(data) != "A" {
				t.Fatalf("ReadFile(a.txt) = %q, %v", data, err)
			}
			if ev := lastEvent(t, ring); ev.Path != "w.old/a.txt" {
				t.Fatalf("the read was audited at %q, want w.old/a.txt (where the directory is now)", ev.Path)
			}

			// A restart: the record says where w led; it now leads to src.
			b, err := Open(store, WithPolicy(policy.Defaults()))
			must(t, err)
			must(t, b.Register("project", physicalRoot(t, root, rs.mode)))
			rd, _, err := b.Restore(ctx, g.ID)
			if err == nil {
				data, _ := rd.ReadFile(ctx, "main.go")
				t.Fatalf("Restore followed the link put at w later (main.go: %q)", data)
			}
			if !errors.Is(err, fs.ErrPermission) {
				t.Fatalf("Restore: %v, want an error wrapping fs.ErrPermission", err)
			}
			// Put back, the grant restores.
			must(t, os.Remove(filepath.Join(root, "w")))
			must(t, os.Rename(filepath.Join(root, "w.old"), filepath.Join(root, "w")))
			rd, rg, err := b.Restore(ctx, g.ID)
			must(t, err)
			if rg.Resolved != "w" {
				t.Fatalf("restored record resolved %q", rg.Resolved)
			}
			if data, err := rd.ReadFile(ctx, "a.txt"); err != nil || string(data) != "A" {
				t.Fatalf("restored ReadFile(a.txt) = %q, %v", data, err)
			}
		})
	}
}
