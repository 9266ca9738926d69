package dir_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// Policy aliasing (THREATS lines 52–56): a rule must hold under every name a guest
// can give a path. Each test runs over memory and over the physical backend with
// openat2 and with the portable resolver.

// aliasBackend is one storage under test: the backend, and a host-side Dir over it
// (the default policy, none: what the host may do) to plant and inspect.
type aliasBackend struct {
	name string
	new  func(t *testing.T) vfs.Backend
}

var aliasBackends = []aliasBackend{
	{"memory", func(t *testing.T) vfs.Backend { return memory.New() }},
	{"physical-openat2", func(t *testing.T) vfs.Backend { return newPhysical(t, physical.ResolverAuto) }},
	{"physical-portable", func(t *testing.T) vfs.Backend { return newPhysical(t, physical.ResolverPortable) }},
}

func newPhysical(t *testing.T, mode physical.ResolverMode) vfs.Backend {
	t.Helper()
	fs, err := physical.New(t.TempDir(), physical.WithResolver(mode))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs
}

// aliasPolicy is the default policy plus an anchored rule: nothing under the
// top-level "protected" directory may be written.
func aliasPolicy(t testing.TB) policy.Policy {
	t.Helper()
	e, err := policy.New(policy.Config{Rules: []policy.Rule{{
		Effect: policy.Deny, Ops: []policy.Op{policy.OpWrite, policy.OpCreate, policy.OpMkdir, policy.OpRemove, policy.OpRename, policy.OpSymlink, policy.OpLink, policy.OpChmod, policy.OpChtimes, policy.OpCopy},
		Paths: []string{"protected", "protected/**"}, Reason: "protected",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// plant builds the host's tree: a git repository's config and hook, a secret, the
// protected directory, and a work directory.
func plant(t *testing.T, b vfs.Backend) *dir.Dir {
	t.Helper()
	host, _ := dir.New(b)
	for _, d := range []string{".git/hooks", ".ssh", "protected", "work/sub"} {
		must(t, host.MkdirAll(bg, d))
	}
	for name, body := range map[string]string{
		".git/config": "[core]\n", ".git/hooks/pre-commit": "#!/bin/sh\n", ".ssh/id_rsa": "KEY",
		"protected/p.txt": "p", "work/f.txt": "f",
	} {
		must(t, host.WriteFile(bg, name, []byte(body), 0o644))
	}
	return host
}

func eachAlias(t *testing.T, fn func(t *testing.T, guest, host *dir.Dir, b vfs.Backend)) {
	for _, ab := range aliasBackends {
		t.Run(ab.name, func(t *testing.T) {
			b := ab.new(t)
			host := plant(t, b)
			guest, _ := dir.New(b, dir.WithPolicy(aliasPolicy(t)))
			fn(t, guest, host, b)
		})
	}
}

// unchanged fails the test if the host's planted files changed.
func unchanged(t *testing.T, host *dir.Dir) {
	t.Helper()
	for name, body := range map[string]string{".git/config": "[core]\n", ".git/hooks/pre-commit": "#!/bin/sh\n", "protected/p.txt": "p"} {
		if got := readString(t, host, name); got != body {
			t.Errorf("%s = %q, want %q: a guest changed it", name, got, body)
		}
	}
}

func TestAliasBySymlink(t *testing.T) {
	eachAlias(t, func(t *testing.T, guest, host *dir.Dir, b vfs.Backend) {
		// Links a host (or a sandboxed run, or an earlier session) left in place.
		must(t, host.Symlink(bg, ".git", "g"))
		must(t, host.Symlink(bg, ".ssh", "s"))
		must(t, host.Symlink(bg, "..", "work/up"))
		must(t, host.Symlink(bg, "../../.git/hooks", "work/sub/h"))
		for _, name := range []string{"g/config", "g/hooks/pre-commit", "g/hooks/post-checkout", "work/up/.git/config", "work/up/protected/p.txt", "work/up/protected/new", "work/sub/h/pre-commit"} {
			wantCode(t, guest.WriteFile(bg, name, []byte("PAYLOAD"), 0o755), vfs.CodePermission)
			wantCode(t, guest.Append(bg, name, []byte("PAYLOAD")), vfs.CodePermission)
			h, err := guest.Open(bg, name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
			if err == nil {
				h.Close()
			}
			wantCode(t, err, vfs.CodePermission)
			if err := guest.Chmod(bg, name, 0o777); vfs.CodeOf(err) != vfs.CodePermission && vfs.CodeOf(err) != vfs.CodeNotFound {
				t.Errorf("Chmod(%s) = %v, want fs_permission_denied (or not_found for a new name)", name, err)
			}
		}
		wantCode(t, guest.MkdirAll(bg, "g/hooks/x/y"), vfs.CodePermission)
		wantCode(t, guest.Remove(bg, "g/config"), vfs.CodePermission)
		wantCode(t, guest.Move(bg, "work/f.txt", "g/hooks/pre-push"), vfs.CodePermission)
		// Reads of a secret are refused under every name too.
		for _, name := range []string{"s/id_rsa", "work/up/.ssh/id_rsa"} {
			_, err := guest.ReadFile(bg, name)
			wantCode(t, err, vfs.CodePermission)
			_, err = guest.Stat(bg, name)
			wantCode(t, err, vfs.CodePermission)
		}
		_, err := guest.List(bg, "s")
		wantCode(t, err, vfs.CodePermission)
		// A guest cannot make such a link itself.
		wantCode(t, guest.Symlink(bg, ".git/hooks", "gh"), vfs.CodePermission)
		wantCode(t, guest.Symlink(bg, "g/hooks", "gh2"), vfs.CodePermission)
		wantCode(t, guest.Symlink(bg, "../protected", "work/pp"), vfs.CodePermission)
		// The same work goes through where nothing is protected.
		must(t, guest.WriteFile(bg, "work/up/work/new.txt", []byte("ok"), 0o644))
		if got := readString(t, host, "work/new.txt"); got != "ok" {
			t.Errorf("work/new.txt = %q", got)
		}
		unchanged(t, host)
	})
}

func TestAliasByMove(t *testing.T) {
	eachAlias(t, func(t *testing.T, guest, host *dir.Dir, b vfs.Backend) {
		// Moving a protected directory, or a parent of one, is refused.
		wantCode(t, guest.Move(bg, ".git", "g"), vfs.CodePermission)
		wantCode(t, guest.Move(bg, ".git/hooks", "hooks"), vfs.CodePermission)
		wantCode(t, guest.Move(bg, "protected", "unprotected"), vfs.CodePermission)
		must(t, host.MkdirAll(bg, "nest/.git/hooks"))
		must(t, host.WriteFile(bg, "nest/.git/config", []byte("[core]\n"), 0o644))
		wantCode(t, guest.Move(bg, "nest", "moved"), vfs.CodePermission)
		// Moving something to a protected name is refused.
		wantCode(t, guest.Move(bg, "work", "protected/work"), vfs.CodePermission)
		wantCode(t, guest.Move(bg, "work/sub", ".git/hooks/sub"), vfs.CodePermission)
		// After a refused move every name is where it was.
		for _, name := range []string{".git/config", "protected/p.txt", "nest/.git/config", "work/f.txt"} {
			if _, err := host.Stat(bg, name); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		unchanged(t, host)
	})
}

// TestAliasByMoveRace races two guests over one tree (THREATS 53: the check and
// the change atomic). A rule protects only the name f/y. Guest A moves e to f and
// back, which its subtree check allows while e holds no y; guest B creates e/y and
// removes it. Without the tree lock, B's e/y can land between A's check of e and
// its rename, and f/y then exists, written by a guest. A checks after each move
// it made: f/y must never be there.
func TestAliasByMoveRace(t *testing.T) {
	e, err := policy.New(policy.Config{Rules: []policy.Rule{{
		Effect: policy.Deny, Ops: []policy.Op{policy.OpWrite, policy.OpCreate, policy.OpMkdir, policy.OpRename, policy.OpCopy, policy.OpSymlink, policy.OpLink},
		Paths: []string{"f/y", "f/y/**"}, Reason: "only f/y is protected",
	}}})
	must(t, err)
	rounds := 400
	if testing.Short() {
		rounds = 100
	}
	for _, ab := range aliasBackends {
		t.Run(ab.name, func(t *testing.T) {
			b := ab.new(t)
			host, _ := dir.New(b)
			must(t, host.MkdirAll(bg, "e"))
			a, _ := dir.New(b, dir.WithPolicy(e))
			g, _ := dir.New(b, dir.WithPolicy(e))
			var stop atomic.Bool
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					_ = g.WriteFile(bg, "e/y", []byte("PAYLOAD"), 0o644)
					_ = g.Remove(bg, "e/y")
				}
			}()
			moved, bypass := 0, 0
			for i := 0; i < rounds; i++ {
				if a.Move(bg, "e", "f") != nil {
					continue
				}
				moved++
				if _, err := host.Lstat(bg, "f/y"); err == nil {
					bypass++
					must(t, host.Remove(bg, "f/y"))
				}
				must(t, a.Move(bg, "f", "e"))
			}
			stop.Store(true)
			wg.Wait()
			t.Logf("%d moves, %d bypasses", moved, bypass)
			if bypass != 0 {
				t.Errorf("f/y was written by a guest %d times (a move was checked, then e/y landed before the rename)", bypass)
			}
			if moved == 0 {
				t.Error("no move went through: the race was never run")
			}
		})
	}
}

func TestPinnedSubFollowsItsDirectory(t *testing.T) {
	eachAlias(t, func(t *testing.T, guest, host *dir.Dir, b vfs.Backend) {
		sub, err := guest.Sub(bg, "work")
		must(t, err)
		f, err := guest.OpenFile(bg, "work/f.txt")
		must(t, err)
		must(t, sub.WriteFile(bg, "before.txt", []byte("ok"), 0o644))
		// The host moves the directory into a protected place.
		must(t, host.Move(bg, "work", "protected/work"))
		wantCode(t, sub.WriteFile(bg, "after.txt", []byte("PAYLOAD"), 0o644), vfs.CodePermission)
		wantCode(t, f.WriteBytes(bg, []byte("PAYLOAD")), vfs.CodePermission)
		if _, err := host.Stat(bg, "protected/work/after.txt"); err == nil {
			t.Error("a pinned Sub wrote into protected/ after its directory moved there")
		}
		if got := readString(t, host, "protected/work/f.txt"); got != "f" {
			t.Errorf("a pinned File wrote into protected/: %q", got)
		}
		// And back out: it decides on where it is now again.
		must(t, host.Move(bg, "protected/work", "work"))
		must(t, sub.WriteFile(bg, "after.txt", []byte("ok"), 0o644))
		must(t, f.WriteBytes(bg, []byte("ok")))
		// A Sub whose directory moves under .git is protected by the git rules.
		must(t, host.Move(bg, "work", ".git/hooks/work"))
		wantCode(t, sub.WriteFile(bg, "pre-commit", []byte("PAYLOAD"), 0o755), vfs.CodePermission)
		unchanged(t, host)
	})
}

func TestCopyDecidesLinkTargets(t *testing.T) {
	eachAlias(t, func(t *testing.T, guest, host *dir.Dir, b vfs.Backend) {
		must(t, host.MkdirAll(bg, "tree/a"))
		must(t, host.Symlink(bg, "../../protected", "tree/a/l"))
		// Copied one level deeper, "../../protected" would name "tree2/protected"
		// and back at the root it names protected itself: every recreated link's
		// target is decided where it leads from its new place.
		must(t, host.Symlink(bg, "../.git/hooks", "tree/h"))
		wantCode(t, guest.Copy(bg, "tree", "tree2"), vfs.CodePermission)
		if _, err := host.Lstat(bg, "tree2"); err == nil {
			t.Error("a refused Copy left tree2 behind")
		}
		wantCode(t, guest.Copy(bg, "tree/h", "tree/h2"), vfs.CodePermission)
		// Copied to the root, "../.git/hooks" leaves the tree: data, never
		// followed, stored where the backend holds its data privately; the
		// physical backend refuses to create it.
		if _, ok := b.(*memory.FS); ok {
			must(t, guest.Copy(bg, "tree/h", "h2"))
			wantCode(t, guest.WriteFile(bg, "h2/pre-commit", []byte("PAYLOAD"), 0o755), vfs.CodeOutside)
		} else {
			wantCode(t, guest.Copy(bg, "tree/h", "h2"), vfs.CodeOutside)
		}
		wantCode(t, guest.Copy(bg, "work/f.txt", "g/x"), vfs.CodeNotFound)
		unchanged(t, host)
	})
}

// TestSwapAfterDecision swaps a directory for a link to .git between the
// decision and the action (a hook runs between them): the call fails and reaches
// nothing undecided.
func TestSwapAfterDecision(t *testing.T) {
	for _, ab := range aliasBackends {
		t.Run(ab.name, func(t *testing.T) {
			b := ab.new(t)
			host := plant(t, b)
			must(t, host.MkdirAll(bg, "d"))
			swap := hookFunc(func(ctx context.Context, r *policy.Request) error {
				if r.Op == policy.OpWrite {
					_ = host.Move(bg, "d", "d.old")
					_ = host.Symlink(bg, ".git", "d")
				}
				return nil
			})
			guest, _ := dir.New(b, dir.WithPolicy(aliasPolicy(t)), dir.WithHooks(swap))
			err := guest.WriteFile(bg, "d/config", []byte("PAYLOAD"), 0o644)
			if err == nil {
				t.Fatal("a write decided on d/config landed after d became a link to .git")
			}
			unchanged(t, host)
		})
	}
}

type hookFunc func(ctx context.Context, r *policy.Request) error

func (h hookFunc) Before(ctx context.Context, r *policy.Request) error { return h(ctx, r) }
func (h hookFunc) After(context.Context, *policy.Request, error)       {}

// TestLinkIntoReadOnlyMount: a link in a read-write mount to a path a read-only
// mount serves reaches the read-only mount (THREATS 56).
func TestLinkIntoReadOnlyMount(t *testing.T) {
	base := memory.New()
	hb, _ := dir.New(base)
	must(t, hb.MkdirAll(bg, "vendor"))
	must(t, hb.WriteFile(bg, "vendor/lib.go", []byte("base"), 0o644))
	must(t, hb.Symlink(bg, "vendor", "v"))
	vendor := memory.New()
	hv, _ := dir.New(vendor)
	must(t, hv.WriteFile(bg, "lib.go", []byte("vendored"), 0o644))
	ns := vfs.NewNamespace()
	must(t, ns.Mount(vfs.Root, base, vfs.MountOptions{}))
	must(t, ns.Mount(vfs.MustParse("vendor"), vendor, vfs.MountOptions{ReadOnly: true}))
	for _, opts := range [][]dir.Option{nil, {dir.WithPolicy(aliasPolicy(t))}} {
		guest, _ := dir.New(ns, opts...)
		if got := readString(t, guest, "v/lib.go"); got != "vendored" {
			t.Errorf("v/lib.go = %q, want the mounted file", got)
		}
		wantCode(t, guest.WriteFile(bg, "v/lib.go", []byte("PAYLOAD"), 0o644), vfs.CodeReadOnly)
		wantCode(t, guest.WriteFile(bg, "v/new.go", []byte("PAYLOAD"), 0o644), vfs.CodeReadOnly)
		wantCode(t, guest.Remove(bg, "v/lib.go"), vfs.CodeReadOnly)
	}
	if got := readString(t, hb, "vendor/lib.go"); got != "base" {
		t.Errorf("the shadowed directory changed: %q", got)
	}
	if _, err := hb.Stat(bg, "vendor/new.go"); err == nil {
		t.Error("a file was created in the shadowed directory")
	}
}

// TestSizeLimitHoldsForAppendAndCopy: the policy's file size limit holds for an
// Append and a Copy as for WriteFile (THREATS item 7).
func TestSizeLimitHoldsForAppendAndCopy(t *testing.T) {
	e, err := policy.New(policy.Config{MaxFileSize: 10})
	must(t, err)
	d, _, _ := newTree(t, dir.WithPolicy(e))
	must(t, d.WriteFile(bg, "small", []byte("0123456789"), 0o644))
	wantCode(t, d.WriteFile(bg, "big", []byte("0123456789x"), 0o644), vfs.CodePermission)
	wantCode(t, d.Append(bg, "small", []byte("x")), vfs.CodePermission)
	f, err := d.OpenFile(bg, "small")
	must(t, err)
	wantCode(t, f.Append(bg, []byte("x")), vfs.CodePermission)
	if got := readString(t, d, "small"); got != "0123456789" {
		t.Errorf("small = %q after refused appends", got)
	}
	must(t, d.Append(bg, "new", []byte("0123456789")))
	// A host-made large file cannot be copied past the limit either.
	_, _, m := newTree(t)
	hd, _ := dir.New(m)
	must(t, hd.WriteFile(bg, "huge", make([]byte, 100), 0o644))
	must(t, hd.MkdirAll(bg, "t"))
	must(t, hd.WriteFile(bg, "t/huge", make([]byte, 100), 0o644))
	g, _ := dir.New(m, dir.WithPolicy(e))
	wantCode(t, g.Copy(bg, "huge", "huge2"), vfs.CodePermission)
	wantCode(t, g.Copy(bg, "t", "t2"), vfs.CodePermission)
	for _, name := range []string{"huge2", "t2"} {
		if _, err := hd.Lstat(bg, name); err == nil {
			t.Errorf("%s exists after a refused copy", name)
		}
	}
}

// TestFSViewRefusalsAudited: a name the io/fs view refuses is audited like every
// other refusal.
func TestFSViewRefusalsAudited(t *testing.T) {
	ring := audit.NewRing(16)
	d, _, _ := newTree(t, dir.WithAudit(ring))
	fsys := d.FS()
	for _, name := range []string{"../x", "/etc/passwd", "a//b"} {
		if _, err := fsys.Open(name); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("Open(%q) = %v, want fs.ErrInvalid", name, err)
		}
	}
	evs := ring.Events()
	if len(evs) != 3 {
		t.Fatalf("%d audit events, want 3: %+v", len(evs), evs)
	}
	for _, ev := range evs {
		if ev.Outcome != audit.Denied || ev.Code != string(vfs.CodeInvalidPath) {
			t.Errorf("event %+v: want denied invalid_path", ev)
		}
	}
}

// TestSubOfMountDecidesTreePaths: a Sub taken at (or under) a mount point decides
// on paths from the tree's root, whatever its backend counts its own location from.
func TestSubOfMountDecidesTreePaths(t *testing.T) {
	e, err := policy.New(policy.Config{Rules: []policy.Rule{{
		Effect: policy.Deny, Ops: []policy.Op{policy.OpWrite, policy.OpCreate},
		Paths: []string{"project/secret/**"}, Reason: "anchored",
	}}})
	must(t, err)
	for _, ab := range aliasBackends {
		t.Run(ab.name, func(t *testing.T) {
			b := ab.new(t)
			host, _ := dir.New(b)
			must(t, host.MkdirAll(bg, "secret/deep"))
			ns := vfs.NewNamespace()
			must(t, ns.Mount(vfs.MustParse("project"), b, vfs.MountOptions{}))
			must(t, ns.Mount(vfs.MustParse("tmp"), memory.New(), vfs.MountOptions{}))
			root, _ := dir.New(ns, dir.WithPolicy(e))
			wantCode(t, root.WriteFile(bg, "project/secret/x", []byte("x"), 0o644), vfs.CodePermission)
			for _, at := range []string{"project", "project/secret"} {
				sub, err := root.Sub(bg, at)
				must(t, err)
				name := "secret/x"
				if at == "project/secret" {
					name = "x"
				}
				wantCode(t, sub.WriteFile(bg, name, []byte("x"), 0o644), vfs.CodePermission)
				// A Dir made under the Sub decides on tree paths too.
				d2, err := sub.CreateDir(bg, "new-"+strings.ReplaceAll(at, "/", "-"))
				must(t, err)
				err = d2.WriteFile(bg, "file", []byte("x"), 0o644)
				if at == "project" {
					must(t, err)
				} else {
					wantCode(t, err, vfs.CodePermission)
				}
			}
		})
	}
}

// TestStatFromResolution: a Dir with a policy answers Stat and Lstat from the
// lookup its decision was made on (vfs.StatResolver on physical, directly and
// under a Namespace): the status it found, or that nothing is there. The
// answers, through the Dir and through its Backend view (what a FUSE LOOKUP
// and GETATTR call), match a Dir without a policy, and errors are addressed
// to the guest's path.
func TestStatFromResolution(t *testing.T) {
	eachFusedTree(t, "../work/f.txt", func(t *testing.T, plain, pol *dir.Dir, prefix string) {
		for _, name := range []string{"lf", "lw", "lw/f.txt", "lw/", "work/sub/up", "dangling", "work", "work/", "work/f.txt/", "nope", "nope/x", "work/nope", "work/f.txt/x", "protected/p.txt", "."} {
			name = prefix + name
			for _, follow := range []bool{false, true} {
				for _, view := range []bool{false, true} {
					want, werr := statVia(plain, name, follow, view)
					got, gerr := statVia(pol, name, follow, view)
					what := fmt.Sprintf("%s (follow %v, view %v)", name, follow, view)
					if vfs.CodeOf(gerr) != vfs.CodeOf(werr) || got.Name != want.Name || got.Mode != want.Mode || got.Size != want.Size || !got.ModTime.Equal(want.ModTime) {
						t.Errorf("%s: %s %v %d, %v; without a policy %s %v %d, %v", what, got.Name, got.Mode, got.Size, gerr, want.Name, want.Mode, want.Size, werr)
					}
					how := viaOpen
					if view {
						how = viaView
					}
					var ve *vfs.Error
					if gerr != nil && (!asVFS(gerr, &ve) || ve.Path != guestPath(name, how)) {
						t.Errorf("%s: error %v is not addressed to the guest's path", what, gerr)
					}
				}
			}
		}
	})
}

// TestSwapAfterDecisionFinalAndTree: the file itself swapped for a link to
// .git/config after the decision (WriteFile follows a final link, so this is its
// own route), and a directory swapped during MkdirAll and RemoveAll: nothing
// beyond the decided location is reached.
func TestSwapAfterDecisionFinalAndTree(t *testing.T) {
	for _, ab := range aliasBackends {
		t.Run(ab.name, func(t *testing.T) {
			b := ab.new(t)
			host := plant(t, b)
			must(t, host.WriteFile(bg, "target", []byte("t"), 0o644))
			var armed atomic.Bool
			swap := hookFunc(func(ctx context.Context, r *policy.Request) error {
				if !armed.Swap(false) {
					return nil
				}
				switch r.Op {
				case policy.OpWrite:
					_ = host.Remove(bg, "target")
					_ = host.Symlink(bg, ".git/config", "target")
				case policy.OpMkdir, policy.OpRemove:
					_ = host.Move(bg, "work/sub", "work/sub.old")
					_ = host.Symlink(bg, "../.git/hooks", "work/sub")
				}
				return nil
			})
			guest, _ := dir.New(b, dir.WithPolicy(aliasPolicy(t)), dir.WithHooks(swap))
			armed.Store(true)
			if err := guest.WriteFile(bg, "target", []byte("PAYLOAD"), 0o644); err == nil {
				t.Error("WriteFile went through a final link swapped in after the decision")
			}
			armed.Store(true)
			if err := guest.MkdirAll(bg, "work/sub/new/deeper"); err == nil {
				t.Error("MkdirAll went through a directory swapped for a link after the decision")
			}
			must(t, host.Remove(bg, "work/sub"))
			must(t, host.Move(bg, "work/sub.old", "work/sub"))
			must(t, host.MkdirAll(bg, "work/sub/x"))
			armed.Store(true)
			_ = guest.RemoveAll(bg, "work/sub/x")
			unchanged(t, host)
			if _, err := host.Lstat(bg, ".git/hooks/new"); err == nil {
				t.Error("a directory was created in .git/hooks")
			}
			if _, err := host.Lstat(bg, ".git/hooks/pre-commit"); err != nil {
				t.Errorf(".git/hooks/pre-commit: %v", err)
			}
		})
	}
}

// TestCheckResolvesAsTheCall: Dir.Check decides where the call it stands for would
// act: removing a link to .git is not removing .git, writing through it is writing
// .git.
func TestCheckResolvesAsTheCall(t *testing.T) {
	eachAlias(t, func(t *testing.T, guest, host *dir.Dir, b vfs.Backend) {
		must(t, host.Symlink(bg, ".git/config", "cfg"))
		must(t, guest.Check(bg, policy.OpRemove, "cfg", "", -1))
		must(t, guest.Check(bg, policy.OpRename, "cfg", "cfg2", -1))
		wantCode(t, guest.Check(bg, policy.OpWrite, "cfg", "", 3), vfs.CodePermission)
		wantCode(t, guest.Check(bg, policy.OpChmod, "cfg", "", -1), vfs.CodePermission)
		wantCode(t, guest.Check(bg, policy.OpSymlink, "l2", ".git/hooks", -1), vfs.CodePermission)
		must(t, guest.Remove(bg, "cfg"))
		unchanged(t, host)
	})
}
