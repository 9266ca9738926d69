package vfstest_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// TestMemory is the baseline: the suite passes on a correct backend, so the
// failures TestSuiteCatchesBrokenBackends provokes come from the breakage alone.
func TestMemory(t *testing.T) {
	vfstest.TestBackend(t, vfstest.Config{New: func(t *testing.T) vfs.Backend { return memory.New() }})
}

// mutants are backends broken in one way each, with the group of the suite that
// must catch them and a line of the failure report.
var mutants = []struct {
	name, group, want string
	kind              string // the breakage; the name if empty
}{
	{"unsorted-readdir", "Differential", "--- FAIL: TestMutantChild/Differential/readdir", ""},
	{"wrapped-errors", "Basics", "return the *vfs.Error itself", ""},
	{"host-path-in-errors", "Errors", `host path "/tmp/" in the error text`, ""},
	{"empty-op", "Basics", "empty Op", ""},
	{"stat-does-not-follow", "Threats", "--- FAIL: TestMutantChild/Threats/15-16-escaping-symlinks", ""},
	{"reroots-absolute-links", "Threats", "--- FAIL: TestMutantChild/Threats/15-16-escaping-symlinks", ""},
	{"ignores-o-excl", "Differential", "--- FAIL: TestMutantChild/Differential/open-flags", ""},
	{"sub-not-pinned", "Sub", "--- FAIL: TestMutantChild/Sub/51-sub-pins-its-directory", ""},
	{"sub-not-confined", "Sub", "--- FAIL: TestMutantChild/Sub/48-link-out-of-sub", ""},
	{"readat-short-without-error", "Differential", "io.ReaderAt requires an error", ""},
	{"truncate-ignored", "Differential", "--- FAIL: TestMutantChild/Differential/readat-writeat-truncate", ""},
	{"sub-not-confined-under-attack", "Concurrency", "a file outside the sub leaked", "sub-not-confined"},
}

// TestSuiteCatchesBrokenBackends runs the suite, in a child process, against each
// mutant and checks that it fails where it should.
func TestSuiteCatchesBrokenBackends(t *testing.T) {
	if os.Getenv("VFSTEST_MUTANT") != "" {
		t.Skip("in a mutant child")
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestMutantChild$/^"+m.group+"$", "-test.count=1", "-test.timeout=2m")
			kind := m.kind
			if kind == "" {
				kind = m.name
			}
			cmd.Env = append(os.Environ(), "VFSTEST_MUTANT="+kind)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a backend broken by %s:\n%s", m.name, out)
			}
			if !strings.Contains(string(out), m.want) {
				t.Fatalf("the suite failed for %s, but not with %q:\n%s", m.name, m.want, out)
			}
		})
	}
}

// TestMutantChild is the child side of TestSuiteCatchesBrokenBackends.
func TestMutantChild(t *testing.T) {
	kind := os.Getenv("VFSTEST_MUTANT")
	if kind == "" {
		t.Skip("only run by TestSuiteCatchesBrokenBackends")
	}
	vfstest.TestBackend(t, vfstest.Config{New: func(t *testing.T) vfs.Backend {
		return &broken{b: memory.New(), kind: kind}
	}})
}

// broken forwards to a correct backend except for the one breakage named by kind.
type broken struct {
	b    vfs.Backend
	kind string
}

func (b *broken) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	return b.b.Resolve(ctx, p, follow)
}

func (m *broken) fix(err error) error {
	e, ok := err.(*vfs.Error)
	if !ok {
		return err
	}
	switch m.kind {
	case "wrapped-errors":
		return fmt.Errorf("backend: %w", e)
	case "host-path-in-errors":
		return vfs.Readdress(e, "", "/tmp/host/"+e.Path, e.Dest)
	case "empty-op":
		c := *e
		c.Op = ""
		return &c
	}
	return err
}

func (m *broken) Features() vfs.Features { return m.b.Features() }

func (m *broken) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	if m.kind == "stat-does-not-follow" {
		i, err := m.b.Lstat(ctx, p)
		return i, m.fix(err)
	}
	i, err := m.b.Stat(ctx, p)
	return i, m.fix(err)
}

func (m *broken) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	i, err := m.b.Lstat(ctx, p)
	return i, m.fix(err)
}

func (m *broken) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	ents, err := m.b.ReadDir(ctx, p)
	if m.kind == "unsorted-readdir" {
		slices.Reverse(ents)
	}
	return ents, m.fix(err)
}

