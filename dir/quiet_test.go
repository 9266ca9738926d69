package dir_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// TestQuietMatchesFull: a Dir whose only observer is a policy engine runs its
// straight calls on the quiet path (runQuiet), and a Dir with the same engine
// and an audit sink on the full one (runFull); both must answer every call
// the same (result and error, code and text), on the guest's paths, paths
// through symlinks into secret and persistence places, refused and asked
// rules, writes through a read-only view, and beneath a Sub.
func TestQuietMatchesFull(t *testing.T) {
	eng, err := policy.New(policy.Config{Rules: []policy.Rule{
		{Effect: policy.Ask, Ops: []policy.Op{policy.GroupWrite}, Paths: []string{"ask/**"}},
		{Effect: policy.Deny, Ops: []policy.Op{policy.OpStat}, Paths: []string{"**/hidden", "a/b/ok2"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	setup := func() vfs.Backend {
		m := memory.New()
		host, _ := dir.New(m)
		must(t, host.MkdirAll(bg, "a/b/.ssh"))
		must(t, host.MkdirAll(bg, "ask"))
		must(t, host.MkdirAll(bg, ".git/hooks"))
		must(t, host.WriteFile(bg, "a/b/.ssh/id", []byte("key"), 0o600))
		must(t, host.WriteFile(bg, "a/b/ok", []byte("ok"), 0o644))
		must(t, host.WriteFile(bg, "a/b/ok2", []byte("ok"), 0o644))
		must(t, host.WriteFile(bg, "a/hidden", []byte("h"), 0o644))
		must(t, host.WriteFile(bg, "ask/f", []byte("f"), 0o644))
		must(t, host.Symlink(bg, ".ssh", "a/b/k"))
		must(t, host.Symlink(bg, "a/b/.ssh/id", "x"))
		must(t, host.Symlink(bg, ".git/hooks", "h"))
		must(t, host.Symlink(bg, "a/b/ok", "lok"))
		must(t, host.Symlink(bg, "ask", "la"))
		return m
	}
	events := 0
	sink := audit.Func(func(context.Context, audit.Event) { events++ })
	quiet, _ := dir.New(setup(), dir.WithPolicy(eng))
	full, _ := dir.New(setup(), dir.WithPolicy(eng), dir.WithAudit(sink))
	paths := []string{"", ".", "/", "a/b/ok", "lok", "a/b/.ssh/id", "a/b/k/id", "x", "a/b/k", "a/../x",
		"h/pre-commit", ".git/hooks/pre-commit", "a/hidden", "a/b/hidden", "ask/f", "la/f", "la/g", "nope/x",
		"a/b/ok/", "a/b/", "..", "a/b/ok/x", "a\x00b"}
	sameAnswers(t, "quiet", quiet, "full", full, paths)
	// The same beneath a pinned Sub, whose calls decide on paths from the
	// tree's root that the quiet path does not build (Engine.AllowsUnder).
	subQ, err := quiet.Sub(bg, "a")
	must(t, err)
	subF, err := full.Sub(bg, "a")
	must(t, err)
	sameAnswers(t, "quiet Sub", subQ, "full Sub", subF, append(paths, "b/ok", "b/.ssh/id", "b/k/id", "b/k", "hidden", "b/hidden",
		"b/.ssh", "b/../b/ok", "b/new", "b/ok2"))
	if events == 0 {
		t.Fatal("the audited Dir recorded nothing: it did not take the full path")
	}
}

// TestLinkFreeMatchesLookup: over a memory store that has never held a
// symlink, a Dir with a policy takes each path as its own canonical path
// without a lookup (memory.FS.LinkFree); it must answer every call as a Dir
// over the same tree behind a wrapper that hides LinkFree (and the other
// optional interfaces), which resolves each path through the backend.
func TestLinkFreeMatchesLookup(t *testing.T) {
	setup := func() *memory.FS {
		m := memory.New()
		host, _ := dir.New(m)
		must(t, host.MkdirAll(bg, "a/b/.ssh"))
		must(t, host.MkdirAll(bg, ".git/hooks"))
		must(t, host.WriteFile(bg, "a/b/.ssh/id", []byte("key"), 0o600))
		must(t, host.WriteFile(bg, "a/b/ok", []byte("ok"), 0o644))
		must(t, host.WriteFile(bg, ".git/hooks/pre-commit", []byte("x"), 0o755))
		return m
	}
	m := setup()
	if !m.LinkFree() {
		t.Fatal("a store with no symlink says it holds one")
	}
	free, _ := dir.New(m, dir.WithPolicy(policy.Defaults()))
	looked, _ := dir.New(struct{ vfs.Backend }{setup()}, dir.WithPolicy(policy.Defaults()))
	paths := []string{"", ".", "a/b/ok", "a/b/.ssh/id", "a/b/.ssh", ".git/hooks/pre-commit", ".git/hooks/new",
		"nope/x", "nope/y/z", "a/b/ok/", "a/b/", "a/b/ok/x", "a/b/ok/x/y", "a/../a/b/ok", ".."}
	sameAnswers(t, "link-free", free, "looked up", looked, paths) // Symlink, the last call, ends it
	if m.LinkFree() {
		t.Fatal("a store holding a symlink says it holds none")
	}
}

// sameAnswers fails t where Dirs a and b (named na and nb) answer any call
// on any of paths differently (result, code and text). The calls may write:
// a and b must start from identical trees.
func sameAnswers(t *testing.T, na string, a *dir.Dir, nb string, b *dir.Dir, paths []string) {
	t.Helper()
	calls := []struct {
		name string
		fn   func(d *dir.Dir, p string) string
	}{
		{"Stat", func(d *dir.Dir, p string) string { fi, err := d.Stat(bg, p); return infoString(fi, err) }},
		{"Lstat", func(d *dir.Dir, p string) string { fi, err := d.Lstat(bg, p); return infoString(fi, err) }},
		{"Exists", func(d *dir.Dir, p string) string { ok, err := d.Exists(bg, p); return fmt.Sprint(ok, errString(err)) }},
		{"ReadFile", func(d *dir.Dir, p string) string {
			b, err := d.ReadFile(bg, p)
			return fmt.Sprintf("%q %s", b, errString(err))
		}},
		{"ReadDir", func(d *dir.Dir, p string) string {
			ents, err := d.ReadDir(bg, p)
			s := errString(err)
			for _, e := range ents {
				_, ierr := e.Info()
				s += " " + e.Name() + ":" + errString(ierr)
			}
			return s
		}},
		{"List", func(d *dir.Dir, p string) string { n, err := d.List(bg, p); return fmt.Sprint(n, errString(err)) }},
		{"Readlink", func(d *dir.Dir, p string) string { s, err := d.Readlink(bg, p); return s + errString(err) }},
		{"Open", func(d *dir.Dir, p string) string {
			var s string
			for _, flag := range []int{os.O_RDONLY, os.O_RDWR, os.O_WRONLY | os.O_APPEND, os.O_WRONLY | os.O_CREATE, os.O_WRONLY | os.O_CREATE | os.O_EXCL} {
				h, err := d.Open(bg, p, flag, 0o644)
				s += errString(err) + ";"
				if err == nil {
					must(t, h.Close())
				}
			}
			return s
		}},
		{"WriteFile", func(d *dir.Dir, p string) string { return errString(d.WriteFile(bg, p, []byte("w"), 0o644)) }},
		{"Chmod", func(d *dir.Dir, p string) string { return errString(d.Chmod(bg, p, 0o640)) }},
		{"Chtimes", func(d *dir.Dir, p string) string {
			return errString(d.Chtimes(bg, p, time.Unix(1, 0), time.Unix(2, 0)))
		}},
		{"Link", func(d *dir.Dir, p string) string { return errString(d.Link(bg, p, p+"-n")) }},
		{"CreateDir", func(d *dir.Dir, p string) string { _, err := d.CreateDir(bg, p+"-d"); return errString(err) }},
		{"Sub", func(d *dir.Dir, p string) string {
			s, err := d.Sub(bg, p)
			if err != nil {
				return errString(err)
			}
			fi, err := s.Stat(bg, "id")
			return infoString(fi, err)
		}},
		{"ReadOnly", func(d *dir.Dir, p string) string { return errString(d.ReadOnly().WriteFile(bg, p, nil, 0o644)) }},
		{"Remove", func(d *dir.Dir, p string) string { return errString(d.Remove(bg, p)) }},
		// Last: the first symlink ends a memory store's link-free state.
		{"Symlink", func(d *dir.Dir, p string) string { return errString(d.Symlink(bg, "a/b/ok", p+"-l")) }},
	}
	for _, c := range calls {
		for _, p := range paths {
			if got, want := c.fn(a, p), c.fn(b, p); got != want {
				t.Errorf("%s %q: %s %s, %s %s", c.name, p, na, got, nb, want)
			}
		}
	}
}

func infoString(fi fs.FileInfo, err error) string {
	if err != nil {
		return errString(err)
	}
	return fmt.Sprint(fi.Name(), fi.Size(), fi.Mode())
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return string(vfs.CodeOf(err)) + ": " + err.Error()
}

// TestPolicySubStatAllocs: beneath a pinned Sub of a memory tree, a Stat with
// the default policy allocates no more than the same Stat without a policy
// (nothing, but for the status of "." the memory backend builds): the Sub
// locates itself from what the backend keeps, and the policy decides without
// the path from the tree's root being built (Engine.AllowsUnder).
func TestPolicySubStatAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	counts := func(opts ...dir.Option) []float64 {
		d, _ := dir.New(memory.New(), opts...)
		must(t, d.MkdirAll(bg, "w/src/pkg"))
		must(t, d.WriteFile(bg, "w/src/pkg/f.go", []byte("package p"), 0o644))
		sub, err := d.Sub(bg, "w/src")
		must(t, err)
		var out []float64
		for _, p := range []string{"pkg/f.go", "pkg", "."} {
			out = append(out, testing.AllocsPerRun(50, func() {
				if _, err := sub.Stat(bg, p); err != nil {
					t.Fatal(err)
				}
			}))
		}
		return out
	}
	without, with := counts(), counts(dir.WithPolicy(policy.Defaults()))
	for i, p := range []string{"pkg/f.go", "pkg", "."} {
		if with[i] > without[i] || (p != "." && with[i] != 0) {
			t.Errorf("Stat %s beneath a Sub: %v allocations with the default policy, %v without", p, with[i], without[i])
		}
	}
}
