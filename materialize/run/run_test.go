//go:build linux

package run_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/run"
	"github.com/capfs/capfs/materialize/sandbox"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/policy"
)

// sandboxRunner is bubblewrap, or the test is skipped.
func sandboxRunner(t *testing.T) *sandbox.Runner {
	t.Helper()
	r := sandbox.Default()
	if err := r.Probe(context.Background()); err != nil {
		t.Skipf("no working sandbox here (bubblewrap; make sysdeps installs it): %v", err)
	}
	return r
}

// modes are the two ways a writable mount reaches the sandbox.
var modes = []struct {
	name string
	lazy bool
}{{"checkout", false}, {"lazy", true}}

// memDir is a Dir over a new memory backend holding files, with the default
// policy and audit into ring.
func memDir(t *testing.T, files map[string]string, ring *audit.Ring) *dir.Dir {
	t.Helper()
	ctx := context.Background()
	b := memory.New()
	seed, _ := dir.New(b)
	for name, body := range files {
		if err := seed.WriteFile(ctx, name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := dir.New(b, dir.WithPolicy(policy.Defaults()), dir.WithAudit(ring))
	return d
}

// TestRunSyncsWritableRefusesReadOnly: in each mode, a writable mount's new
// and changed files come back through its Dir (audited with the run's tag
// and wrappers), a write the policy refuses does not, and a read-only mount
// refuses every write inside and is never synced.
func TestRunSyncsWritableRefusesReadOnly(t *testing.T) {
	runner := sandboxRunner(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			if m.lazy {
				if err := run.LazyAvailable(); err != nil {
					t.Skipf("FUSE is not usable here: %v", err)
				}
			}
			t.Setenv("CAPFS_TMPDIR", t.TempDir())
			t.Setenv(syncback.EnvStateDir, t.TempDir())
			ctx := context.Background()
			ring := audit.NewRing(1 << 14)
			work := memDir(t, map[string]string{"a.txt": "old\n"}, ring)
			ref := memDir(t, map[string]string{"r.txt": "ref\n"}, ring)
			wm := run.Mount{Name: "work", Dir: work, Target: "/w", Writable: true, Work: "project/w",
				Sync: syncback.Options{OnReject: syncback.RejectApplyRest, Label: "test:w"}}
			if m.lazy {
				// The view refuses .bashrc at once, as the Dir would at sync-back.
				wm.Lazy = &run.LazyOptions{View: run.ViewPolicy{Inner: policy.Defaults()}}
			}
			var stdout, stderr bytes.Buffer
			script := `cat /r/r.txt; echo new > /w/a.txt; echo made > /w/b.txt; echo evil > /w/.bashrc 2>/dev/null; ` +
				`if echo x > /r/r.txt 2>/dev/null || echo x > /r/s.txt 2>/dev/null; then echo WROTE-RO; fi; true`
			spec := &run.Spec{
				Mounts: []run.Mount{wm, {Name: "ref", Dir: ref, Target: "/r"}},
				Launch: sandbox.Launch{Path: "sh", Args: []string{"-c", script}, Dir: "/w", Stdout: &stdout, Stderr: &stderr},
				Runner: runner, Tag: "run:test",
			}
			rep, err := run.Run(ctx, spec)
			var me *run.MountError
			switch {
			case m.lazy && err != nil:
				t.Fatalf("Run: %v\nstderr: %s", err, stderr.String())
			case !m.lazy && (!errors.As(err, &me) || me.Op != "sync-back" || !errors.Is(err, fs.ErrPermission)):
				t.Fatalf("Run: %v, want the sync-back of work refusing .bashrc\nstderr: %s", err, stderr.String())
			}
			if got := stdout.String(); got != "ref\n" {
				t.Fatalf("the sandbox printed %q (stderr %s)", got, stderr.String())
			}
			checkSynced(t, work, ref)
			if len(rep.Mounts) != 2 || !rep.Mounts[0].Synced || rep.Mounts[1].Synced || rep.Mounts[0].Lazy != m.lazy {
				t.Fatalf("report mounts %+v", rep.Mounts)
			}
			// The refused .bashrc stays in the kept checkout; a lazy run
			// refused it at once, so nothing is kept.
			if kept := rep.Mounts[0].Kept; (kept != "") != !m.lazy || rep.Mounts[1].Kept != "" {
				t.Errorf("kept %q and %q", kept, rep.Mounts[1].Kept)
			} else if kept != "" {
				checkRecorded(t, rep.Mounts[0], spec.Launch.Args)
				os.RemoveAll(kept)
			}
			if !taggedWrite(ring, "b.txt", "run:test wrappers=bubblewrap") {
				t.Error("no audit event of b.txt's sync-back tagged with the run and its wrappers")
			}
		})
	}
}

