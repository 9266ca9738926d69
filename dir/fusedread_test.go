package dir_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
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

// readHow is a route by which a guest reads a file.
type readHow int

const (
	viaReadFile readHow = iota // Dir.ReadFile
	viaOpen                    // Dir.Open, then Read
	viaView                    // the Dir's Backend view: OpenFile, then Read (what a FUSE OPEN calls)
)

var readHows = []readHow{viaReadFile, viaOpen, viaView}

func (h readHow) String() string { return [...]string{"ReadFile", "Open", "Backend view"}[h] }

// readVia reads name through d by how.
func readVia(d *dir.Dir, name string, how readHow) (string, error) {
	var r io.ReadCloser
	switch how {
	case viaReadFile:
		b, err := d.ReadFile(bg, name)
		return string(b), err
	case viaOpen:
		h, err := d.Open(bg, name, os.O_RDONLY, 0)
		if err != nil {
			return "", err
		}
		r = h
	case viaView:
		p, err := vfs.ParseGuest(name)
		if err != nil {
			return "", err
		}
		f, err := d.Backend().OpenFile(bg, p, os.O_RDONLY, 0)
		if err != nil {
			return "", err
		}
		r = f
	}
	defer r.Close()
	b, err := io.ReadAll(r)
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
			for _, how := range readHows {
				want, werr := readVia(plain, name, how)
				got, gerr := readVia(pol, name, how)
				wantSameAnswer(t, fmt.Sprintf("%s (%v)", name, how), guestPath(name, how), got, want, gerr, werr)
			}
		}
	})
}

// guestPath is the path an error of a read of name by how is addressed to:
// name as written, or through the Backend view, the path it parses to.
func guestPath(name string, how readHow) string {
	if how != viaView {
		return name
	}
	if p, err := vfs.ParseGuest(name); err == nil {
		return p.String()
	}
	return name
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
				for _, how := range readHows {
					got, err := readVia(guest, name, how)
					if vfs.CodeOf(err) != vfs.CodePermission {
						t.Errorf("%s (%v): %q, %v; want fs_permission_denied", name, how, got, err)
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
			for _, how := range readHows {
				h.before, h.after, h.refused, h.paths = 0, 0, 0, nil
				if got, err := readVia(guest, "lw/f.txt", how); err != nil || got != "f" {
					t.Fatalf("lw/f.txt: %q, %v", got, err)
				}
				if _, err := readVia(guest, "nope/x", how); vfs.CodeOf(err) != vfs.CodeNotFound {
					t.Errorf("nope/x: %v, want not_found", err)
				}
				if _, err := readVia(guest, "up-none/vault/id", how); err == nil {
					t.Error("read through a missing link succeeded")
				}
				if _, err := readVia(guest, "lw/../protected/p.txt", how); err == nil {
					t.Error("the hook's refusal did not refuse the read")
				}
				if _, err := readVia(guest, "up/vault/id", how); vfs.CodeOf(err) != vfs.CodePermission {
					t.Errorf("up/vault/id: %v, want fs_permission_denied", err)
				}
				// A Before that refuses is owed no After; every other is.
				if h.refused != 1 || h.before != h.after+h.refused {
					t.Errorf("%v: %d Before calls (%d refusing), %d After", how, h.before, h.refused, h.after)
				}
				if len(h.paths) == 0 || h.paths[0] != "work/f.txt" {
					t.Errorf("%v: the hook saw %q first, want the canonical work/f.txt", how, h.paths)
				}
				for _, p := range h.paths {
					if p == "vault/id" {
						t.Errorf("%v: a Before hook ran for a path the policy refused", how)
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
			for _, how := range readHows {
				_ = host.RemoveAll(bg, "d")
				_ = host.RemoveAll(bg, "d.old")
				must(t, host.MkdirAll(bg, "d"))
				must(t, host.WriteFile(bg, "d/id", []byte("decoy"), 0o644))
				must(t, host.MkdirAll(bg, "vault"))
				must(t, host.WriteFile(bg, "vault/id", []byte("KEY"), 0o644))
				guest, _ := dir.New(b, dir.WithPolicy(secretPolicy(t)), dir.WithHooks(swapToVault(t, host, policy.OpRead, "d/id")))
				got, err := readVia(guest, "d/id", how)
				if got == "KEY" {
					t.Fatalf("%v: read the key through a link swapped in after the decision", how)
				}
				if err == nil && got != "decoy" {
					t.Fatalf("%v: read %q", how, got)
				}
			}
		})
	}
}

// statVia is the status of name through d: Stat (follow) or Lstat, by the
// Dir's method or its Backend view's (what a FUSE LOOKUP and GETATTR call).
func statVia(d *dir.Dir, name string, follow, view bool) (vfs.Info, error) {
	if !view {
		var fi fs.FileInfo
		var err error
		if follow {
			fi, err = d.Stat(bg, name)
		} else {
			fi, err = d.Lstat(bg, name)
		}
		if err != nil {
			return vfs.Info{}, err
		}
		return vfs.Info{Name: fi.Name(), Mode: fi.Mode(), Size: fi.Size(), ModTime: fi.ModTime()}, nil
	}
	p, err := vfs.ParseGuest(name)
	if err != nil {
		return vfs.Info{}, err
	}
	if follow {
		return d.Backend().Stat(bg, p)
	}
	return d.Backend().Lstat(bg, p)
}

// TestStatRefusesWhereItLeads: through a link to the root, a hidden directory
// answers a status call, through the Dir and its Backend view, with
// fs_permission_denied whether or not anything is beneath it.
func TestStatRefusesWhereItLeads(t *testing.T) {
	b := aliasBackends[0].new(t)
	host := plant(t, b)
	must(t, host.MkdirAll(bg, "vault"))
	must(t, host.WriteFile(bg, "vault/id", []byte("KEY"), 0o644))
	must(t, host.Symlink(bg, ".", "up"))
	guest, _ := dir.New(b, dir.WithPolicy(secretPolicy(t)))
	for _, name := range []string{"up/vault/id", "up/vault/missing", "up/vault"} {
		for _, follow := range []bool{false, true} {
			for _, view := range []bool{false, true} {
				if _, err := statVia(guest, name, follow, view); vfs.CodeOf(err) != vfs.CodePermission {
					t.Errorf("%s (follow %v, view %v): %v, want fs_permission_denied", name, follow, view, err)
				}
			}
		}
	}
}

// countingBackend counts the calls a Dir makes on b that look a path up or
// open it, forwarding the resolvers b offers.
type countingBackend struct {
	vfs.Backend
	mu sync.Mutex
	n  map[string]int
}

func (c *countingBackend) add(m string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[m]++
}

// take returns the calls counted since the last take.
func (c *countingBackend) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func (c *countingBackend) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	c.add("Lstat")
	return c.Backend.Lstat(ctx, p)
}

func (c *countingBackend) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	c.add("Stat")
	return c.Backend.Stat(ctx, p)
}

