//go:build linux

package bench

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// RunFixture is what capfs run's workloads (issue 13's start-up and build-cache
// benchmark) run on: a cobra-sized project (a copy of github.com/spf13/cobra
// from the module cache, committed to a git repository of its own, as a clone
// would be), a copy of $(go env GOROOT)/src without .git (GoSrcRepo's work
// tree), and a capfs binary built from this module. capfs runs with its
// default mounts and a private state and cache directory.
type RunFixture struct {
	Cobra      string // the cobra project (git work tree)
	CobraPeer  string // a copy of it for the plain go test rows (see RunWorkloads)
	GoSrc      string // the Go source tree (read only: never written by the workloads)
	Capfs      string
	Bwrap      string
	CobraFiles int
	GoSrcFiles int
	root       string
	base       string // where the peer copies to: capfs's default checkout base
	env        []string
}

// cobraModule is the cobra version copied from the module cache (capfs's own
// dependency, so the cache holds it and every module its tests need).
const cobraModule = "github.com/spf13/cobra@v1.10.2"

// NewRunFixture builds the fixture: it needs bwrap, git, and cobra in the
// module cache (go mod download github.com/spf13/cobra@v1.10.2).
func NewRunFixture() (*RunFixture, error) {
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, fmt.Errorf("bwrap not found: %v", err)
	}
	modcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return nil, err
	}
	src := filepath.Join(strings.TrimSpace(string(modcache)), filepath.FromSlash(cobraModule))
	if _, err := os.Stat(src); err != nil {
		return nil, fmt.Errorf("%s is not in the module cache (go mod download %s): %v", cobraModule, cobraModule, err)
	}
	_, work, err := GoSrcRepo()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "capfs-bench-run-")
	if err != nil {
		return nil, err
	}
	fx := &RunFixture{Cobra: filepath.Join(root, "cobra"), CobraPeer: filepath.Join(root, "cobra-peer"), GoSrc: work, Capfs: filepath.Join(root, "capfs"), Bwrap: bw, root: root}
	fail := func(err error) (*RunFixture, error) {
		fx.Close()
		return nil, err
	}
	if out, err := exec.Command("cp", "-a", src, fx.Cobra).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("cp cobra: %v: %s", err, out))
	}
	if out, err := exec.Command("chmod", "-R", "u+w", fx.Cobra).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("chmod: %v: %s", err, out))
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-qm", "cobra " + cobraModule}} {
		c := exec.Command("git", args...)
		c.Dir, c.Env = fx.Cobra, GitEnv()
		if out, err := c.CombinedOutput(); err != nil {
			return fail(fmt.Errorf("git %s: %v: %s", args[0], err, out))
		}
	}
	if out, err := exec.Command("cp", "-a", fx.Cobra, fx.CobraPeer).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("cp cobra: %v: %s", err, out))
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fail(err)
	}
	build := exec.Command("go", "build", "-o", fx.Capfs, "./cmd/capfs")
	build.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := build.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("go build capfs: %v: %s", err, out))
	}
	for _, d := range []string{"state", "cache", "tmp"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o700); err != nil {
			return fail(err)
		}
	}
	// The peer copies where capfs checks out: /dev/shm when it is a writable
	// tmpfs (as materialize chooses for a tree this size), else the temp dir.
	fx.base = filepath.Join(root, "tmp")
	var sfs unix.Statfs_t
	if unix.Statfs("/dev/shm", &sfs) == nil && sfs.Type == unix.TMPFS_MAGIC && unix.Access("/dev/shm", unix.W_OK) == nil {
		if d, err := os.MkdirTemp("/dev/shm", "capfs-bench-cp-"); err == nil {
			fx.base = d
		}
	}
	// capfs run checks the work tree out (the mode the start-up targets are
	// for); the lazy rows ask for --lazy.
	fx.env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(root, "state"), "CAPFS_CACHE_DIR="+filepath.Join(root, "cache"), "CAPFS_RUN_LAZY=0")
	fx.CobraFiles, _ = countFiles(fx.Cobra)
	fx.GoSrcFiles, _ = countFiles(fx.GoSrc)
	return fx, nil
}

// Close removes the fixture (not GoSrcRepo's shared tree).
func (fx *RunFixture) Close() {
	exec.Command("chmod", "-R", "u+w", fx.root).Run()
	os.RemoveAll(fx.root)
	if fx.base != "" && !strings.HasPrefix(fx.base, fx.root) {
		os.RemoveAll(fx.base)
	}
}

func countFiles(d string) (int, error) {
	n := 0
	err := filepath.WalkDir(d, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			n++
		}
		return err
	})
	return n, err
}

// command runs argv in dir with the fixture's environment; stdout and
// stderr are kept for an error.
func (fx *RunFixture) command(dir string, argv ...string) error {
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir, c.Env = dir, fx.env
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Run(); err != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, out.String())
	}
	return nil
}

