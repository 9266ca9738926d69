//go:build linux

package dir_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/mcpserver"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// TestStressAliasing races attackers that rename, symlink-swap and move
// directories against guests reading and writing through Dirs (with the default
// policy) and through the MCP server, and counts escapes (content from outside the
// root read) and policy bypasses (the secret read, or a protected file written,
// under any name). Both must be zero. make test runs a bounded version; make
// stress (CAPFS_STRESS=1) runs at least 1,000,000 operations over the physical
// backend (openat2 and portable) and memory.
func TestStressAliasing(t *testing.T) {
	// total counts every operation, the attackers' included; guests make at least
	// a fifth of it themselves.
	total := 15_000
	if os.Getenv("CAPFS_STRESS") != "" {
		total = 1_000_000
	}
	type backendCase struct {
		name string
		mode physical.ResolverMode
		phys bool
		part int // share of total, in percent
	}
	cases := []backendCase{
		{"physical-openat2", physical.ResolverAuto, true, 45},
		{"physical-portable", physical.ResolverPortable, true, 25},
		{"memory", 0, false, 30},
	}
	var ops, escapes, bypasses atomic.Int64
	for _, bc := range cases {
		t.Run(bc.name, func(t *testing.T) {
			st := newAliasStress(t, bc.phys, bc.mode)
			n := total * bc.part / 100
			o, e, b := st.run(t, n)
			ops.Add(o)
			escapes.Add(e)
			bypasses.Add(b)
		})
	}
	t.Logf("alias stress: %d operations, %d escapes, %d policy bypasses", ops.Load(), escapes.Load(), bypasses.Load())
	if escapes.Load() != 0 || bypasses.Load() != 0 {
		t.Errorf("%d escapes and %d policy bypasses, want none", escapes.Load(), bypasses.Load())
	}
}

const (
	stressSecret  = "SECRET-KEY-0e1f"
	stressOutside = "OUTSIDE-0e1f"
	stressPayload = "PAYLOAD-0e1f"
	stressConfig  = "[core]\n\tbare = false\n"
)

type aliasStress struct {
	b       vfs.Backend
	host    *dir.Dir // the host's own view: no policy
	guest   *dir.Dir // a guest with the default policy
	mcp     *mcp.ClientSession
	rootDir string // the physical root's host path, "" for memory
	outDir  string
}

func newAliasStress(t *testing.T, phys bool, mode physical.ResolverMode) *aliasStress {
	st := &aliasStress{}
	if phys {
		top := t.TempDir()
		st.rootDir, st.outDir = filepath.Join(top, "proj"), filepath.Join(top, "outside")
		for _, d := range []string{st.rootDir, st.outDir} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(st.outDir, "key"), []byte(stressOutside), 0o644); err != nil {
			t.Fatal(err)
		}
		fs, err := physical.New(st.rootDir, physical.WithResolver(mode))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fs.Close() })
		st.b = fs
	} else {
		st.b = memory.New()
	}
	st.host, _ = dir.New(st.b)
	for _, d := range []string{".git/hooks", ".ssh", "work/a", "work/b", "work/m"} {
		must(t, st.host.MkdirAll(bg, d))
	}
	must(t, st.host.WriteFile(bg, ".git/config", []byte(stressConfig), 0o644))
	must(t, st.host.WriteFile(bg, ".git/hooks/pre-commit.sample", []byte("#!/bin/sh\n"), 0o755))
	must(t, st.host.WriteFile(bg, ".ssh/key", []byte(stressSecret), 0o600))
	must(t, st.host.WriteFile(bg, "work/a/f", []byte("a"), 0o644))
	st.guest, _ = dir.New(st.b, dir.WithPolicy(policy.Defaults()))
	st.mcp = connectStress(t, st.guest)
	return st
}