func (c *countingBackend) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	c.add("OpenFile")
	return c.Backend.OpenFile(ctx, p, flag, perm)
}

func (c *countingBackend) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	c.add("Resolve")
	return c.Backend.Resolve(ctx, p, follow)
}

func (c *countingBackend) ResolveStat(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, vfs.Info, error) {
	c.add("ResolveStat")
	return vfs.ResolveStat(ctx, c.Backend, p, follow)
}

func (c *countingBackend) ResolveOpen(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) (vfs.File, vfs.Location, error) {
	c.add("ResolveOpen")
	return vfs.ResolveOpen(ctx, c.Backend, p, decide)
}

// TestBackendViewOneLookup: with a policy, a Backend view's Lstat, Stat and
// read-only OpenFile (a FUSE LOOKUP, GETATTR and OPEN) make one backend call
// each, the resolution that decided them: the status it found, that nothing
// is there, or the file it opened.
func TestBackendViewOneLookup(t *testing.T) {
	for _, ab := range aliasBackends {
		t.Run(ab.name, func(t *testing.T) {
			b := ab.new(t)
			host := plant(t, b)
			must(t, host.Symlink(bg, "work/f.txt", "lf"))
			cb := &countingBackend{Backend: b, n: map[string]int{}}
			guest, _ := dir.New(cb, dir.WithPolicy(aliasPolicy(t)))
			view := guest.Backend()
			one := func(what, call string, err error, wantCode vfs.Code) {
				t.Helper()
				if vfs.CodeOf(err) != wantCode {
					t.Errorf("%s: %v, want %s", what, err, wantCode)
				}
				if got := cb.take(); len(got) != 1 || got[call] != 1 {
					t.Errorf("%s: backend calls %v, want one %s", what, got, call)
				}
			}
			_, err := view.Lstat(bg, vfs.MustParse("work/f.txt"))
			one("Lstat of a file", "ResolveStat", err, "")
			_, err = view.Lstat(bg, vfs.MustParse("work/nope"))
			one("Lstat of a missing name", "ResolveStat", err, vfs.CodeNotFound)
			_, err = view.Stat(bg, vfs.MustParse("lf"))
			one("Stat through a link", "ResolveStat", err, "")
			f, err := view.OpenFile(bg, vfs.MustParse("lf"), os.O_RDONLY, 0)
			one("read-only open through a link", "ResolveOpen", err, "")
			if err == nil {
				b, _ := io.ReadAll(f)
				f.Close()
				if string(b) != "f" {
					t.Errorf("read %q through the view, want %q", b, "f")
				}
			}
		})
	}
}
