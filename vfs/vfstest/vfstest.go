// Package vfstest is the conformance suite every [vfs.Backend] runs. It is in
// the spirit of [testing/fstest], but for writable backends and adversarial
// input.
//
// A backend's test calls [TestBackend] with a [Config] whose New returns a
// fresh, empty, writable backend. The suite seeds every tree through the SPI
// itself (Mkdir, OpenFile, Symlink, Link). It runs these groups as subtests:
//
//   - Basics: the root, declared Features (unsupported operations fail with
//     not_supported), Info fields, rename flags (NoReplace, Exchange), large and
//     sparse files, long names, deep trees, and the exported helpers.
//   - Differential: scripts of operations run on the backend and on a real
//     directory through package os. The scripts cover open flags
//     (O_EXCL/O_APPEND/O_TRUNC), ReadAt/WriteAt past EOF, Seek, Truncate,
//     independent offsets, rename and remove corner cases, sorted listings,
//     stat vs lstat, readlink, hard links, chmod, chtimes, and removal of an
//     open file. On the os side, Rename is rename(2), and creation modes are
//     applied without the umask. Each step's outcome and the final trees must
//     match. The outcome is the [vfs.Code] of the error (host errors mapped with
//     [vfs.Errno]) and what the step observed.
//   - Threats and Sub: the lines of THREATS.md that apply to a virtual backend.
//     They are checked directly because capfs differs from os there. Guest paths
//     are cleaned lexically by [vfs.ParseGuest]. Symlinks never resolve outside
//     the backend's root (absolute targets and ".." above the root are
//     path_outside_sandbox), while os follows them. Loops and chains longer than
//     [vfs.MaxSymlinks] are too_many_links. Trailing slashes demand directories.
//     Dangling links create inside but never outside. Sub both confines its
//     links and pins its directory against later renames.
//   - Resolve: [vfs.Backend].Resolve's canonical locations (links followed as the
//     call would, ".." in targets physical), its errors, and agreement with
//     [vfs.ResolveBackend]. Also the Resolved mark: a Resolved path with a
//     symlink on it makes every call fail with conflict and change nothing. The
//     fused calls ([vfs.ResolveOpen], [vfs.ResolveReadDir], the backend's own
//     where it has them) decide on that location, return a refusal unchanged,
//     and list what ReadDir of it lists.
//   - OpenStat: where the backend's Files record their status at the open
//     ([vfs.OpenStater]), that it is what Stat reported then, for OpenFile and
//     [vfs.ResolveOpen]. Also that it stays so when the file changes.
//   - Errors: every error code a backend must produce. Each is a [*vfs.Error]
//     (not wrapped) with the caller's path, an Op, the io/fs sentinel, and no
//     host path. Every call on a closed File fails with closed.
//   - Concurrency: bounded goroutines mixing creates, writes, reads, renames,
//     removals and listings on overlapping paths. Afterwards every listed entry
//     stats, and every file holds one complete written value. Attackers swap
//     directories for escaping links under a Sub. A File is shared between
//     goroutines. Run it with -race.
//
// Every call of every group goes through a checking wrapper. These errors fail
// the test:
//   - an error that is not a [*vfs.Error];
//   - one with an unknown Code or an empty Op;
//   - one that fails its errors.Is sentinel;
//   - one that names a host path ("/tmp/", the temporary directory, or the
//     backend's [vfs.HostPather] path).
//
// So does a File breaking the [io.Reader], [io.ReaderAt] or [io.Writer]
// contracts.
//
// Tests the backend's Features rule out (symlinks, hard links, chmod, chtimes)
// are skipped with a message naming the feature. Config.Skip skips named
// subtests for documented deviations. A ReadOnly backend only gets the
// read-only checks.
//
// # What it does not check
//
// The suite never compares timestamps other than those set by Chtimes,
// directory sizes, or symlink permission bits, which are backend-defined. It
// does not test durability (Features.Persistent), quotas, or what is specific
// to one backend. Those belong in the backend's own tests: the physical
// backend's openat2 races, special files, hard links to host files.
// Concurrency checks find data races and torn state only as far as a bounded
// run, and the scheduler, allow.
package vfstest

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// Config describes the backend under test.
type Config struct {
	// New returns a fresh, empty, writable backend for one subtest. It is called
	// once per subtest, with that subtest's T; use t.Cleanup to release it.
	New func(t *testing.T) vfs.Backend

	// Skip names subtests to skip, each with the backend's documented reason, for
	// semantics a backend deliberately does not share. A key is a subtest name
	// relative to TestBackend, such as "Differential" (a whole group) or
	// "Differential/hardlinks" (one script).
	Skip map[string]string

	// RejectsEscapingSymlinks declares that Symlink refuses, with
	// path_outside_sandbox, targets that would resolve outside the root (absolute,
	// or climbing above it), as a Dir does (THREATS 26), instead of storing them
	// for confinement at resolution. The suite then checks that refusal, and tests
	// that need such a link planted stop (skipped) where they would plant it.
	RejectsEscapingSymlinks bool

	// Goroutines and OpsPerGoroutine size the concurrency test; zero means 8 and 200.
	Goroutines, OpsPerGoroutine int
}

