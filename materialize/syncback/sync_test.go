//go:build linux

package syncback_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/internal/mattest"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// edits makes harmless changes of every kind in a checkout of the fill fixture,
// which a refused sync must not apply either.
func edits(t *testing.T, root string) {
	t.Helper()
	must(t, os.WriteFile(filepath.Join(root, "README"), []byte("edited"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "a-first.txt"), []byte("new"), 0o644))
	must(t, os.Remove(filepath.Join(root, "main-link")))
	must(t, os.Chmod(filepath.Join(root, "run.sh"), 0o700))
	must(t, os.Mkdir(filepath.Join(root, "newdir"), 0o750))
}

// The Dir's own policy decides at validation: a Dir built with policy.Defaults()
// refuses .git/hooks/x, and the whole sync is refused with nothing written,
// although [Options].Policy is not set.
func TestSyncBackDirPolicyRefusesAll(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		tr := checkout(t, s.D, materialize.Options{})
		edits(t, tr.Path())
		must(t, os.MkdirAll(filepath.Join(tr.Path(), ".git/hooks"), 0o755))
		must(t, os.WriteFile(filepath.Join(tr.Path(), ".git/hooks/x"), []byte("#!/bin/sh\n"), 0o755))
		before := snapshot(t, s.D)
		rep, err := syncback.Run(ctx, tr, syncback.Options{})
		if vfs.CodeOf(err) != vfs.CodePermission || !strings.Contains(err.Error(), ".git/hooks/x") {
			t.Fatalf("SyncBack: %v", err)
		}
		// .git (git is read-only to guests), .git/hooks and .git/hooks/x are
		// refused; every other change is listed as not applied.
		last := rep.Refused[len(rep.Refused)-1]
		if len(rep.Applied) != 0 || len(rep.Refused) < 2 || last.Change.Path != ".git/hooks/x" ||
			!strings.HasPrefix(last.Reason, "write: ") || len(rep.NotApplied) != len(rep.Refused)+5 {
			t.Fatalf("report %+v", rep)
		}
		sameMap(t, snapshot(t, s.D), before)
	}, dir.WithPolicy(policy.Defaults()))
}

// A rule of the Dir's own that the default patterns do not have: validation used
// to allow it and the sync stopped partway; now it is refused up front, for a
// Dir below the tree's root too (the Dir knows its own place: no PolicyRoot).
func TestSyncBackDirCustomRuleNoPartialApply(t *testing.T) {
	pol, err := policy.New(policy.Config{Rules: []policy.Rule{{
		Effect: policy.Deny, Ops: []policy.Op{policy.OpWrite}, Paths: []string{"proj/zz/**"}, Reason: "zz is frozen",
	}}})
	must(t, err)
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		proj, err := s.D.CreateDir(ctx, "proj")
		must(t, err)
		fill(t, proj)
		must(t, proj.MkdirAll(ctx, "zz"))
		tr := checkout(t, proj, materialize.Options{})
		edits(t, tr.Path())
		// Sorted last: every other change would be applied before it.
		must(t, os.WriteFile(filepath.Join(tr.Path(), "zz/out"), []byte("x"), 0o644))
		before := snapshot(t, proj)
		rep, err := syncback.Run(ctx, tr, syncback.Options{})
		if vfs.CodeOf(err) != vfs.CodePermission || len(rep.Applied) != 0 || len(rep.Refused) != 1 ||
			rep.Refused[0].Change.Path != "zz/out" || !strings.Contains(rep.Refused[0].Reason, "zz is frozen") {
			t.Fatalf("SyncBack: %v %+v", err, rep)
		}
		sameMap(t, snapshot(t, proj), before)
		// Without the refused change the rest goes through.
		must(t, os.Remove(filepath.Join(tr.Path(), "zz/out")))
		rep, err = syncback.Run(ctx, tr, syncback.Options{})
		if err != nil || len(rep.Applied) != 5 {
			t.Fatalf("SyncBack: %v %+v", err, rep)
		}
	}, dir.WithPolicy(pol))
}