func (m *broken) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	if m.kind == "ignores-o-excl" {
		flag &^= os.O_EXCL
	}
	f, err := m.b.OpenFile(ctx, p, flag, perm)
	if err != nil {
		return nil, m.fix(err)
	}
	return &brokenFile{File: f, kind: m.kind}, nil
}

func (m *broken) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	return m.fix(m.b.Mkdir(ctx, p, perm))
}

func (m *broken) Remove(ctx context.Context, p vfs.Path) error { return m.fix(m.b.Remove(ctx, p)) }

func (m *broken) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	return m.fix(m.b.Rename(ctx, from, to, flags))
}

func (m *broken) Symlink(ctx context.Context, target string, p vfs.Path) error {
	if m.kind == "reroots-absolute-links" {
		// Like a resolver that re-roots absolute targets instead of refusing them.
		target = strings.TrimLeft(target, "/")
		if target == "" {
			target = "."
		}
	}
	return m.fix(m.b.Symlink(ctx, target, p))
}

func (m *broken) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	s, err := m.b.Readlink(ctx, p)
	return s, m.fix(err)
}

func (m *broken) Link(ctx context.Context, oldp, newp vfs.Path) error {
	return m.fix(m.b.Link(ctx, oldp, newp))
}

func (m *broken) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	return m.fix(m.b.Chmod(ctx, p, mode))
}

func (m *broken) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	return m.fix(m.b.Chtimes(ctx, p, atime, mtime))
}

func (m *broken) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	if m.kind == "sub-not-pinned" || m.kind == "sub-not-confined" {
		// Joins paths onto the parent's: follows renames and resolves links from
		// the parent's root.
		if info, err := m.b.Stat(ctx, p); err != nil || !info.Mode.IsDir() {
			return nil, vfs.NewError(vfs.CodeNotDir, "sub", p, "")
		}
		return &prefixed{broken: broken{b: m.b, kind: m.kind}, at: p}, nil
	}
	s, err := m.b.Sub(ctx, p)
	if err != nil {
		return nil, m.fix(err)
	}
	return &broken{b: s, kind: m.kind}, nil
}

// prefixed is a Sub done wrong: every path is joined onto the parent's.
type prefixed struct {
	broken
	at vfs.Path
}

func (s *prefixed) j(p vfs.Path) vfs.Path { return s.at.Join(p) }

func (s *prefixed) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return s.broken.Stat(ctx, s.j(p))
}
func (s *prefixed) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return s.broken.Lstat(ctx, s.j(p))
}
func (s *prefixed) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	return s.broken.ReadDir(ctx, s.j(p))
}
func (s *prefixed) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	return s.broken.OpenFile(ctx, s.j(p), flag, perm)
}
func (s *prefixed) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	return s.broken.Mkdir(ctx, s.j(p), perm)
}
func (s *prefixed) Remove(ctx context.Context, p vfs.Path) error {
	if p.IsRoot() {
		return vfs.NewError(vfs.CodeInvalidPath, "remove", p, "root")
	}
	return s.broken.Remove(ctx, s.j(p))
}
func (s *prefixed) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	return s.broken.Rename(ctx, s.j(from), s.j(to), flags)
}
func (s *prefixed) Symlink(ctx context.Context, target string, p vfs.Path) error {
	return s.broken.Symlink(ctx, target, s.j(p))
}
func (s *prefixed) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	return s.broken.Readlink(ctx, s.j(p))
}
func (s *prefixed) Link(ctx context.Context, oldp, newp vfs.Path) error {
	return s.broken.Link(ctx, s.j(oldp), s.j(newp))
}
func (s *prefixed) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	return s.broken.Chmod(ctx, s.j(p), mode)
}
func (s *prefixed) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	return s.broken.Chtimes(ctx, s.j(p), atime, mtime)
}
func (s *prefixed) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	return s.broken.Sub(ctx, s.j(p))
}

// brokenFile forwards to a correct File except for the file-level breakages.
type brokenFile struct {
	vfs.File
	kind string
}

func (f *brokenFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(b, off)
	if f.kind == "readat-short-without-error" && err == io.EOF {
		err = nil
	}
	return n, err
}

func (f *brokenFile) Truncate(size int64) error {
	if f.kind == "truncate-ignored" {
		return nil
	}
	return f.File.Truncate(size)
}