// bareBwrap is bubblewrap with the system binds capfs's sandbox has (without
// its limits, environment and /etc masks), bound on dir, running argv.
func (fx *RunFixture) bareBwrap(dir string, argv ...string) []string {
	a := []string{fx.Bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
		"--ro-bind", "/usr", "/usr"}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64"} {
		if t, err := os.Readlink(d); err == nil {
			a = append(a, "--symlink", t, d)
		} else if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			a = append(a, "--ro-bind", d, d)
		}
	}
	a = append(a, "--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--bind", dir, "/capfs/project", "--chdir", "/capfs/project", "--")
	return append(a, argv...)
}

// RunWorkload is one measured pair: capfs's command beside its peer.
type RunWorkload struct {
	Name, CapfsName, PeerName, Target string
	Capfs, Peer                       func(fx *RunFixture) error
	Warm                              func(fx *RunFixture) error // run once before measuring
	Needs                             func(fx *RunFixture) error // nil, or why the row cannot run here
}

// lazyRunnable reports why capfs run --lazy cannot run here (FUSE unusable, or
// a capfs without --lazy), or nil.
func lazyRunnable(fx *RunFixture) error {
	return fx.command(fx.Cobra, fx.Capfs, "run", "--lazy", "--", "true")
}

// cachedTest runs a go test command and checks that every package's result
// came from go's test cache ("(cached)"): the row measures a second run.
func (fx *RunFixture) cachedTest(dir string, argv ...string) error {
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir, c.Env = dir, fx.env
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Run(); err != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, out.String())
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "ok ") && !strings.Contains(l, "(cached)") {
			return fmt.Errorf("%s: a result did not come from go's test cache: %q\n%s", strings.Join(argv, " "), l, out.String())
		}
	}
	return nil
}

// RunWorkloads are the start-up and build-cache workloads.
func RunWorkloads() []RunWorkload {
	// Go's caches as a user has them (a second run); one cobra test assumes a
	// non-root user (it expects a write to a read-only file to fail), which
	// the sandbox is and the host may not be.
	//
	// The plain go test runs on a copy of the project: cobra's tests create and
	// remove a directory in the package directory, and go's result cache hashes
	// that directory's time, so two tools alternating on one directory would
	// each find the other's time there and miss their cache every round.
	goTest := []string{"go", "test", "-skip", "TestFailGenFishCompletionFile", "./..."}
	goTestRun := []string{"go", "test", "-count=1", "-skip", "TestFailGenFishCompletionFile", "./..."}
	return []RunWorkload{
		{
			Name: "run -- true, cobra", CapfsName: "capfs run -- true", PeerName: "bwrap true", Target: "≤ 80 ms",
			Capfs: func(fx *RunFixture) error { return fx.command(fx.Cobra, fx.Capfs, "run", "--", "true") },
			Peer:  func(fx *RunFixture) error { return fx.command(fx.Cobra, fx.bareBwrap(fx.Cobra, "true")...) },
		},
		{
			Name: "run --lazy -- true, cobra", CapfsName: "capfs run --lazy -- true", PeerName: "bwrap true", Target: "(lazy: no target)",
			Capfs: func(fx *RunFixture) error { return fx.command(fx.Cobra, fx.Capfs, "run", "--lazy", "--", "true") },
			Peer:  func(fx *RunFixture) error { return fx.command(fx.Cobra, fx.bareBwrap(fx.Cobra, "true")...) },
			Needs: lazyRunnable,
		},
		{
			Name: "run -- true, Go src", CapfsName: "capfs run -- true", PeerName: "cp -a + bwrap true + rm", Target: "≤ 1.0× peer",
			Capfs: func(fx *RunFixture) error { return fx.command(fx.GoSrc, fx.Capfs, "run", "--", "true") },
			Peer: func(fx *RunFixture) error {
				dst := filepath.Join(fx.base, "copy")
				if err := fx.command(fx.root, "cp", "-a", fx.GoSrc, dst); err != nil {
					return err
				}
				err := fx.command(dst, fx.bareBwrap(dst, "true")...)
				os.RemoveAll(dst)
				return err
			},
		},
		{
			Name: "run --lazy -- true, Go src", CapfsName: "capfs run --lazy -- true", PeerName: "cp -a + bwrap true + rm", Target: "(lazy: no target)",
			Capfs: func(fx *RunFixture) error { return fx.command(fx.GoSrc, fx.Capfs, "run", "--lazy", "--", "true") },
			Peer: func(fx *RunFixture) error {
				dst := filepath.Join(fx.base, "copy")
				if err := fx.command(fx.root, "cp", "-a", fx.GoSrc, dst); err != nil {
					return err
				}
				err := fx.command(dst, fx.bareBwrap(dst, "true")...)
				os.RemoveAll(dst)
				return err
			},
			Needs: lazyRunnable,
		},
		{
			Name: "second go test ./..., cobra", CapfsName: "capfs run -- go test", PeerName: "go test", Target: "≤ 1.3× peer",
			Warm: func(fx *RunFixture) error {
				if err := fx.command(fx.CobraPeer, goTest...); err != nil {
					return err
				}
				return fx.command(fx.Cobra, append([]string{fx.Capfs, "run", "--"}, goTest...)...)
			},
			Capfs: func(fx *RunFixture) error {
				return fx.cachedTest(fx.Cobra, append([]string{fx.Capfs, "run", "--"}, goTest...)...)
			},
			Peer: func(fx *RunFixture) error { return fx.cachedTest(fx.CobraPeer, goTest...) },
		},
		{
			// The same in lazy mode (the default where FUSE works).
			Name: "second go test ./..., cobra, lazy", CapfsName: "capfs run --lazy -- go test", PeerName: "go test", Target: "≤ 1.3× peer",
			Warm: func(fx *RunFixture) error {
				if err := fx.command(fx.CobraPeer, goTest...); err != nil {
					return err
				}
				return fx.command(fx.Cobra, append([]string{fx.Capfs, "run", "--lazy", "--"}, goTest...)...)
			},
			Capfs: func(fx *RunFixture) error {
				return fx.cachedTest(fx.Cobra, append([]string{fx.Capfs, "run", "--lazy", "--"}, goTest...)...)
			},
			Peer:  func(fx *RunFixture) error { return fx.cachedTest(fx.CobraPeer, goTest...) },
			Needs: lazyRunnable,
		},
		{
			// The tests run every time (-count=1): what the build cache saves.
			Name: "second go test -count=1 ./..., cobra", CapfsName: "capfs run -- go test -count=1", PeerName: "go test -count=1", Target: "≤ 1.3× peer",
			Warm: func(fx *RunFixture) error {
				if err := fx.command(fx.CobraPeer, goTestRun...); err != nil {
					return err
				}
				return fx.command(fx.Cobra, append([]string{fx.Capfs, "run", "--"}, goTestRun...)...)
			},
			Capfs: func(fx *RunFixture) error {
				return fx.command(fx.Cobra, append([]string{fx.Capfs, "run", "--"}, goTestRun...)...)
			},
			Peer: func(fx *RunFixture) error { return fx.command(fx.CobraPeer, goTestRun...) },
		},
	}
}