// [Options].Policy is applied in addition to the Dir's own: it can refuse what
// the Dir allows, and cannot allow what the Dir refuses.
func TestSyncBackExtraPolicyAdds(t *testing.T) {
	t.Run("stricter", func(t *testing.T) {
		mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
			fill(t, s.D)
			tr := checkout(t, s.D, materialize.Options{})
			must(t, os.WriteFile(filepath.Join(tr.Path(), ".bashrc"), []byte("evil"), 0o644))
			before := snapshot(t, s.D)
			rep, err := syncback.Run(ctx, tr, syncback.Options{Policy: policy.Defaults()})
			if vfs.CodeOf(err) != vfs.CodePermission || len(rep.Refused) != 1 || !strings.Contains(rep.Refused[0].Reason, "persistence") {
				t.Fatalf("SyncBack: %v %+v", err, rep)
			}
			sameMap(t, snapshot(t, s.D), before)
			// nil: nothing beyond the Dir's own policy, which allows everything.
			if _, err := syncback.Run(ctx, tr, syncback.Options{}); err != nil {
				t.Fatal(err)
			}
			if b, _ := s.D.ReadFile(ctx, ".bashrc"); string(b) != "evil" {
				t.Fatalf(".bashrc = %q", b)
			}
		})
	})
	t.Run("cannot loosen", func(t *testing.T) {
		mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
			fill(t, s.D)
			tr := checkout(t, s.D, materialize.Options{})
			must(t, os.WriteFile(filepath.Join(tr.Path(), ".bashrc"), []byte("evil"), 0o644))
			before := snapshot(t, s.D)
			rep, err := syncback.Run(ctx, tr, syncback.Options{Policy: policy.AllowAll})
			if vfs.CodeOf(err) != vfs.CodePermission || len(rep.Refused) != 1 {
				t.Fatalf("SyncBack: %v %+v", err, rep)
			}
			sameMap(t, snapshot(t, s.D), before)
		}, dir.WithPolicy(policy.Defaults()))
	})
}

// An Ask rule of the Dir goes to the Dir's Asker during validation.
func TestSyncBackDirAsker(t *testing.T) {
	pol, err := policy.New(policy.Config{Rules: []policy.Rule{{
		Effect: policy.Ask, Ops: []policy.Op{policy.GroupWrite}, Paths: []string{"gen/**"},
	}}})
	must(t, err)
	for _, allow := range []bool{false, true} {
		var asked atomic.Int32
		asker := policy.AskFunc(func(context.Context, *policy.Request, policy.Decision) (bool, error) {
			asked.Add(1)
			return allow, nil
		})
		d, _ := dir.New(memory.New(), dir.WithPolicy(pol), dir.WithAsker(asker))
		fill(t, d)
		tr := checkout(t, d, materialize.Options{})
		must(t, os.WriteFile(filepath.Join(tr.Path(), "README"), []byte("edited"), 0o644))
		must(t, os.MkdirAll(filepath.Join(tr.Path(), "gen"), 0o755))
		must(t, os.WriteFile(filepath.Join(tr.Path(), "gen/out"), []byte("x"), 0o644))
		rep, err := syncback.Run(ctx, tr, syncback.Options{})
		b, _ := d.ReadFile(ctx, "README")
		if allow {
			// asked when checking and again when writing, for gen (mkdir) and
			// gen/out (write, then chtimes: it keeps the sandbox's time)
			if err != nil || len(rep.Applied) != 3 || string(b) != "edited" || asked.Load() != 6 {
				t.Fatalf("allowed: %v %+v README=%q asked %d", err, rep, b, asked.Load())
			}
			continue
		}
		if vfs.CodeOf(err) != vfs.CodePermission || len(rep.Refused) != 2 || string(b) != "hello\n" || asked.Load() != 2 {
			t.Fatalf("refused: %v %+v README=%q asked %d", err, rep, b, asked.Load())
		}
	}
}

