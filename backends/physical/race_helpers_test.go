//go:build linux

package physical_test

// Harness of the race tests (THREATS.md lines 31, 32, 37-42, 44, 46): an attacker
// goroutine changes the host tree with raw syscalls while the victim calls the
// backend or a Dir over it; every raced operation is counted, and so is every
// escape (outside content read, or an outside file changed or created). The
// bounded default keeps `make test` short; CAPFS_STRESS=1 scales the runs up to
// CAPFS_STRESS_OPS raced operations in total (1,000,000 by default).

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

const (
	// defaultRaceOps is the raced operations of one race run in the default mode.
	defaultRaceOps = 300
	// defaultStressOps is the total under CAPFS_STRESS=1 without CAPFS_STRESS_OPS.
	defaultStressOps = 1_000_000
	// raceRuns is the number of race runs (test, subtest and resolver) the total is
	// shared among; TestRaceTotal checks it against the runs that actually ran.
	raceRuns = 24
)

func stressMode() bool { return os.Getenv("CAPFS_STRESS") != "" }

// stressTotal is the raced operations all race runs together must reach under
// CAPFS_STRESS=1.
func stressTotal(t testing.TB) int {
	if v := os.Getenv("CAPFS_STRESS_OPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("CAPFS_STRESS_OPS=%q: want a positive integer", v)
		}
		return n
	}
	return defaultStressOps
}

// raceOps is how many raced operations one race run performs.
func raceOps(t testing.TB) int {
	if !stressMode() {
		return defaultRaceOps
	}
	return (stressTotal(t) + raceRuns - 1) / raceRuns
}

// raceTotals accumulate over every race run of the process.
var raceTotals struct {
	ops, escapes, runs atomic.Int64
}

// raceRun counts one race run's operations, escapes and error codes.
type raceRun struct {
	t        testing.TB
	w        *world
	name     string
	ops      atomic.Int64
	escapes  atomic.Int64
	attacks  atomic.Int64
	mu       sync.Mutex
	codes    map[vfs.Code]int
	reported int
	start    time.Time
}

func newRaceRun(t testing.TB, w *world, name string) *raceRun {
	return &raceRun{t: t, w: w, name: name, codes: map[vfs.Code]int{}, start: time.Now()}
}

// op counts one raced operation.
func (r *raceRun) op() { r.ops.Add(1) }

// escape counts an escape and fails the test (reporting the first few).
func (r *raceRun) escape(format string, args ...any) {
	r.escapes.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reported++; r.reported <= 10 {
		r.t.Errorf("ESCAPE: "+format, args...)
	}
}

// failed records a victim call's error: it must be a *vfs.Error with one of the
// codes a racing tree can cause, naming no host path.
func (r *raceRun) failed(what string, err error, allowed ...vfs.Code) {
	if err == nil {
		return
	}
	c := vfs.CodeOf(err)
	r.mu.Lock()
	r.codes[c]++
	r.mu.Unlock()
	if c == "" {
		r.t.Errorf("%s: %v is not a *vfs.Error", what, err)
		return
	}
	if strings.Contains(err.Error(), r.w.tmp) {
		r.t.Errorf("%s: error names a host path: %v", what, err)
	}
	if len(allowed) > 0 {
		for _, a := range allowed {
			if a == c {
				return
			}
		}
		r.t.Errorf("%s: %v (code %s); want one of %v", what, err, c, allowed)
	}
}

// finish reports the run, adds it to the totals and prints one line on stdout.
func (r *raceRun) finish() {
	ops, esc := r.ops.Load(), r.escapes.Load()
	raceTotals.ops.Add(ops)
	raceTotals.escapes.Add(esc)
	raceTotals.runs.Add(1)
	r.mu.Lock()
	codes := fmt.Sprint(r.codes)
	r.mu.Unlock()
	line := fmt.Sprintf("physical race %s: %d raced operations, %d attacker operations, %d escapes (errors by code: %s) in %v",
		r.name, ops, r.attacks.Load(), esc, codes, time.Since(r.start).Round(time.Millisecond))
	r.t.Log(line)
	if stressMode() {
		fmt.Println(line)
	}
	if ops == 0 {
		r.t.Errorf("no raced operation ran")
	}
}

// attacker runs one attack step in a loop on its own goroutine until stop.
// pause and resume bracket the victim's setup and checks, during which no step
// runs.
type attacker struct {
	gate sync.RWMutex
	done atomic.Bool
	wg   sync.WaitGroup
}

func (r *raceRun) startAttacker(step func(i int)) *attacker {
	a := &attacker{}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for i := 0; !a.done.Load(); i++ {
			a.gate.RLock()
			step(i)
			a.gate.RUnlock()
			r.attacks.Add(1)
		}
	}()
	return a
}

func (a *attacker) pause()  { a.gate.Lock() }
func (a *attacker) resume() { a.gate.Unlock() }

func (a *attacker) stop() {
	a.done.Store(true)
	a.wg.Wait()
}

// openPath opens a host directory as an O_PATH handle for *at syscalls, closed at
// the end of t.
func openPath(t testing.TB, path string) int {
	t.Helper()
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// exchange swaps two names in dir with RENAME_EXCHANGE.
func exchange(dir int, a, b string) error {
	return unix.Renameat2(dir, a, dir, b, unix.RENAME_EXCHANGE)
}

// existsAt reports whether name exists in dir (without following it).
func existsAt(dir int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// inodeAt returns the inode number of name in dir.
func inodeAt(t testing.TB, dir int, name string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// countedBackend counts every call made through it in n.
type countedBackend struct {
	vfs.Backend
	n *atomic.Int64
}

func (c *countedBackend) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	c.n.Add(1)
	return c.Backend.Stat(ctx, p)
}

func (c *countedBackend) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	c.n.Add(1)
	return c.Backend.Lstat(ctx, p)
}

func (c *countedBackend) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	c.n.Add(1)
	return c.Backend.ReadDir(ctx, p)
}

func (c *countedBackend) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	c.n.Add(1)
	return c.Backend.OpenFile(ctx, p, flag, perm)
}

func (c *countedBackend) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	c.n.Add(1)
	return c.Backend.Mkdir(ctx, p, perm)
}

func (c *countedBackend) Remove(ctx context.Context, p vfs.Path) error {
	c.n.Add(1)
	return c.Backend.Remove(ctx, p)
}

func (c *countedBackend) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	c.n.Add(1)
	return c.Backend.Rename(ctx, from, to, flags)
}

func (c *countedBackend) Symlink(ctx context.Context, target string, p vfs.Path) error {
	c.n.Add(1)
	return c.Backend.Symlink(ctx, target, p)
}

func (c *countedBackend) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	c.n.Add(1)
	return c.Backend.Readlink(ctx, p)
}

func (c *countedBackend) Link(ctx context.Context, oldp, newp vfs.Path) error {
	c.n.Add(1)
	return c.Backend.Link(ctx, oldp, newp)
}

func (c *countedBackend) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	c.n.Add(1)
	return c.Backend.Chmod(ctx, p, mode)
}

func (c *countedBackend) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	c.n.Add(1)
	return c.Backend.Chtimes(ctx, p, atime, mtime)
}

func (c *countedBackend) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	c.n.Add(1)
	return c.Backend.Sub(ctx, p)
}
