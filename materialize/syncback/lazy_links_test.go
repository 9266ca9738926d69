//go:build linux

package syncback_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/overlay"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// TestLazyLeavingLinkRefused: in a lazy run's layer (an Overlay over a
// physical source, its upper a Tree as run.UpperTree makes it) the guest
// makes links whose targets leave the tree, which the layer now holds; the
// sync-back refuses each new one with path_outside_sandbox and its reason,
// and, with RejectApplyRest, applies the run's other changes.
func TestLazyLeavingLinkRefused(t *testing.T) {
	host := t.TempDir()
	must(t, os.WriteFile(filepath.Join(host, "a.txt"), []byte("a"), 0o644))
	pb, err := physical.New(host)
	must(t, err)
	t.Cleanup(func() { pb.Close() })
	src, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
	upper := filepath.Join(t.TempDir(), "upper")
	must(t, os.Mkdir(upper, 0o700))
	ov, err := overlay.NewOverlay(src.Backend(), upper)
	must(t, err)
	t.Cleanup(func() { ov.Close() })
	view, _ := dir.New(ov, dir.WithPolicy(policy.Defaults()))

	leaving := map[string]string{"py": "/usr/bin/python3", "sub/up": "../../shared/x"}
	must(t, view.MkdirAll(ctx, "sub"))
	for name, target := range leaving {
		must(t, view.Symlink(ctx, target, name))
	}
	must(t, view.Symlink(ctx, "a.txt", "in"))
	must(t, view.WriteFile(ctx, "a.txt", []byte("b"), 0o644))
	must(t, view.WriteFile(ctx, "new.txt", []byte("n"), 0o644))

	entries := map[string]materialize.Entry{}
	for p, b := range ov.Bases() {
		entries[p] = materialize.Entry{Type: b.Type, Mode: b.Mode, Size: b.Size, ModTime: b.ModTime, Digest: b.Digest, Target: b.Target}
	}
	tr, err := materialize.OpenUpper(ctx, src, upper, entries)
	must(t, err)
	t.Cleanup(func() { tr.Close() })
	rep, err := syncback.Run(ctx, tr, syncback.Options{OnReject: syncback.RejectApplyRest})
	if vfs.CodeOf(err) != vfs.CodeOutside {
		t.Errorf("Run: %v; want path_outside_sandbox", err)
	}
	wantRefusedLinks(t, rep, leaving)
	for name := range leaving {
		if _, err := os.Lstat(filepath.Join(host, name)); !os.IsNotExist(err) {
			t.Errorf("%s reached the source (%v)", name, err)
		}
	}
	for name, want := range map[string]string{"a.txt": "b", "new.txt": "n", "in": "b"} {
		if b, err := os.ReadFile(filepath.Join(host, name)); err != nil || string(b) != want {
			t.Errorf("source %s = %q, %v; want %q", name, b, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(host, "sub")); err != nil || !fi.IsDir() {
		t.Errorf("source sub: %v, %v; want the directory", fi, err)
	}
}

// wantRefusedLinks fails t unless rep refused exactly the links in leaving
// (path to target), each for its target.
func wantRefusedLinks(t *testing.T, rep *syncback.Report, leaving map[string]string) {
	t.Helper()
	var refused, want []string
	for _, r := range rep.Refused {
		refused = append(refused, r.Change.Path)
		if target, ok := leaving[r.Change.Path]; !ok || !strings.Contains(r.Reason, "absolute or leaves the tree") || !strings.Contains(r.Reason, target) {
			t.Errorf("refused %s: %q", r.Change.Path, r.Reason)
		}
	}
	for p := range leaving {
		want = append(want, p)
	}
	slices.Sort(refused)
	slices.Sort(want)
	if !slices.Equal(refused, want) {
		t.Errorf("refused %v; want %v", refused, want)
	}
}
