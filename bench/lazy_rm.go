//go:build linux

package bench

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capfs/capfs/fuseexport"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// LazyRmFixture is what LazyRmTable runs on: a capfs binary (built from this
// module, or $CAPFS_BENCH_CAPFS to time another build), optionally an
// earlier build to time beside it (Before, $CAPFS_BENCH_CAPFS_BEFORE), a
// project whose node_modules holds RmPackages packages (RmEntries entries
// in all), and a private state and cache directory.
type LazyRmFixture struct {
	Capfs, Before, Project string
	root                   string
	env                    []string
}

// RmPackages is how many packages the fixture's node_modules holds; each is
// a directory with package.json, lib/ (10 files) and lib/sub/ (11 files):
// 22 files of 200 bytes and 3 directories.
const RmPackages = 300

// RmEntries is how many entries `rm -rf node_modules` removes.
const RmEntries = 1 + RmPackages*25

// NewLazyRmFixture builds the fixture. It needs FUSE and bwrap.
func NewLazyRmFixture() (*LazyRmFixture, error) {
	if err := fuseexport.Available(); err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		return nil, fmt.Errorf("bwrap is not installed")
	}
	root, err := os.MkdirTemp("", "capfs-bench-lazyrm-")
	if err != nil {
		return nil, err
	}
	fx := &LazyRmFixture{Capfs: filepath.Join(root, "capfs"), Before: os.Getenv("CAPFS_BENCH_CAPFS_BEFORE"), Project: filepath.Join(root, "proj"), root: root}
	fail := func(err error) (*LazyRmFixture, error) {
		fx.Close()
		return nil, err
	}
	for _, d := range []string{fx.Project, filepath.Join(root, "state"), filepath.Join(root, "cache")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fail(err)
		}
	}
	if err := writeNodeModules(fx.Project); err != nil {
		return fail(err)
	}
	if bin := os.Getenv("CAPFS_BENCH_CAPFS"); bin != "" {
		fx.Capfs = bin
	} else if err := buildCapfs(fx.Capfs); err != nil {
		return fail(err)
	}
	fx.env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(root, "state"), "CAPFS_CACHE_DIR="+filepath.Join(root, "cache"))
	return fx, nil
}

// buildCapfs builds this module's capfs at out.
func buildCapfs(out string) error {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return err
	}
	build := exec.Command("go", "build", "-o", out, "./cmd/capfs")
	build.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build capfs: %v: %s", err, b)
	}
	return nil
}

