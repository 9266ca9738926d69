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
	"strings"
	"time"

	"github.com/capfs/capfs/fuseexport"
)

// LazyRunFixture is what the end-to-end lazy-run benchmarks run on: a capfs
// binary built from this module, Go's source tree (GoSrcRepo's work tree), an
// empty directory and a generated C project (writeCProject: BuildSources
// files, a shared header, a plain Makefile), with a private state and cache
// directory. capfs runs with its default mounts (the current directory is the
// work path) and its default checkout base.
type LazyRunFixture struct {
	Capfs, GoSrc, Empty, CProject string
	root                          string
	env                           []string
}

// NewLazyRunFixture builds the fixture. It needs FUSE, bwrap, make and cc.
func NewLazyRunFixture() (*LazyRunFixture, error) {
	if err := fuseexport.Available(); err != nil {
		return nil, err
	}
	for _, tool := range []string{"bwrap", "make", "cc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is not installed", tool)
		}
	}
	_, goTree, err := GoSrcRepo()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "capfs-bench-lazyrun-")
	if err != nil {
		return nil, err
	}
	fx := &LazyRunFixture{Capfs: filepath.Join(root, "capfs"), GoSrc: goTree, Empty: filepath.Join(root, "empty"), CProject: filepath.Join(root, "cproj"), root: root}
	fail := func(err error) (*LazyRunFixture, error) {
		fx.Close()
		return nil, err
	}
	for _, d := range []string{fx.Empty, fx.CProject, filepath.Join(root, "state"), filepath.Join(root, "cache")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fail(err)
		}
	}
	if err := writeCProject(fx.CProject); err != nil {
		return fail(err)
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
	fx.env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(root, "state"), "CAPFS_CACHE_DIR="+filepath.Join(root, "cache"))
	return fx, nil
}

// Close removes the fixture (not GoSrcRepo's shared tree).
func (fx *LazyRunFixture) Close() { os.RemoveAll(fx.root) }

// timed runs argv in dir with the fixture's environment and returns its wall
// time; a failure returns its output.
func (fx *LazyRunFixture) timed(dir string, argv ...string) (time.Duration, error) {
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir, c.Env = dir, fx.env
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	start := time.Now()
	err := c.Run()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, out.String())
	}
	return d, nil
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// LazyRunStartTable measures `capfs run --lazy -- true` and `capfs run
// --no-lazy -- true` end to end (session, work tree, bubblewrap, review) on an
// empty directory and on Go's source tree: for each mode in turn (a
// checkout's heavy copy and removal would otherwise slow the lazy rounds after
// it), count rounds alternating the two trees, after one warm-up each. It
// prints the median and the fastest round with the tree / empty ratios: the
// lazy target is within 1.5×.
func LazyRunStartTable(out, progress io.Writer, fx *LazyRunFixture, count int) error {
	rows := []struct{ name, flag string }{{"capfs run --lazy -- true", "--lazy"}, {"capfs run --no-lazy -- true (checkout)", "--no-lazy"}}
	trees := []string{fx.Empty, fx.GoSrc}
	fmt.Fprintf(out, "| `capfs run -- true`, end to end (%d rounds) | empty, median | Go tree, median | tree / empty | empty, fastest | Go tree, fastest | tree / empty |\n|---|---:|---:|---:|---:|---:|---:|\n", count)
	for _, rw := range rows {
		samples := make([][]time.Duration, len(trees))
		for r := range count + 1 { // round 0 warms up (the bubblewrap probe, the page cache)
			for j, tree := range trees {
				d, err := fx.timed(tree, fx.Capfs, "run", rw.flag, "--", "true")
				if err != nil {
					return err
				}
				fmt.Fprintf(progress, "lazy run start: round %d %-40s %-6s %v\n", r, rw.name, []string{"empty", "Go src"}[j], d.Round(time.Millisecond))
				if r > 0 {
					samples[j] = append(samples[j], d)
				}
			}
		}
		e, g := medianOf(samples[0]), medianOf(samples[1])
		em, gm := slices.Min(samples[0]), slices.Min(samples[1])
		fmt.Fprintf(out, "| %s | %s | %s | %.2f× | %s | %s | %.2f× |\n", rw.name, fmtNs(float64(e)), fmtNs(float64(g)), float64(g)/float64(e),
			fmtNs(float64(em)), fmtNs(float64(gm)), float64(gm)/float64(em))
	}
	return nil
}

// LazyRunBuildTable builds the fixture's C project with `make -j2` from clean
// three ways, count interleaved rounds, median kept: plain on the host
// directory; through `capfs run --no-lazy` (checkout, build in the sandbox,
// review and sync-back of the objects and the program); and through `capfs
// run --lazy` (the same with the FUSE copy-on-write work tree). The host
// project is cleaned before each round (untimed), and each capfs round is
// checked to have synced the program back. The median and the fastest round
// of each are printed (on a loaded machine the fastest is the steadier
// figure). The lazy target is within 1.3× of plain.
func LazyRunBuildTable(out, progress io.Writer, fx *LazyRunFixture, count int) error {
	proj := fx.CProject
	clean := func() error {
		_, err := fx.timed(proj, "make", "-s", "clean")
		return err
	}
	built := func() error {
		if _, err := os.Stat(filepath.Join(proj, "prog")); err != nil {
			return fmt.Errorf("the program was not synced back: %v", err)
		}
		return nil
	}
	modes := []struct {
		name string
		argv []string
	}{
		{"plain make -j2 on the host directory", []string{"make", "-s", "-j2"}},
		{"capfs run --no-lazy -- make -j2 (checkout)", []string{fx.Capfs, "run", "--no-lazy", "--", "make", "-s", "-j2"}},
		{"capfs run --lazy -- make -j2", []string{fx.Capfs, "run", "--lazy", "--", "make", "-s", "-j2"}},
	}
	samples := make([][]time.Duration, len(modes))
	for r := range count + 1 { // round 0 warms up and is not kept
		for i, m := range modes {
			if err := clean(); err != nil {
				return err
			}
			d, err := fx.timed(proj, m.argv...)
			if err != nil {
				return err
			}
			if err := built(); err != nil {
				return fmt.Errorf("%s: %v", m.name, err)
			}
			fmt.Fprintf(progress, "lazy run build: round %d %-45s %v\n", r, m.name, d.Round(time.Millisecond))
			if r > 0 {
				samples[i] = append(samples[i], d)
			}
		}
	}
	fmt.Fprintf(out, "| build of %d C files, make -j2 from clean, end to end (%d rounds) | median | / plain | fastest | / plain |\n|---|---:|---:|---:|---:|\n", BuildSources+1, count)
	base, baseMin := medianOf(samples[0]), slices.Min(samples[0])
	for i, m := range modes {
		d, dm := medianOf(samples[i]), slices.Min(samples[i])
		fmt.Fprintf(out, "| %s | %.2f s | %.2f× | %.2f s | %.2f× |\n", m.name, d.Seconds(), float64(d)/float64(base), dm.Seconds(), float64(dm)/float64(baseMin))
	}
	return clean()
}
