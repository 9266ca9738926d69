package dir_test

import (
	"context"
	"strings"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// linkedProject returns a memory backend laid out like a cloned project that
// holds links to protected places:
//
//	.ssh/id_rsa
//	.git/HEAD, .git/config, .git/hooks/, .git/objects/, .git/refs/
//	src/main.go
//	keys -> .ssh
//	hk -> .git/hooks
//	d/g -> ../.git
func linkedProject(t *testing.T) vfs.Backend {
	t.Helper()
	ctx := context.Background()
	b := memory.New()
	d, _ := dir.New(b)
	for _, p := range []string{".ssh", ".git/hooks", ".git/objects", ".git/refs", "src", "d"} {
		if err := d.MkdirAll(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for p, s := range map[string]string{".ssh/id_rsa": "PRIVATE KEY", ".git/HEAD": "ref: refs/heads/main\n",
		".git/config": "[core]\n", "src/main.go": "package main"} {
		if err := d.WriteFile(ctx, p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"keys": ".ssh", "hk": ".git/hooks", "d/g": "../.git"} {
		if err := d.Symlink(ctx, target, link); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// TestChildIsDecidedWhereItLeads: Control.Child resolves its path to the
// canonical place it reaches and decides it there (policy and hooks), as Sub
// does; the child is pinned at that place, so every decision and audit event
// under it names canonical paths. Before the fix, Child pinned the path as
// written: "keys/id_rsa" was read, and "hk/pre-commit" written.
func TestChildIsDecidedWhereItLeads(t *testing.T) {
	ctx := context.Background()
	b := linkedProject(t)
	ring := audit.NewRing(100)
	_, ctl := dir.New(b, dir.WithPolicy(policy.Defaults()), dir.WithAudit(ring), dir.WithHooks(dir.GitGuard(b)))

	// A link to a hidden place: refused, and audited where it leads.
	if _, err := ctl.Child(ctx, "keys"); vfs.CodeOf(err) != vfs.CodePermission {
		t.Fatalf("Child(keys -> .ssh) = %v, want fs_permission_denied", err)
	}
	ev := ring.Events()
	if len(ev) == 0 {
		t.Fatal("Child(keys) was not audited")
	}
	if last := ev[len(ev)-1]; last.Path != ".ssh" || last.Outcome != audit.Denied || last.GuestPath != "keys" {
		t.Fatalf("Child(keys) audited as %+v, want path .ssh, denied", last)
	}

	// A link into .git: allowed as a place, but every write under it is
	// decided as a write in .git.
	for _, c := range []struct{ path, canon, file string }{
		{"hk", ".git/hooks", "pre-commit"},
		{"d/g", ".git", "config"},
	} {
		child, err := ctl.Child(ctx, c.path)
		if err != nil {
			t.Fatalf("Child(%s): %v", c.path, err)
		}
		if loc, err := child.Location(ctx); err != nil || loc != c.canon {
			t.Fatalf("Child(%s).Location = %q, %v; want %q", c.path, loc, err, c.canon)
		}
		err = child.Dir().WriteFile(ctx, c.file, []byte("#!/bin/sh\nevil\n"), 0o755)
		if vfs.CodeOf(err) != vfs.CodePermission {
			t.Fatalf("Child(%s).WriteFile(%s) = %v, want fs_permission_denied", c.path, c.file, err)
		}
		ev := ring.Events()
		if last := ev[len(ev)-1]; last.Path != c.canon+"/"+c.file || last.Outcome != audit.Denied {
			t.Fatalf("write under Child(%s) audited as %+v, want path %s/%s, denied", c.path, last, c.canon, c.file)
		}
	}
	root, _ := dir.New(b)
	if data, _ := root.ReadFile(ctx, ".git/config"); string(data) != "[core]\n" {
		t.Fatalf(".git/config = %q", data)
	}
	if ok, _ := root.Exists(ctx, ".git/hooks/pre-commit"); ok {
		t.Fatal(".git/hooks/pre-commit was written")
	}

	// An ordinary child still works, and reads are audited under its place.
	child, err := ctl.Child(ctx, "src")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := child.Dir().ReadFile(ctx, "main.go"); err != nil {
		t.Fatal(err)
	}
	ev = ring.Events()
	if last := ev[len(ev)-1]; last.Path != "src/main.go" {
		t.Fatalf("read audited at %q", last.Path)
	}
}

// TestChildIsPinnedWhereItLed: once made, a child stays where its path led
// when it was made: a link put at that path afterwards changes nothing, and
// its decisions name the directory's place now.
func TestChildIsPinnedWhereItLed(t *testing.T) {
	ctx := context.Background()
	b := linkedProject(t)
	ring := audit.NewRing(100)
	_, ctl := dir.New(b, dir.WithPolicy(policy.Defaults()), dir.WithAudit(ring))
	child, err := ctl.Child(ctx, "src")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := dir.New(b)
	if err := host.Move(ctx, "src", "old"); err != nil {
		t.Fatal(err)
	}
	if err := host.Symlink(ctx, ".ssh", "src"); err != nil {
		t.Fatal(err)
	}
	if _, err := child.Dir().ReadFile(ctx, "id_rsa"); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Fatalf("ReadFile(id_rsa) after src -> .ssh = %v, want not_found", err)
	}
	if data, err := child.Dir().ReadFile(ctx, "main.go"); err != nil || string(data) != "package main" {
		t.Fatalf("ReadFile(main.go) = %q, %v", data, err)
	}
	ev := ring.Events()
	if last := ev[len(ev)-1]; !strings.HasPrefix(last.Path, "old/") {
		t.Fatalf("read audited at %q, want under old/", last.Path)
	}
	if loc, err := child.Location(ctx); err != nil || loc != "old" {
		t.Fatalf("Location = %q, %v; want old", loc, err)
	}
}

// swapOnSub is a backend whose Sub first lets the host replace src with a
// link to .ssh: the window between Child's decision and its pinning.
type swapOnSub struct {
	vfs.Backend
	swap func()
}

func (s *swapOnSub) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	if s.swap != nil {
		s.swap()
		s.swap = nil
	}
	return s.Backend.Sub(ctx, p)
}

func (s *swapOnSub) Locate(ctx context.Context) (vfs.Path, error) {
	return s.Backend.(vfs.Locator).Locate(ctx)
}

// TestChildRefusesWhatMovedBeforePinning: a child is pinned only where it was
// decided. If the directory is replaced by a link between the decision and the
// pinning, Child fails (conflict: the backend follows no link on the resolved
// path it is given) instead of pinning the link's target under the decided
// name. Before the fix, Child pinned .ssh as "src".
func TestChildRefusesWhatMovedBeforePinning(t *testing.T) {
	ctx := context.Background()
	b := linkedProject(t)
	host, _ := dir.New(b)
	sw := &swapOnSub{Backend: b, swap: func() {
		if err := host.Move(ctx, "src", "old"); err != nil {
			t.Fatal(err)
		}
		if err := host.Symlink(ctx, ".ssh", "src"); err != nil {
			t.Fatal(err)
		}
	}}
	_, ctl := dir.New(sw, dir.WithPolicy(policy.Defaults()))
	child, err := ctl.Child(ctx, "src")
	if err == nil {
		data, _ := child.Dir().ReadFile(ctx, "id_rsa")
		t.Fatalf("Child pinned what src became after the decision (id_rsa: %q)", data)
	}
	if vfs.CodeOf(err) != vfs.CodeConflict {
		t.Fatalf("Child = %v, want conflict", err)
	}
}