// A read-only Dir, a locked one and a revoked one: nothing is written.
func TestSyncBackDirState(t *testing.T) {
	for _, c := range []struct {
		name string
		do   func(*dir.Control)
		code vfs.Code
	}{
		{"locked", func(c *dir.Control) { c.SetWritable(false) }, vfs.CodeReadOnly},
		{"revoked", func(c *dir.Control) { c.Revoke() }, vfs.CodeRevoked},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := memory.New()
			d, ctl := dir.New(b)
			fill(t, d)
			tr := checkout(t, d, materialize.Options{})
			edits(t, tr.Path())
			c.do(ctl)
			rep, err := syncback.Run(ctx, tr, syncback.Options{})
			if vfs.CodeOf(err) != c.code || (rep != nil && len(rep.Applied) != 0) {
				t.Fatalf("SyncBack: %v %+v", err, rep)
			}
			host, _ := dir.New(b)
			if got, _ := host.ReadFile(ctx, "README"); string(got) != "hello\n" {
				t.Fatalf("README = %q", got)
			}
		})
	}
}

// Keeping ours adds calls (clearing what the source put in the way); the Dir's
// policy is asked about them before anything is written.
func TestSyncBackKeepOursChecksTheWay(t *testing.T) {
	pol, err := policy.New(policy.Config{Rules: []policy.Rule{{
		Effect: policy.Deny, Ops: []policy.Op{policy.OpRemove}, Paths: []string{"both"}, Reason: "keep both",
	}}})
	must(t, err)
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		tr := checkout(t, s.D, materialize.Options{})
		must(t, os.WriteFile(filepath.Join(tr.Path(), "README"), []byte("edited"), 0o644))
		must(t, os.WriteFile(filepath.Join(tr.Path(), "both"), []byte("ours"), 0o644))
		// the host puts a directory where the sandbox adds a file
		must(t, s.D.MkdirAll(ctx, "both"))
		before := snapshot(t, s.D)
		rep, err := syncback.Run(ctx, tr, syncback.Options{Conflict: syncback.ConflictKeepOurs})
		if vfs.CodeOf(err) != vfs.CodePermission || len(rep.Applied) != 0 || len(rep.Refused) != 1 ||
			rep.Refused[0].Change.Path != "both" || !strings.HasPrefix(rep.Refused[0].Reason, "remove: ") {
			t.Fatalf("SyncBack: %v %+v", err, rep)
		}
		sameMap(t, snapshot(t, s.D), before)
	}, dir.WithPolicy(pol))
}

// refuseHook refuses writes to one path: a hook is past what Dir.Check covers.
type refuseHook struct{ path string }

func (h refuseHook) Before(_ context.Context, r *policy.Request) error {
	if r.Op == policy.OpWrite && r.Path == h.path {
		return vfs.NewError(vfs.CodePermission, "hook", vfs.MustParse(r.Path), "refused by the hook")
	}
	return nil
}

func (refuseHook) After(context.Context, *policy.Request, error) {}

// The remaining window: a hook refusing a call midway stops the sync, and the
// report lists exactly what was applied.
func TestSyncBackHookStopsMidway(t *testing.T) {
	b := memory.New()
	d, _ := dir.New(b, dir.WithHooks(refuseHook{"z-last"}))
	fill(t, d)
	tr := checkout(t, d, materialize.Options{})
	must(t, os.WriteFile(filepath.Join(tr.Path(), "a-first"), []byte("a"), 0o644))
	must(t, os.WriteFile(filepath.Join(tr.Path(), "z-last"), []byte("z"), 0o644))
	rep, err := syncback.Run(ctx, tr, syncback.Options{})
	if vfs.CodeOf(err) != vfs.CodePermission || len(rep.Refused) != 0 || len(rep.Applied) != 1 || rep.Applied[0].Path != "a-first" {
		t.Fatalf("SyncBack: %v %+v", err, rep)
	}
	if got, _ := d.ReadFile(ctx, "a-first"); string(got) != "a" {
		t.Fatalf("a-first = %q", got)
	}
	if ok, _ := d.Exists(ctx, "z-last"); ok {
		t.Fatal("z-last written")
	}
	// The applied change is recorded: only the refused one is still pending.
	cs, err := tr.Diff(ctx)
	must(t, err)
	if len(cs) != 1 || cs[0].Path != "z-last" {
		t.Fatalf("pending %+v", cs)
	}
}

