//go:build linux

package physical

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// TestVerbatimLinks: under WithVerbatimLinks a target that leaves the root
// (absolute, or climbing above it) is stored, listed, described and read back
// as written, and every lookup through it still fails with
// path_outside_sandbox, reaching neither the host's file nor the re-rooted
// decoy inside the root; with openat2 and the portable resolver.
func TestVerbatimLinks(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		ctx := context.Background()
		h := newHost(t)
		decoy := strings.TrimPrefix(h.outside, "/")
		if err := os.MkdirAll(h.in(decoy), 0o755); err != nil {
			t.Fatal(err)
		}
		h.writeHost(h.in(decoy+"/secret"), "DECOY")
		if err := os.Mkdir(h.in("d"), 0o755); err != nil {
			t.Fatal(err)
		}
		f := newAt(t, h.root, append(opts, WithVerbatimLinks())...)
		before := h.state()
		links := map[string]string{
			"abs":      h.outside,
			"absf":     h.outside + "/secret",
			"up":       "../outside",
			"d/up":     "../../outside/secret",
			"dangle":   h.outside + "/new",
			"d/inroot": h.root + "/d", // a host spelling of the root: data too
		}
		for name, target := range links {
			if err := f.Symlink(ctx, target, P(name)); err != nil {
				t.Fatalf("Symlink(%q, %s): %v", target, name, err)
			}
		}
		for name, target := range links {
			wantVerbatim(t, f, h, name, target)
		}
		wantListed(t, f, "abs", "absf", "up", "dangle")
		for _, p := range []string{"abs/secret", "absf", "up/secret", "d/up", "d/inroot/up"} {
			wantNotFollowed(t, f, p)
		}
		_, err := f.OpenFile(ctx, P("dangle"), os.O_WRONLY|os.O_CREATE, 0o644)
		wantCode(t, err, vfs.CodeOutside, "OpenFile(dangle, O_CREATE)")
		if _, err := os.Lstat(h.in(decoy + "/new")); err == nil {
			t.Error("O_CREATE through dangle created the re-rooted decoy")
		}
		if after := h.state(); after != before {
			t.Errorf("the outside directory changed:\n%s\nwant\n%s", after, before)
		}
	})
}

// wantVerbatim fails t unless link name in f holds target, as Readlink, the
// host and Lstat show it, and HostLinkTarget maps it nowhere.
func wantVerbatim(t *testing.T, f *FS, h *host, name, target string) {
	t.Helper()
	ctx := context.Background()
	if got, err := f.Readlink(ctx, P(name)); err != nil || got != target {
		t.Errorf("Readlink(%s) = %q, %v; want %q", name, got, err, target)
	}
	if got, err := os.Readlink(h.in(name)); err != nil || got != target {
		t.Errorf("on the host %s -> %q, %v; want %q", name, got, err, target)
	}
	if info, err := f.Lstat(ctx, P(name)); err != nil || info.Mode&fs.ModeSymlink == 0 {
		t.Errorf("Lstat(%s) = %v, %v; want a symlink", name, info.Mode, err)
	}
	if _, ok, err := f.HostLinkTarget(ctx, P(name)); ok || err != nil {
		t.Errorf("HostLinkTarget(%s) = %v, %v; want no host link", name, ok, err)
	}
}

// wantListed fails t unless f's root lists every name.
func wantListed(t *testing.T, f *FS, names ...string) {
	t.Helper()
	ents, err := f.ReadDir(context.Background(), vfs.Root)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !slices.ContainsFunc(ents, func(e vfs.DirEntry) bool { return e.Name == n }) {
			t.Errorf("listing %v lacks %s", ents, n)
		}
	}
}

// wantNotFollowed fails t unless Stat and OpenFile of p, which needs a
// leaving link followed, fail with path_outside_sandbox.
func wantNotFollowed(t *testing.T, f *FS, p string) {
	t.Helper()
	ctx := context.Background()
	_, err := f.Stat(ctx, P(p))
	wantCode(t, err, vfs.CodeOutside, "Stat(%s)", p)
	fh, err := f.OpenFile(ctx, P(p), os.O_RDONLY, 0)
	if err == nil {
		b, _ := io.ReadAll(fh)
		fh.Close()
		t.Errorf("OpenFile(%s) opened %q", p, b)
		return
	}
	wantCode(t, err, vfs.CodeOutside, "OpenFile(%s)", p)
}

// TestVerbatimLinksSub: a Sub of an FS with verbatim links stores an absolute
// target, but refuses one climbing above the Sub's root, which may land in the
// wider tree and be followed there; text no link may hold stays invalid.
func TestVerbatimLinksSub(t *testing.T) {
	ctx := context.Background()
	f := newTestFS(t, WithVerbatimLinks())
	if err := f.Mkdir(ctx, P("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := f.Sub(ctx, P("d"))
	if err != nil {
		t.Fatal(err)
	}
	sub := b.(*FS)
	if err := sub.Symlink(ctx, "/usr/bin/python3", P("py")); err != nil {
		t.Fatalf("Sub: absolute target: %v", err)
	}
	if got, err := sub.Readlink(ctx, P("py")); err != nil || got != "/usr/bin/python3" {
		t.Errorf("Sub: Readlink(py) = %q, %v", got, err)
	}
	wantCode(t, sub.Symlink(ctx, "../x", P("up")), vfs.CodeOutside, "Sub: Symlink(../x)")
	if _, err := os.Lstat(filepath.Join(mustHost(t, f), "d", "up")); err == nil {
		t.Error("Sub: the refused link was created")
	}
	for _, bad := range []string{"", "a\x00b", `a\b`, strings.Repeat("a", vfs.MaxPathLen+1)} {
		wantCode(t, f.Symlink(ctx, bad, P("bad")), vfs.CodeInvalidPath, "Symlink(%q)", bad)
	}
}

// mustHost is f's host path.
func mustHost(t *testing.T, f *FS) string {
	t.Helper()
	p, ok := f.HostPath()
	if !ok {
		t.Fatal("no host path")
	}
	return p
}

// TestDefaultLinksUnchanged: without WithVerbatimLinks the backend still
// refuses to create a leaving link and hides a planted absolute target.
func TestDefaultLinksUnchanged(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	f := newAt(t, h.root)
	wantCode(t, f.Symlink(ctx, "/usr/bin/python3", P("py")), vfs.CodeOutside, "Symlink(absolute)")
	wantCode(t, f.Symlink(ctx, "../outside", P("up")), vfs.CodeOutside, "Symlink(climbing)")
	h.plant(h.outside, "abs")
	_, err := f.Readlink(ctx, P("abs"))
	wantCode(t, err, vfs.CodeOutside, "Readlink(planted absolute)")
}