// writeNodeModules writes dir/node_modules (see RmPackages).
func writeNodeModules(dir string) error {
	body := bytes.Repeat([]byte("x"), 200)
	for i := range RmPackages {
		pkg := filepath.Join(dir, "node_modules", fmt.Sprintf("pkg%d", i))
		if err := os.MkdirAll(filepath.Join(pkg, "lib", "sub"), 0o755); err != nil {
			return err
		}
		names := []string{"package.json"}
		for j := range 10 {
			names = append(names, fmt.Sprintf("lib/f%d.js", j))
		}
		for j := range 11 {
			names = append(names, fmt.Sprintf("lib/sub/g%d.js", j))
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(pkg, n), body, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close removes the fixture.
func (fx *LazyRmFixture) Close() { os.RemoveAll(fx.root) }

// rmScript removes node_modules and prints how long rm took, in
// nanoseconds, measured around it by the shell that runs it.
const rmScript = `a=$(date +%s%N); rm -rf node_modules; b=$(date +%s%N); echo $((b-a))`

// rmRound runs argv (ending in the shell running rmScript) in dir and
// returns rm's own time and argv's wall time.
func (fx *LazyRmFixture) rmRound(dir string, argv ...string) (cmd, wall time.Duration, err error) {
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir, c.Env = dir, fx.env
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	start := time.Now()
	err = c.Run()
	wall = time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, errb.String())
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: rm's time: %q", strings.Join(argv, " "), out.String())
	}
	return time.Duration(ns), wall, nil
}

// LazyRmTable times `rm -rf node_modules` (RmEntries entries) three ways,
// count interleaved rounds after a warm-up, median and fastest kept: plain,
// on a fresh host copy of the project beside it and on one in /dev/shm
// (tmpfs, where the lazy layer's upper and a checkout live) (sh -c, rm
// timed inside the shell; the copy synced to disk first, untimed);
// in `capfs run --sync never` (lazy, the default: the FUSE copy-on-write
// layer records a whiteout and the base of each entry removed); and in
// `capfs run --no-lazy --sync never` (a checkout: the project copied to
// tmpfs before the command, rm removes it there). The capfs runs change
// nothing on the host (--sync never: the review lists 7,501 deletions and
// keeps them, discarded after each round, untimed), so each round starts
// from the same source; the project's files were written more than a second
// before, so the lazy layer trusts their status as it would an installed
// node_modules. For each: rm's own time (measured in the sandbox by the same
// shell), and the whole command's wall time (capfs: session, mount or
// checkout, sandbox, review). With fx.Before, a fourth row times the earlier
// build's lazy run in the same rounds. Two last rows time rm on a copy served
// through go-fuse's pass-through loopback (see loopback), with and without
// default_permissions: what FUSE itself costs, beside what the lazy layer
// adds. The target is the lazy rm within 1.5× of plain.
func LazyRmTable(out, progress io.Writer, fx *LazyRmFixture, count int) error {
	time.Sleep(1100 * time.Millisecond) // older than the layer's racy window
	sh := []string{"sh", "-c", rmScript}
	modes := []struct {
		name string
		argv []string
	}{
		{"plain rm -rf (host copy beside the project)", sh},
		{"plain rm -rf (host copy on tmpfs, /dev/shm)", sh},
		{"capfs run (lazy) -- rm -rf", append([]string{fx.Capfs, "run", "--sync", "never", "--"}, sh...)},
		{"capfs run --no-lazy -- rm -rf (checkout)", append([]string{fx.Capfs, "run", "--no-lazy", "--sync", "never", "--"}, sh...)},
	}
	if fx.Before != "" { // the earlier build's lazy run, in the same rounds
		modes = append(modes, struct {
			name string
			argv []string
		}{"capfs run (lazy) -- rm -rf, earlier build", append([]string{fx.Before, "run", "--sync", "never", "--"}, sh...)})
	}
	loops := len(modes)
	modes = append(modes, struct {
		name string
		argv []string
	}{"go-fuse loopback, default_permissions (the floor of a FUSE layer)", sh}, struct {
		name string
		argv []string
	}{"go-fuse loopback, no default_permissions", sh})
	cmds := make([][]time.Duration, len(modes))
	walls := make([][]time.Duration, len(modes))
	copyDirs := []string{filepath.Join(fx.root, "copy"), filepath.Join("/dev/shm", filepath.Base(fx.root)+"-copy")}
	defer os.RemoveAll(copyDirs[1])
	for r := range count + 1 { // round 0 warms up and is not kept
		for i, m := range modes {
			dir := fx.Project
			if i < len(copyDirs) {
				copyDir := copyDirs[i]
				os.RemoveAll(copyDir)
				if b, err := exec.Command("cp", "-a", fx.Project, copyDir).CombinedOutput(); err != nil {
					return fmt.Errorf("cp: %v: %s", err, b)
				}
				_ = exec.Command("sync").Run() // the copy's writeback is not rm's

				dir = copyDir
			}
			var unmount func()
			if i >= loops {
				var err error
				if dir, unmount, err = fx.loopback(i == loops); err != nil {
					return err
				}
			}
			cmd, wall, err := fx.rmRound(dir, m.argv...)
			if unmount != nil {
				unmount()
			}
			if err != nil {
				return err
			}
			if i >= len(copyDirs) && i < loops {
				if _, err := os.Stat(filepath.Join(fx.Project, "node_modules", "pkg0", "package.json")); err != nil {
					return fmt.Errorf("%s changed the host project: %v", m.name, err)
				}
				discard := exec.Command(fx.Capfs, "sync", "--discard", "--all")
				discard.Env = fx.env
				if b, err := discard.CombinedOutput(); err != nil {
					return fmt.Errorf("capfs sync --discard --all: %v: %s", err, b)
				}
			}
			fmt.Fprintf(progress, "lazy rm: round %d %-42s rm %v, wall %v\n", r, m.name, cmd.Round(time.Millisecond), wall.Round(time.Millisecond))
			if r > 0 {
				cmds[i] = append(cmds[i], cmd)
				walls[i] = append(walls[i], wall)
			}
		}
	}
	fmt.Fprintf(out, "| `rm -rf node_modules`, %d entries (%d rounds) | rm, median | / plain | / plain tmpfs | rm, fastest | / plain | / plain tmpfs | whole run, median | / plain |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n", RmEntries, count)
	c0, c0m, w0 := medianOf(cmds[0]), slices.Min(cmds[0]), medianOf(walls[0])
	t0, t0m := medianOf(cmds[1]), slices.Min(cmds[1])
	for i, m := range modes {
		c, cm, w := medianOf(cmds[i]), slices.Min(cmds[i]), medianOf(walls[i])
		fmt.Fprintf(out, "| %s | %s | %.2f× | %.2f× | %s | %.2f× | %.2f× | %s | %.2f× |\n", m.name, fmtNs(float64(c)), float64(c)/float64(c0), float64(c)/float64(t0),
			fmtNs(float64(cm)), float64(cm)/float64(c0m), float64(cm)/float64(t0m), fmtNs(float64(w)), float64(w)/float64(w0))
	}
	return nil
}

// loopback copies the project beside it and serves the copy through
// go-fuse's pass-through file system (no overlay, no policy, no audit: each
// request is one system call on the copy), mounted as the lazy layer is
// (nosuid, nodev, READDIRPLUS, 1 s entry and attribute timeouts), with or
// without the kernel's permission checks (default_permissions). It returns
// the mount point and how to unmount it. Its rm is the floor any FUSE layer
// pays on this kernel: the requests themselves.
func (fx *LazyRmFixture) loopback(perms bool) (string, func(), error) {
	src, mp := filepath.Join(fx.root, "loop-src"), filepath.Join(fx.root, "loop-mnt")
	os.RemoveAll(src)
	if b, err := exec.Command("cp", "-a", fx.Project, src).CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("cp: %v: %s", err, b)
	}
	_ = exec.Command("sync").Run()
	if err := os.MkdirAll(mp, 0o755); err != nil {
		return "", nil, err
	}
	root, err := gofs.NewLoopbackRoot(src)
	if err != nil {
		return "", nil, err
	}
	opts := []string{"nosuid", "nodev"}
	if perms {
		opts = append(opts, "default_permissions")
	}
	sec := time.Second
	srv, err := gofs.Mount(mp, root, &gofs.Options{EntryTimeout: &sec, AttrTimeout: &sec, NegativeTimeout: &sec,
		MountOptions: fuse.MountOptions{DirectMount: os.Geteuid() == 0, Options: opts, ExtraCapabilities: fuse.CAP_READDIRPLUS_AUTO}})
	if err != nil {
		return "", nil, fmt.Errorf("go-fuse loopback: %v", err)
	}
	return mp, func() { _ = srv.Unmount() }, nil
}
