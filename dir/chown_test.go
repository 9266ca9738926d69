//go:build linux

package dir_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// hostOwner is the owner of host path p itself.
func hostOwner(t *testing.T, p string) (int, int) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

// chownTree is a Dir over a physical directory holding f, locked/g, a link l
// to locked/g and a link fl to f, with a policy refusing chown (only) beneath
// locked/, and its audit ring.
func chownTree(t *testing.T, opts ...dir.Option) (*dir.Dir, string, *audit.Ring) {
	t.Helper()
	root := t.TempDir()
	must(t, os.WriteFile(filepath.Join(root, "f"), []byte("f"), 0o644))
	must(t, os.Mkdir(filepath.Join(root, "locked"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "locked", "g"), []byte("g"), 0o644))
	must(t, os.Symlink("locked/g", filepath.Join(root, "l")))
	must(t, os.Symlink("f", filepath.Join(root, "fl")))
	b, err := physical.New(root)
	must(t, err)
	t.Cleanup(func() { b.Close() })
	ring := audit.NewRing(100)
	pol := policy.Func(func(_ context.Context, r *policy.Request) policy.Decision {
		if r.Op == policy.OpChown && strings.HasPrefix(r.Path, "locked/") {
			return policy.Decision{Effect: policy.Deny, Rule: "deny:chown-locked", Reason: "locked"}
		}
		return policy.Decision{Effect: policy.Allow, Rule: "allow"}
	})
	d, _ := dir.New(b, append([]dir.Option{dir.WithPolicy(pol), dir.WithAudit(ring)}, opts...)...)
	return d, root, ring
}

// TestChownPolicy: Chown is decided on the path it reaches (through a link,
// the target's), Lchown on the link itself; refusals change nothing and are
// audited with their rule; success is audited as op chown.
func TestChownPolicy(t *testing.T) {
	d, root, ring := chownTree(t)
	uid, gid := os.Getuid(), os.Getgid()
	g := filepath.Join(root, "locked", "g")
	gu, gg := hostOwner(t, g)

	wantCode(t, d.Chown(bg, "locked/g", uid, gid), vfs.CodePermission)
	wantCode(t, d.Chown(bg, "l", uid, gid), vfs.CodePermission) // reaches locked/g
	must(t, d.Lchown(bg, "l", uid, gid))                        // the link itself is not locked
	must(t, d.Chown(bg, "f", -1, -1))
	must(t, d.Chown(bg, "fl", uid, -1))
	wantCode(t, d.Chown(bg, "missing", uid, gid), vfs.CodeNotFound)
	wantCode(t, d.Chown(bg, "../x", uid, gid), vfs.CodeOutside)
	if u, g2 := hostOwner(t, g); u != gu || g2 != gg {
		t.Errorf("a refused chown changed locked/g to %d:%d", u, g2)
	}

	evs := ring.Events()
	type ev struct {
		op, path, guest, rule string
		out                   audit.Outcome
	}
	want := []ev{
		{"chown", "locked/g", "locked/g", "deny:chown-locked", audit.Denied},
		{"chown", "locked/g", "l", "deny:chown-locked", audit.Denied},
		{"chown", "l", "l", "allow", audit.OK},
		{"chown", "f", "f", "allow", audit.OK},
		{"chown", "f", "fl", "allow", audit.OK},
	}
	if len(evs) < len(want) {
		t.Fatalf("%d audit events, want at least %d: %+v", len(evs), len(want), evs)
	}
	for i, w := range want {
		e := evs[i]
		if e.Op != w.op || e.Path != w.path || e.GuestPath != w.guest || e.Rule != w.rule || e.Outcome != w.out {
			t.Errorf("event %d = {%s %s %s %s %s}, want %+v", i, e.Op, e.Path, e.GuestPath, e.Rule, e.Outcome, w)
		}
	}

	// The Backend view decides the same way.
	c, ok := d.Backend().(vfs.Chowner)
	if !ok {
		t.Fatal("the Backend view is not a vfs.Chowner")
	}
	wantCode(t, c.Chown(bg, vfs.MustParse("l"), uid, gid), vfs.CodePermission)
	must(t, c.Lchown(bg, vfs.MustParse("l"), uid, gid))
	must(t, c.Chown(bg, vfs.MustParse("fl"), uid, gid))

	// The default rules refuse chown like any write on a protected path.
	d2, _ := dir.New(mustPhysical(t, root), dir.WithPolicy(policy.Defaults()))
	must(t, os.Mkdir(filepath.Join(root, ".ssh"), 0o700))
	must(t, os.WriteFile(filepath.Join(root, ".ssh", "id"), nil, 0o600))
	must(t, os.WriteFile(filepath.Join(root, ".bashrc"), nil, 0o644))
	wantCode(t, d2.Chown(bg, ".ssh/id", uid, gid), vfs.CodePermission)
	wantCode(t, d2.Chown(bg, ".bashrc", uid, gid), vfs.CodePermission)
	must(t, d2.Chown(bg, "f", uid, gid))
}

