//go:build linux

package materialize_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/internal/mattest"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/vfs"
)

// TestReopenSyncsLater: a kept checkout's state, reopened (as by another
// process) over the same source, syncs back what the first process left, and
// Close then removes the checkout.
func TestReopenSyncsLater(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		tr := checkout(t, s.D, materialize.Options{})
		must(t, os.WriteFile(filepath.Join(tr.Path(), "README"), []byte("changed\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(tr.Path(), "new.txt"), []byte("new\n"), 0o644))
		must(t, os.Remove(filepath.Join(tr.Path(), "run.sh")))
		tr.Keep()
		state, err := tr.MarshalState()
		must(t, err)
		must(t, tr.Close())
		if materialize.StatePath(state) != tr.Path() {
			t.Fatalf("StatePath = %q, want %q", materialize.StatePath(state), tr.Path())
		}

		re, err := materialize.Reopen(ctx, s.D, state)
		must(t, err)
		cs, err := re.Diff(ctx)
		must(t, err)
		got := kinds(cs)
		want := map[string]materialize.ChangeKind{"README": materialize.Modified, "new.txt": materialize.Added, "run.sh": materialize.Deleted}
		if len(got) != len(want) {
			t.Fatalf("Diff after Reopen = %v, want %v", got, want)
		}
		for p, k := range want {
			if got[p] != k {
				t.Errorf("Diff after Reopen: %s = %s, want %s", p, got[p], k)
			}
		}
		rep, err := syncback.Run(ctx, re, syncback.Options{})
		must(t, err)
		if len(rep.Applied) != 3 {
			t.Errorf("applied %v", rep.Applied)
		}
		if b, _ := s.D.ReadFile(ctx, "README"); string(b) != "changed\n" {
			t.Errorf("README = %q", b)
		}
		must(t, re.Close())
		if _, err := os.Lstat(tr.Path()); !os.IsNotExist(err) {
			t.Errorf("the checkout outlived a complete sync: %v", err)
		}
	})
}

// TestReopenRefusesSubstitute: a directory put in a kept checkout's place is
// not taken for it; nor is bad state.
func TestReopenRefusesSubstitute(t *testing.T) {
	d, _ := dir.New(memory.New())
	fill(t, d)
	tr := checkout(t, d, materialize.Options{})
	tr.Keep()
	state, err := tr.MarshalState()
	must(t, err)
	p := tr.Path()
	must(t, tr.Close())
	must(t, os.RemoveAll(p))
	if _, err := materialize.Reopen(ctx, d, state); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Errorf("Reopen of a removed checkout: %v, want not_found", err)
	}
	must(t, os.Mkdir(p, 0o700))
	if _, err := materialize.Reopen(ctx, d, state); vfs.CodeOf(err) != vfs.CodeInvalidPath {
		t.Errorf("Reopen of a substitute directory: %v, want invalid_path", err)
	}
	if err := materialize.Discard(state); err == nil {
		t.Errorf("Discard removed a substitute directory")
	}
	if _, err := os.Stat(p); err != nil {
		t.Errorf("the substitute is gone: %v", err)
	}
	if _, err := materialize.Reopen(ctx, d, []byte(`{"version":9}`)); vfs.CodeOf(err) != vfs.CodeInvalidPath {
		t.Errorf("Reopen of bad state: %v", err)
	}
	if _, err := materialize.Reopen(ctx, d, []byte(`not json`)); vfs.CodeOf(err) != vfs.CodeInvalidPath {
		t.Errorf("Reopen of bad state: %v", err)
	}
}

// TestDiscard removes a kept checkout.
func TestDiscard(t *testing.T) {
	d, _ := dir.New(memory.New())
	fill(t, d)
	tr := checkout(t, d, materialize.Options{})
	tr.Keep()
	state, err := tr.MarshalState()
	must(t, err)
	must(t, tr.Close())
	must(t, materialize.Discard(state))
	if _, err := os.Lstat(tr.Path()); !os.IsNotExist(err) {
		t.Errorf("Discard left the checkout: %v", err)
	}
	must(t, materialize.Discard(state)) // gone already: nothing to do
}

// TestExport writes a checkout's changes into an empty Dir: files, directories,
// in-tree symlinks; deletions are listed; escaping links and special files are
// refused.
func TestExport(t *testing.T) {
	src, _ := dir.New(memory.New())
	fill(t, src)
	tr := checkout(t, src, materialize.Options{})
	root := tr.Path()
	must(t, os.MkdirAll(filepath.Join(root, "out/deep"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "out/deep/a.o"), []byte("obj"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "README"), []byte("changed\n"), 0o644))
	must(t, os.Symlink("deep/a.o", filepath.Join(root, "out/link")))
	must(t, os.Symlink("../../etc/passwd", filepath.Join(root, "out/evil")))
	must(t, os.Remove(filepath.Join(root, "run.sh")))
	dstB := memory.New()
	dst, _ := dir.New(dstB)
	rep, err := tr.Export(ctx, dst, materialize.Limits{})
	must(t, err)
	if b, _ := dst.ReadFile(ctx, "out/deep/a.o"); string(b) != "obj" {
		t.Errorf("out/deep/a.o = %q", b)
	}
	if fi, err := dst.Lstat(ctx, "out/deep/a.o"); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("out/deep/a.o mode: %v %v", fi, err)
	}
	if b, _ := dst.ReadFile(ctx, "README"); string(b) != "changed\n" {
		t.Errorf("README = %q", b)
	}
	if l, err := dst.Readlink(ctx, "out/link"); err != nil || l != "deep/a.o" {
		t.Errorf("out/link = %q, %v", l, err)
	}
	if _, err := dst.Lstat(ctx, "out/evil"); err == nil {
		t.Errorf("an escaping symlink was exported")
	}
	if _, err := dst.Lstat(ctx, "src/main.go"); err == nil {
		t.Errorf("an unchanged file was exported")
	}
	if len(rep.Deleted) != 1 || rep.Deleted[0].Path != "run.sh" {
		t.Errorf("Deleted = %v", rep.Deleted)
	}
	if len(rep.Refused) != 1 || rep.Refused[0].Change.Path != "out/evil" || rep.Refused[0].Code != vfs.CodeOutside {
		t.Errorf("Refused = %v", rep.Refused)
	}
	// The limits hold: one file at most.
	dst2, _ := dir.New(memory.New())
	if _, err := tr.Export(ctx, dst2, materialize.Limits{MaxFiles: 1}); vfs.CodeOf(err) != vfs.CodeQuota {
		t.Errorf("Export past MaxFiles: %v", err)
	}
}
