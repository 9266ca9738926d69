package vfstest_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// resolveMutants are backends whose Resolve or Resolved-mark handling is broken
// in one way each, with a line the Resolve group's failure report must hold.
var resolveMutants = []struct{ kind, want string }{
	// Acts on Resolved paths as on any other: follows a link swapped in.
	{"strips-mark", "--- FAIL: TestResolveMutantChild/Resolve/resolved-mark"},
	// Resolves lexically: reports the path as given, links not followed.
	{"lexical", "--- FAIL: TestResolveMutantChild/Resolve/canonical"},
	// Forgets the Resolved mark on its results.
	{"unmarked", "without the Resolved mark"},
	// Follows the final link even when asked not to.
	{"always-follows", "--- FAIL: TestResolveMutantChild/Resolve/canonical"},
}

// TestResolveCatchesBrokenBackends runs the Resolve group, in a child process,
// against each mutant and checks that it fails where it should.
func TestResolveCatchesBrokenBackends(t *testing.T) {
	if os.Getenv("VFSTEST_RESOLVE_MUTANT") != "" {
		t.Skip("in a mutant child")
	}
	for _, m := range resolveMutants {
		t.Run(m.kind, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestResolveMutantChild$/^Resolve$", "-test.count=1", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), "VFSTEST_RESOLVE_MUTANT="+m.kind)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the Resolve group passed a backend broken by %s:\n%s", m.kind, out)
			}
			if !strings.Contains(string(out), m.want) {
				t.Fatalf("the Resolve group failed for %s, but not with %q:\n%s", m.kind, m.want, out)
			}
		})
	}
}

// TestResolveMutantChild is the child side of TestResolveCatchesBrokenBackends.
func TestResolveMutantChild(t *testing.T) {
	kind := os.Getenv("VFSTEST_RESOLVE_MUTANT")
	if kind == "" {
		t.Skip("only run by TestResolveCatchesBrokenBackends")
	}
	vfstest.TestBackend(t, vfstest.Config{New: func(t *testing.T) vfs.Backend {
		return &badResolve{Backend: memory.New(), kind: kind}
	}})
}

// badResolve forwards to a correct backend except for the breakage kind names.
type badResolve struct {
	vfs.Backend
	kind string
}

// in is the path handed to the real backend.
func (b *badResolve) in(p vfs.Path) vfs.Path {
	if b.kind == "strips-mark" {
		return p.Unresolved()
	}
	return p
}

func (b *badResolve) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	switch b.kind {
	case "lexical":
		info, err := b.Backend.Lstat(ctx, p.Unresolved())
		if err != nil {
			if vfs.CodeOf(err) == vfs.CodeNotFound {
				return vfs.Location{Path: p.WithoutDirMark().Resolved()}, nil
			}
			return vfs.Location{}, err
		}
		return vfs.Location{Path: p.WithoutDirMark().Resolved(), Found: true, Type: info.Mode.Type()}, nil
	case "unmarked":
		loc, err := b.Backend.Resolve(ctx, p, follow)
		loc.Path = loc.Path.Unresolved()
		return loc, err
	case "always-follows":
		return b.Backend.Resolve(ctx, p, true)
	}
	return b.Backend.Resolve(ctx, b.in(p), follow)
}

func (b *badResolve) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return b.Backend.Stat(ctx, b.in(p))
}

func (b *badResolve) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return b.Backend.Lstat(ctx, b.in(p))
}

func (b *badResolve) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	return b.Backend.ReadDir(ctx, b.in(p))
}

func (b *badResolve) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	return b.Backend.OpenFile(ctx, b.in(p), flag, perm)
}

func (b *badResolve) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	return b.Backend.Mkdir(ctx, b.in(p), perm)
}

func (b *badResolve) Remove(ctx context.Context, p vfs.Path) error {
	return b.Backend.Remove(ctx, b.in(p))
}

func (b *badResolve) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	return b.Backend.Rename(ctx, b.in(from), b.in(to), flags)
}

func (b *badResolve) Symlink(ctx context.Context, target string, p vfs.Path) error {
	return b.Backend.Symlink(ctx, target, b.in(p))
}

func (b *badResolve) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	return b.Backend.Readlink(ctx, b.in(p))
}

func (b *badResolve) Link(ctx context.Context, oldp, newp vfs.Path) error {
	return b.Backend.Link(ctx, b.in(oldp), b.in(newp))
}

func (b *badResolve) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	return b.Backend.Chmod(ctx, b.in(p), mode)
}

func (b *badResolve) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	return b.Backend.Chtimes(ctx, b.in(p), atime, mtime)
}

func (b *badResolve) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	s, err := b.Backend.Sub(ctx, b.in(p))
	if err != nil {
		return nil, err
	}
	return &badResolve{Backend: s, kind: b.kind}, nil
}