func mustPhysical(t *testing.T, root string) vfs.Backend {
	t.Helper()
	b, err := physical.New(root)
	must(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// TestChownReadOnly: read-only Dirs (and their Backend views) refuse chown
// before the backend is reached; a locked Dir too.
func TestChownReadOnly(t *testing.T) {
	d, _, ring := chownTree(t)
	uid, gid := os.Getuid(), os.Getgid()
	ro := d.ReadOnly()
	wantCode(t, ro.Chown(bg, "f", uid, gid), vfs.CodeReadOnly)
	wantCode(t, ro.Lchown(bg, "fl", uid, gid), vfs.CodeReadOnly)
	wantCode(t, vfs.Chown(bg, ro.Backend(), vfs.MustParse("f"), uid, gid, true), vfs.CodeReadOnly)
	for _, e := range ring.Events() {
		if e.Outcome != audit.Denied || e.Code != string(vfs.CodeReadOnly) || e.Op != "chown" {
			t.Errorf("event %+v, want a read_only refusal of chown", e)
		}
	}
	if len(ring.Events()) != 3 {
		t.Errorf("%d events, want 3", len(ring.Events()))
	}
}

// TestChownNotSupported: a backend that keeps no ownership answers
// not_supported, and reports no owner.
func TestChownNotSupported(t *testing.T) {
	m := memory.New()
	d, _ := dir.New(m)
	must(t, d.WriteFile(bg, "x", []byte("x"), 0o644))
	wantCode(t, d.Chown(bg, "x", 0, 0), vfs.CodeNotSupported)
	wantCode(t, d.Lchown(bg, "x", 0, 0), vfs.CodeNotSupported)
	info, err := d.Backend().Lstat(bg, vfs.MustParse("x"))
	must(t, err)
	if u, g := info.Owner(); u != -1 || g != -1 {
		t.Errorf("memory-backed owner = %d:%d, want unknown", u, g)
	}
}

// TestChownChangesOwner (root): the host file's owner is what was asked, and
// the Backend view's Lstat reports it.
func TestChownChangesOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root; run as root to cover it")
	}
	d, root, _ := chownTree(t)
	must(t, d.Chown(bg, "fl", 1234, 5678))
	if u, g := hostOwner(t, filepath.Join(root, "f")); u != 1234 || g != 5678 {
		t.Errorf("host owner of f = %d:%d", u, g)
	}
	must(t, d.Lchown(bg, "fl", 4321, 8765))
	if u, g := hostOwner(t, filepath.Join(root, "fl")); u != 4321 || g != 8765 {
		t.Errorf("host owner of link fl = %d:%d", u, g)
	}
	info, err := d.Backend().Lstat(bg, vfs.MustParse("fl"))
	must(t, err)
	if u, g := info.Owner(); u != 4321 || g != 8765 {
		t.Errorf("Lstat(fl) owner = %d:%d", u, g)
	}
	info, err = d.Backend().Stat(bg, vfs.MustParse("fl"))
	must(t, err)
	if u, g := info.Owner(); u != 1234 || g != 5678 {
		t.Errorf("Stat(fl) owner = %d:%d", u, g)
	}
}