// RunTable measures every workload (count rounds, capfs and peer alternating
// in each) and prints a Markdown table: medians, the ratio capfs/peer, the
// target.
func RunTable(out, progress io.Writer, count int, run string) error {
	start := time.Now()
	fx, err := NewRunFixture()
	if err != nil {
		return err
	}
	defer fx.Close()
	fmt.Fprintf(progress, "run fixture ready in %s\n", time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(out, "capfs run: cobra (%s, %d files, committed to git) and Go %s's src (%d files, no .git); %s; GOMAXPROCS %d; "+
		"checkouts and the peer's copies on %s. Cells: median wall-clock time over %d rounds; ratio = capfs time / peer time (below 1× capfs is faster).\n\n",
		cobraModule, fx.CobraFiles, runtime.Version(), fx.GoSrcFiles, fx.Bwrap, runtime.GOMAXPROCS(0), filepath.Dir(fx.base+"/x"), count)
	fmt.Fprintf(out, "Started %s, load average %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), loadAvg())
	defer func() {
		fmt.Fprintf(out, "\nEnded %s, load average %s.\n", time.Now().UTC().Format("15:04 UTC"), loadAvg())
	}()
	fmt.Fprintf(out, "| workload | capfs | time | peer | time | ratio | target |\n|---|---|---:|---|---:|---:|---|\n")
	for _, w := range RunWorkloads() {
		if run != "" && !strings.Contains(w.Name, run) {
			continue
		}
		if w.Needs != nil {
			if err := w.Needs(fx); err != nil {
				fmt.Fprintf(out, "| %s | %s | — | %s | — | — | not run here: %s |\n", w.Name, w.CapfsName, w.PeerName, firstLine(err.Error()))
				continue
			}
		}
		if w.Warm != nil {
			if err := w.Warm(fx); err != nil {
				return fmt.Errorf("%s: warm-up: %v", w.Name, err)
			}
		}
		var tc, tp []time.Duration
		for i := 0; i < count; i++ {
			t0 := time.Now()
			if err := w.Capfs(fx); err != nil {
				return fmt.Errorf("%s: %v", w.Name, err)
			}
			t1 := time.Now()
			if err := w.Peer(fx); err != nil {
				return fmt.Errorf("%s: peer: %v", w.Name, err)
			}
			tc, tp = append(tc, t1.Sub(t0)), append(tp, time.Since(t1))
		}
		mc, mp := median(tc), median(tp)
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %.2f× | %s |\n", w.Name, w.CapfsName, fmtDur(mc), w.PeerName, fmtDur(mp), float64(mc)/float64(mp), w.Target)
		fmt.Fprintf(progress, "%s: capfs %s, peer %s\n", w.Name, fmtDur(mc), fmtDur(mp))
	}
	return nil
}

// loadAvg is the first three fields of /proc/loadavg ("?" elsewhere).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func fmtDur(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