// checkRecorded checks that the kept checkout of m has a record for a later
// sync-back, naming its work, label and command.
func checkRecorded(t *testing.T, m run.MountReport, args []string) {
	t.Helper()
	recs, _, err := run.ReadKept()
	if err != nil || m.KeptID == "" || m.KeptID != run.KeptID(m.Kept) {
		t.Fatalf("kept %q with id %q; records %v, %v", m.Kept, m.KeptID, recs, err)
	}
	for _, rec := range recs {
		if rec.ID == m.KeptID {
			if rec.Work != "project/w" || rec.Label != "test:w" || len(rec.Command) != 3 || rec.Command[2] != args[1] || len(rec.Tree) == 0 {
				t.Errorf("record %+v", rec)
			}
			return
		}
	}
	t.Errorf("no record of kept checkout %s among %v", m.KeptID, recs)
}

// checkSynced checks the run's outcome in the sources: work has the new and
// changed files but not .bashrc, ref is as it was.
func checkSynced(t *testing.T, work, ref *dir.Dir) {
	t.Helper()
	ctx := context.Background()
	for name, want := range map[string]string{"a.txt": "new\n", "b.txt": "made\n"} {
		if b, err := work.ReadFile(ctx, name); err != nil || string(b) != want {
			t.Errorf("%s after the run: %q, %v; want %q", name, b, err, want)
		}
	}
	if ok, _ := work.Exists(ctx, ".bashrc"); ok {
		t.Error("the policy's refusal of .bashrc was synced back")
	}
	if b, _ := ref.ReadFile(ctx, "r.txt"); string(b) != "ref\n" {
		t.Errorf("the read-only mount changed: %q", b)
	}
	if ok, _ := ref.Exists(ctx, "s.txt"); ok {
		t.Error("the read-only mount was written")
	}
}

// taggedWrite reports whether ring holds an event on path whose tag holds tag.
func taggedWrite(ring *audit.Ring, path, tag string) bool {
	for _, e := range ring.Events() {
		if e.Path == path && strings.Contains(e.Tag, tag) {
			return true
		}
	}
	return false
}

// TestStartRefusesNestedTargets: two mounts that nest, or a target that is
// not a clean absolute path below /, are refused before anything is made.
func TestStartRefusesNestedTargets(t *testing.T) {
	d := memDir(t, nil, audit.NewRing(16))
	for _, targets := range [][]string{{"/a", "/a/b"}, {"/a/b", "/a"}, {"/a", "/a"}, {"relative"}, {"/"}, {"/a/../b"}} {
		var ms []run.Mount
		for _, tg := range targets {
			ms = append(ms, run.Mount{Name: tg, Dir: d, Target: tg})
		}
		if s, err := run.Start(context.Background(), &run.Spec{Mounts: ms}); !errors.Is(err, fs.ErrInvalid) {
			if s != nil {
				s.Close()
			}
			t.Errorf("Start(%v) = %v, want invalid", targets, err)
		}
	}
	if run.Nested("/a", "/ab") || !run.Nested("/a", "/a/b") {
		t.Error("Nested confuses a prefix of a name with a parent")
	}
}