// TestSyncBackKeepOursAddedMode: a file the sandbox adds with its own mode, where
// the host made a file of the same name meanwhile, lands under ConflictKeepOurs
// with the sandbox's bytes and mode, not the host file's mode (issue 11).
func TestSyncBackKeepOursAddedMode(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		tr := checkout(t, s.D, materialize.Options{})
		must(t, os.WriteFile(filepath.Join(tr.Path(), "run.sh"), []byte("#!/bin/sh\necho ours\n"), 0o755))
		must(t, os.Chmod(filepath.Join(tr.Path(), "run.sh"), 0o755))
		must(t, s.D.WriteFile(ctx, "run.sh", []byte("theirs\n"), 0o600))
		if _, err := syncback.Run(ctx, tr, syncback.Options{Conflict: syncback.ConflictKeepOurs}); err != nil {
			t.Fatalf("SyncBack: %v", err)
		}
		got, err := s.D.ReadFile(ctx, "run.sh")
		must(t, err)
		fi, err := s.D.Stat(ctx, "run.sh")
		must(t, err)
		if string(got) != "#!/bin/sh\necho ours\n" || fi.Mode().Perm() != 0o755 {
			t.Errorf("run.sh = %q, mode %v; want the sandbox's bytes and 0755", got, fi.Mode())
		}
	})
}

// A directory whose entries the sandbox created and removed again (its listing
// the same, its time changed) gets the sandbox's time in the source, as a
// plain run would have left it (go test's result cache hashes it); one the
// source changed since the checkout keeps the source's; a checkout's root
// starts with the source root's time.
func TestSyncBackDirectoryTimes(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		must(t, s.D.MkdirAll(ctx, "other"))
		old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
		for _, p := range []string{".", "src", "src/sub", "other"} {
			must(t, s.D.Chtimes(ctx, p, old, old))
		}
		tr := checkout(t, s.D, materialize.Options{})
		if fi, err := os.Stat(tr.Path()); err != nil || !fi.ModTime().Equal(old) {
			t.Fatalf("checkout root time %v, want the source's %v (%v)", fi.ModTime(), old, err)
		}
		for _, p := range []string{"", "src/sub", "other"} {
			scratch := filepath.Join(tr.Path(), p, "scratch")
			must(t, os.WriteFile(scratch, []byte("x"), 0o644))
			must(t, os.Remove(scratch))
		}
		// The source changes other meanwhile: its own time stays.
		must(t, s.D.WriteFile(ctx, "other/new", []byte("y"), 0o644))
		hostOther, err := s.D.Lstat(ctx, "other")
		must(t, err)
		rep, err := syncback.Run(ctx, tr, syncback.Options{})
		if err != nil || len(rep.Applied) != 0 {
			t.Fatalf("SyncBack: %v %+v", err, rep)
		}
		for _, c := range []struct {
			p    string
			want time.Time
		}{{".", stamp(t, tr.Path())}, {"src/sub", stamp(t, filepath.Join(tr.Path(), "src/sub"))}, {"src", old}, {"other", hostOther.ModTime()}} {
			fi, err := s.D.Lstat(ctx, c.p)
			must(t, err)
			if !fi.ModTime().Equal(c.want) {
				t.Errorf("%s: source time %v, want %v", c.p, fi.ModTime(), c.want)
			}
		}
		if got := stamp(t, tr.Path()); got.Equal(old) {
			t.Errorf("the checkout's root time was not changed by the test: %v", got)
		}
	})
}

func stamp(t *testing.T, p string) time.Time {
	t.Helper()
	fi, err := os.Stat(p)
	must(t, err)
	return fi.ModTime()
}
