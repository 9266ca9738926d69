package dir_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// Reads with a policy resolve, decide and open in one backend call
// (vfs.ResolveOpen). These tests hold that route to what the unfused route
// promises: the same answers as a Dir without a policy where nothing is denied,
// refusals on where a path leads whatever exists beneath it, the Before hooks
// paired with After, and nothing swapped in after the decision read instead.

// secretPolicy hides the top-level directory vault (no read, no listing),
// anchored, so only the canonical decision sees it behind a link; the default
// secret patterns (which hide .ssh at any depth) stay in force too.
func secretPolicy(t testing.TB) policy.Policy {
	t.Helper()
	e, err := policy.New(policy.Config{Rules: []policy.Rule{{
		Effect: policy.Deny, Ops: []policy.Op{policy.OpRead, policy.OpList, policy.OpStat},
		Paths: []string{"vault", "vault/**"}, Reason: "secret",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// readVia reads name through d with ReadFile (open false) or Open and Read.
func readVia(d *dir.Dir, name string, open bool) (string, error) {
	if !open {
		b, err := d.ReadFile(bg, name)
		return string(b), err
	}
	h, err := d.Open(bg, name, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer h.Close()
	b, err := io.ReadAll(h)
	return string(b), err
}

// eachFusedTree plants the host's tree in each backend, with links lf (to
// work/f.txt), lw (to work), dangling, and work/sub/up (to up), and calls fn
// with a Dir without a policy and one with aliasPolicy over the backend itself, a
// Namespace mount of it and a read-only mount, and the prefix naming the tree's
// root in those Dirs.
func eachFusedTree(t *testing.T, up string, fn func(t *testing.T, plain, pol *dir.Dir, prefix string)) {
	for _, ab := range aliasBackends {
		t.Run(ab.name, func(t *testing.T) {
			b := ab.new(t)
			host := plant(t, b)
			must(t, host.Symlink(bg, "work/f.txt", "lf"))
			must(t, host.Symlink(bg, "work", "lw"))
			must(t, host.Symlink(bg, "missing", "dangling"))
			must(t, host.Symlink(bg, up, "work/sub/up"))
			ns := vfs.NewNamespace()
			must(t, ns.Mount(vfs.MustParse("m"), b, vfs.MountOptions{}))
			must(t, ns.Mount(vfs.MustParse("ro"), b, vfs.MountOptions{ReadOnly: true}))
			for _, tree := range []struct {
				b      vfs.Backend
				prefix string
			}{{b, ""}, {ns, "m/"}, {ns, "ro/"}} {
				plain, _ := dir.New(tree.b)
				pol, _ := dir.New(tree.b, dir.WithPolicy(aliasPolicy(t)))
				fn(t, plain, pol, tree.prefix)
			}
		})
	}
}

// wantSameAnswer fails t unless the policy Dir's answer (got, gerr) for name is
// the plain Dir's (want, werr), with its error addressed to the guest's path.
func wantSameAnswer(t *testing.T, what, name, got, want string, gerr, werr error) {
	t.Helper()
	if vfs.CodeOf(werr) != vfs.CodeOf(gerr) || got != want {
		t.Errorf("%s: %q, %v; without a policy %q, %v", what, got, gerr, want, werr)
	}
	if gerr != nil {
		var ve *vfs.Error
		if !asVFS(gerr, &ve) || ve.Path != name {
			t.Errorf("%s: error %v is not addressed to the guest's path", what, gerr)
		}
	}
}

func TestFusedReadMatchesPlain(t *testing.T) {
	eachFusedTree(t, "../work/f.txt", func(t *testing.T, plain, pol *dir.Dir, prefix string) {
		for _, name := range []string{"lf", "lw/f.txt", "work/sub/up", "dangling", "work", "work/f.txt/", "nope", "nope/x", "work/f.txt/x", "protected/p.txt"} {
			name = prefix + name
			for _, open := range []bool{false, true} {
				want, werr := readVia(plain, name, open)
				got, gerr := readVia(pol, name, open)
				wantSameAnswer(t, fmt.Sprintf("%s (open %v)", name, open), name, got, want, gerr, werr)
			}
		}
	})
}

func asVFS(err error, ve **vfs.Error) bool {
	e, ok := err.(*vfs.Error)
	*ve = e
	return ok
}

// TestFusedReadRefusesWhereItLeads: through a link to the root, a hidden
// directory answers fs_permission_denied whether or not the name beneath it
// exists, is a file, or runs through a file: no probe tells them apart.
func TestFusedReadRefusesWhereItLeads(t *testing.T) {
	for _, ab := range aliasBackends {
		t.Run(ab.name, func(t *testing.T) {
			b := ab.new(t)
			host := plant(t, b)
			must(t, host.MkdirAll(bg, "vault"))
			must(t, host.WriteFile(bg, "vault/id", []byte("KEY"), 0o644))
			must(t, host.Symlink(bg, ".", "up"))
			must(t, host.Symlink(bg, "vault/id", "key"))
			rec := audit.NewRing(64)
			guest, _ := dir.New(b, dir.WithPolicy(secretPolicy(t)), dir.WithAudit(rec))
			for _, name := range []string{"up/vault/id", "up/vault/missing", "up/vault/missing/x", "up/vault/id/x", "key", "work/../up/vault/id", "up/vault"} {
				for _, open := range []bool{false, true} {
					got, err := readVia(guest, name, open)
					if vfs.CodeOf(err) != vfs.CodePermission {
						t.Errorf("%s (open %v): %q, %v; want fs_permission_denied", name, open, got, err)
					}
				}
			}
			for _, ev := range rec.Events() {
				if ev.Outcome != audit.Denied {
					t.Errorf("audit: %s %s (as %s) recorded %s, want denied", ev.Op, ev.Path, ev.GuestPath, ev.Outcome)
				}
			}
		})
	}
}

// countingHook counts Before and After calls and records the paths Before saw.
type countingHook struct {
	mu            sync.Mutex
	before, after int
	refused       int
	paths         []string
	refuse        string // a path Before refuses
}

func (h *countingHook) Before(_ context.Context, r *policy.Request) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.before++
	h.paths = append(h.paths, r.Path)
	if r.Path == h.refuse {
		h.refused++
		return vfs.NewError(vfs.CodePermission, "hook", vfs.Path{}, "refused by the hook")
	}
	return nil
}

func (h *countingHook) After(context.Context, *policy.Request, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.after++
}

func TestFusedReadHooks(t *testing.T) {
	for _, ab := range aliasBackends {
		t.Run(ab.name, func(t *testing.T) {
			b := ab.new(t)
			host := plant(t, b)
			must(t, host.Symlink(bg, "work", "lw"))
			must(t, host.Symlink(bg, ".", "up"))
			must(t, host.MkdirAll(bg, "vault"))
			must(t, host.WriteFile(bg, "vault/id", []byte("KEY"), 0o644))
			h := &countingHook{refuse: "protected/p.txt"}
			guest, _ := dir.New(b, dir.WithPolicy(secretPolicy(t)), dir.WithHooks(h))
			for _, open := range []bool{false, true} {
				h.before, h.after, h.refused, h.paths = 0, 0, 0, nil
				if got, err := readVia(guest, "lw/f.txt", open); err != nil || got != "f" {
					t.Fatalf("lw/f.txt: %q, %v", got, err)
				}
				if _, err := readVia(guest, "nope/x", open); vfs.CodeOf(err) != vfs.CodeNotFound {
					t.Errorf("nope/x: %v, want not_found", err)
				}
				if _, err := readVia(guest, "up-none/vault/id", open); err == nil {
					t.Error("read through a missing link succeeded")
				}
				if _, err := readVia(guest, "lw/../protected/p.txt", open); err == nil {
					t.Error("the hook's refusal did not refuse the read")
				}
				if _, err := readVia(guest, "up/vault/id", open); vfs.CodeOf(err) != vfs.CodePermission {
					t.Errorf("up/vault/id: %v, want fs_permission_denied", err)
				}
				// A Before that refuses is owed no After; every other is.
				if h.refused != 1 || h.before != h.after+h.refused {
					t.Errorf("open %v: %d Before calls (%d refusing), %d After", open, h.before, h.refused, h.after)
				}
				if len(h.paths) == 0 || h.paths[0] != "work/f.txt" {
					t.Errorf("open %v: the hook saw %q first, want the canonical work/f.txt", open, h.paths)
				}
				for _, p := range h.paths {
					if p == "vault/id" {
						t.Errorf("open %v: a Before hook ran for a path the policy refused", open)
					}
				}
			}
		})
	}
}

// swapToVault is a hook that, deciding op on path, moves d aside and puts a
// link to vault in its place: a swap between the decision and the action.
func swapToVault(t *testing.T, host *dir.Dir, op policy.Op, path string) hookFunc {
	return func(ctx context.Context, r *policy.Request) error {
		if r.Op == op && r.Path == path {
			must(t, host.Move(bg, "d", "d.old"))
			must(t, host.Symlink(bg, "vault", "d"))
		}
		return nil
	}
}

// TestFusedReadSwapAfterDecision: between the decision on d/id (a decoy) and
// the open, d becomes a link to vault: the read returns the decoy or fails, never
// the key.
func TestFusedReadSwapAfterDecision(t *testing.T) {
	for _, ab := range aliasBackends {
		t.Run(ab.name, func(t *testing.T) {
			b := ab.new(t)
			host := plant(t, b)
			for _, open := range []bool{false, true} {
				_ = host.RemoveAll(bg, "d")
				_ = host.RemoveAll(bg, "d.old")
				must(t, host.MkdirAll(bg, "d"))
				must(t, host.WriteFile(bg, "d/id", []byte("decoy"), 0o644))
				must(t, host.MkdirAll(bg, "vault"))
				must(t, host.WriteFile(bg, "vault/id", []byte("KEY"), 0o644))
				guest, _ := dir.New(b, dir.WithPolicy(secretPolicy(t)), dir.WithHooks(swapToVault(t, host, policy.OpRead, "d/id")))
				got, err := readVia(guest, "d/id", open)
				if got == "KEY" {
					t.Fatalf("open %v: read the key through a link swapped in after the decision", open)
				}
				if err == nil && got != "decoy" {
					t.Fatalf("open %v: read %q", open, got)
				}
			}
		})
	}
}