func connectStress(t *testing.T, d *dir.Dir) *mcp.ClientSession {
	t.Helper()
	srv := mcpserver.New(d, mcpserver.Options{})
	stt, ctt := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(bg, stt, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stress", Version: "v0"}, nil).Connect(bg, ctt, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// guestPaths are what guests read and write: names that, depending on the
// attackers, lead to plain work files, to .git, to .ssh or outside.
var guestReads = []string{"work/a/config", "work/a/key", "work/b/key", "work/b/config", "work/c/key", "work/a/f", "work/m/key", "work/l/key", "work/l/config"}
var guestWrites = []string{"work/a/config", "work/a/hooks/pre-commit", "work/b/config", "work/m/config", "work/l/config", "work/l/hooks/post-checkout", "work/a/x"}

func (st *aliasStress) run(t *testing.T, n int) (ops, escapes, bypasses int64) {
	var done atomic.Bool
	var count, esc, byp atomic.Int64
	var wg, guestsWG sync.WaitGroup
	attack := func(seed uint64, fn func(r *rand.Rand)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 7))
			for !done.Load() {
				fn(r)
				count.Add(1)
			}
		}()
	}
	// Attacker 1: swap work/a (a directory) with a link to .git, .ssh or outside.
	attack(1, func(r *rand.Rand) {
		targets := []string{"../.git", "../.ssh", "m", "../work/b"}
		tgt := targets[r.IntN(len(targets))]
		if st.rootDir != "" && r.IntN(4) == 0 {
			// A link a sandboxed process could make: outside the root.
			st.rawSwap(filepath.Join(st.rootDir, "work", "a"), "../../outside")
			return
		}
		if st.rootDir != "" {
			st.rawSwap(filepath.Join(st.rootDir, "work", "a"), tgt)
			return
		}
		_ = st.host.Move(bg, "work/a", "work/a.old")
		_ = st.host.Symlink(bg, tgt, "work/a")
		_ = st.host.Remove(bg, "work/a")
		_ = st.host.Move(bg, "work/a.old", "work/a")
	})
	// Attacker 2: a link that keeps changing where it leads.
	attack(2, func(r *rand.Rand) {
		targets := []string{"../.git", "../.ssh", "b", "a", "../.git/hooks"}
		_ = st.host.Remove(bg, "work/l")
		_ = st.host.Symlink(bg, targets[r.IntN(len(targets))], "work/l")
		if st.rootDir != "" && r.IntN(3) == 0 {
			_ = os.Remove(filepath.Join(st.rootDir, "work", "c"))
			_ = os.Symlink("../../outside", filepath.Join(st.rootDir, "work", "c"))
		}
	})
	// Attacker 3: a guest moving directories around, and trying to move the
	// protected ones (refused) or to give them new names.
	attack(3, func(r *rand.Rand) {
		switch r.IntN(5) {
		case 0:
			_ = st.guest.Move(bg, "work/m", "work/m2")
			_ = st.guest.Move(bg, "work/m2", "work/m")
		case 1:
			_ = st.guest.Move(bg, ".git", "work/m/git")
		case 2:
			_ = st.guest.Symlink(bg, "../.git", "work/g")
		case 3:
			_ = st.guest.Move(bg, ".ssh", "work/ssh")
		default:
			_ = st.guest.Move(bg, "work/b", "work/m/b")
			_ = st.guest.Move(bg, "work/m/b", "work/b")
		}
	})
	guests := 3
	per := n / guests / 5
	var guestOps atomic.Int64
	for g := 0; g < guests; g++ {
		guestsWG.Add(1)
		go func(g int) {
			defer guestsWG.Done()
			r := rand.New(rand.NewPCG(uint64(g), 11))
			viaMCP := g == 2
			for i := 0; i < per || count.Load() < int64(n); i++ {
				write := r.IntN(3) == 0
				var name string
				var got []byte
				if write {
					name = guestWrites[r.IntN(len(guestWrites))]
					if viaMCP && i%4 == 0 {
						st.mcpWrite(name)
					} else {
						_ = st.guest.WriteFile(bg, name, []byte(stressPayload), 0o755)
					}
				} else {
					name = guestReads[r.IntN(len(guestReads))]
					if viaMCP && i%4 == 0 {
						got = st.mcpRead(name)
					} else {
						got, _ = st.guest.ReadFile(bg, name)
					}
					switch {
					case bytes.Contains(got, []byte(stressOutside)):
						esc.Add(1)
					case bytes.Contains(got, []byte(stressSecret)):
						byp.Add(1)
					}
				}
				count.Add(1)
				guestOps.Add(1)
			}
		}(g)
	}
	// Wait for the guests, then stop the attackers.
	guestsWG.Wait()
	done.Store(true)
	wg.Wait()
	t.Logf("%d operations, %d by guests", count.Load(), guestOps.Load())
	byp.Add(st.protectedChanged(t))
	if st.rootDir != "" {
		if b, err := os.ReadFile(filepath.Join(st.outDir, "key")); err != nil || string(b) != stressOutside {
			esc.Add(1)
			t.Errorf("outside/key changed: %q, %v", b, err)
		}
		ents, _ := os.ReadDir(st.outDir)
		if len(ents) != 1 {
			esc.Add(1)
			t.Errorf("outside holds %d entries, want 1", len(ents))
		}
	}
	return count.Load(), esc.Load(), byp.Load()
}

// protectedChanged counts protected files a guest changed: .git/config, the
// hooks directory (only the sample may be there) and the secret.
func (st *aliasStress) protectedChanged(t *testing.T) int64 {
	var n int64
	if b, err := st.host.ReadFile(bg, ".git/config"); err != nil || string(b) != stressConfig {
		t.Errorf(".git/config = %q, %v", b, err)
		n++
	}
	hooks, err := st.host.List(bg, ".git/hooks")
	if err != nil || len(hooks) != 1 || hooks[0] != "pre-commit.sample" {
		t.Errorf(".git/hooks holds %v (%v)", hooks, err)
		n++
	}
	if b, err := st.host.ReadFile(bg, ".ssh/key"); err != nil || string(b) != stressSecret {
		t.Errorf(".ssh/key = %q, %v", b, err)
		n++
	}
	gitEnts, _ := st.host.List(bg, ".git")
	for _, e := range gitEnts {
		if e != "config" && e != "hooks" {
			if b, err := st.host.ReadFile(bg, ".git/"+e); err == nil && bytes.Contains(b, []byte(stressPayload)) {
				t.Errorf(".git/%s written by a guest", e)
				n++
			}
		}
	}
	return n
}

// rawSwap exchanges path (a directory) with a new symlink to target, and back,
// with renameat2(RENAME_EXCHANGE), as a process sharing the tree could.
func (st *aliasStress) rawSwap(path, target string) {
	tmp := path + ".lnk"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return
	}
	if unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE) == nil {
		runtime.Gosched()
		_ = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE)
	}
	_ = os.Remove(tmp)
}

func (st *aliasStress) mcpRead(name string) []byte {
	res, err := st.mcp.CallTool(context.Background(), &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": name}})
	if err != nil || res.IsError {
		return nil
	}
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return []byte(sb.String())
}

func (st *aliasStress) mcpWrite(name string) {
	_, _ = st.mcp.CallTool(context.Background(), &mcp.CallToolParams{Name: "write", Arguments: map[string]any{"path": name, "content": stressPayload}})
}