// TestStartMountErrorStops: a checkout that fails names its mount and index
// in a MountError, calls Ready for the mounts before it only, and leaves no
// checkout behind.
func TestStartMountErrorStops(t *testing.T) {
	base := t.TempDir()
	d := memDir(t, map[string]string{"f": "x"}, audit.NewRing(16))
	var ready []int
	spec := &run.Spec{
		Mounts: []run.Mount{
			{Name: "good", Dir: d, Target: "/g", Checkout: materialize.Options{Base: base}},
			{Name: "bad", Dir: d, Target: "/b", Checkout: materialize.Options{Base: base + "/missing/dir"}},
		},
		Ready: func(i int, v *run.View) error {
			ready = append(ready, i)
			if v.Tree == nil || v.Bind().Target != "/g" || v.Bind().Writable {
				t.Errorf("view %d: %+v", i, v.Bind())
			}
			return nil
		},
	}
	_, err := run.Start(context.Background(), spec)
	var me *run.MountError
	if !errors.As(err, &me) || me.Index != 1 || me.Op != "checkout" || !strings.HasPrefix(err.Error(), "checkout of bad: ") {
		t.Fatalf("Start: %v, want the checkout of mount 1 (bad) failing", err)
	}
	if len(ready) != 1 {
		t.Errorf("Ready called for %v, want [0]", ready)
	}
	if left, _ := dirNames(base); len(left) != 0 {
		t.Errorf("left behind in the base: %v", left)
	}
}

// dirNames lists the names in host directory p.
func dirNames(p string) ([]string, error) {
	ents, err := os.ReadDir(p)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, err
}

// TestSessionSteps: step by step, as a caller with a review of its own runs
// it, a lazy mount's changes are a Tree after Finish (the source untouched
// until the caller syncs), and Close leaves nothing in the base.
func TestSessionSteps(t *testing.T) {
	runner := sandboxRunner(t)
	if err := run.LazyAvailable(); err != nil {
		t.Skipf("FUSE is not usable here: %v", err)
	}
	base := t.TempDir()
	t.Setenv("CAPFS_TMPDIR", base)
	t.Setenv(syncback.EnvStateDir, t.TempDir())
	ctx := context.Background()
	work := memDir(t, map[string]string{"a.txt": "old\n"}, audit.NewRing(1<<10))
	var readied []bool
	s, err := run.Start(ctx, &run.Spec{
		Mounts: []run.Mount{{Name: "work", Dir: work, Target: "/w", Writable: true, Lazy: &run.LazyOptions{}}},
		Ready:  func(i int, v *run.View) error { readied = append(readied, v.Lazy != nil && v.Tree == nil); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(readied) != 1 || !readied[0] || len(s.Binds()) != 1 || s.Binds()[0].Target != "/w" || !s.Binds()[0].Writable {
		t.Fatalf("ready %v, binds %+v", readied, s.Binds())
	}
	res, err := s.Launch(ctx, runner, &sandbox.Launch{Path: "sh", Args: []string{"-c", "echo new > /w/a.txt"}, Dir: "/w"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Launch: %+v, %v", res, err)
	}
	if err := s.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	tr := s.Views()[0].Tree
	if tr == nil {
		t.Fatal("no Tree of the lazy mount's changes after Finish")
	}
	changes, err := tr.Diff(ctx)
	if err != nil || len(changes) != 1 || changes[0].Path != "a.txt" || changes[0].Kind != materialize.Modified {
		t.Fatalf("changes %+v, %v; want a.txt modified", changes, err)
	}
	if b, _ := work.ReadFile(ctx, "a.txt"); string(b) != "old\n" {
		t.Errorf("the source changed before any sync-back: %q", b)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := dirNames(base); len(left) != 0 {
		t.Errorf("left behind in the base: %v", left)
	}
}