// TestBackend runs the whole conformance suite against cfg.New as subtests of t.
func TestBackend(t *testing.T, cfg Config) {
	if cfg.New == nil {
		t.Fatal("vfstest: Config.New is nil")
	}
	probe := cfg.New(t)
	if probe == nil {
		t.Fatal("vfstest: Config.New returned nil")
	}
	if probe.Features().ReadOnly {
		t.Run("ReadOnly", func(t *testing.T) { testReadOnly(t, cfg) })
		t.Log("vfstest: the backend is ReadOnly; the suite needs a writable backend for the other groups")
		return
	}
	t.Run("Basics", func(t *testing.T) { testBasics(t, cfg) })
	t.Run("Differential", func(t *testing.T) { testDifferential(t, cfg) })
	t.Run("Threats", func(t *testing.T) { testThreats(t, cfg) })
	t.Run("Sub", func(t *testing.T) { testSub(t, cfg) })
	t.Run("Resolve", func(t *testing.T) { testResolve(t, cfg) })
	t.Run("ReadDirInfo", func(t *testing.T) { testDirInfo(t, cfg) })
	t.Run("OpenStat", func(t *testing.T) { testOpenStat(t, cfg) })
	t.Run("Attrs", func(t *testing.T) { testAttrs(t, cfg) })
	t.Run("Errors", func(t *testing.T) { testErrors(t, cfg) })
	t.Run("Concurrency", func(t *testing.T) { testConcurrency(t, cfg) })
}

// WriteFile creates or truncates file p in b and writes data to it, like
// os.WriteFile with permission 0644. It returns the first error of the open, write
// or close.
func WriteFile(ctx context.Context, b vfs.Backend, p vfs.Path, data []byte) error {
	f, err := b.OpenFile(ctx, p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadFile returns the whole contents of file p in b, like os.ReadFile.
func ReadFile(ctx context.Context, b vfs.Backend, p vfs.Path) ([]byte, error) {
	f, err := b.OpenFile(ctx, p, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return data, err
}

// MkdirAll creates directory p in b and any missing parents, with permission perm,
// like os.MkdirAll. It succeeds if p already is a directory (or a symlink to one).
func MkdirAll(ctx context.Context, b vfs.Backend, p vfs.Path, perm fs.FileMode) error {
	if p.IsRoot() {
		return nil
	}
	if info, err := b.Stat(ctx, p); err == nil {
		if info.Mode.IsDir() {
			return nil
		}
		return vfs.NewError(vfs.CodeNotDir, "mkdir", p, "")
	}
	if err := MkdirAll(ctx, b, p.Dir(), perm); err != nil {
		return err
	}
	err := b.Mkdir(ctx, p.WithoutDirMark(), perm)
	if err != nil && errors.Is(err, fs.ErrExist) {
		// Lost a race with another creator, or p is a symlink: fine if it is a directory now.
		if info, serr := b.Stat(ctx, p); serr == nil && info.Mode.IsDir() {
			return nil
		}
	}
	return err
}
