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

// Git reads in a run's sandbox (LazyGitTable).

// gitBenchFiles, gitBenchCommits and gitBenchTouched shape the repository
// LazyGitTable reads: files in 40 directories, commits each rewriting
// gitBenchTouched of them.
const (
	gitBenchFiles   = 2000
	gitBenchCommits = 200
	gitBenchTouched = 20
)

// writeGitBenchRepo makes, at dir, a repository of gitBenchCommits commits
// (made with git fast-import, deterministic) and checks its head out.
func writeGitBenchRepo(dir string) error {
	var s bytes.Buffer
	content := func(f, c int) string {
		return fmt.Sprintf("// file %d, revision %d\npackage p%d\n\nconst V%d = %d\n", f, c, f%40, f, c)
	}
	for c := range gitBenchCommits {
		fmt.Fprintf(&s, "commit refs/heads/main\ncommitter B <b@example.com> %d +0000\ndata 11\ncommit %04d\n", 1700000000+c*60, c)
		for f := range gitBenchFiles {
			if c > 0 && (f*7+c)%(gitBenchFiles/gitBenchTouched) != 0 {
				continue
			}
			body := content(f, c)
			fmt.Fprintf(&s, "M 100644 inline d%02d/f%04d.go\ndata %d\n%s\n", f%40, f, len(body), body)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"fast-import", "--quiet"}, {"checkout", "-q", "-f", "main"}} {
		c := exec.Command("git", args...)
		c.Dir, c.Env = dir, append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		if args[0] == "fast-import" {
			c.Stdin = &s
		}
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", args[0], err, out)
		}
	}
	return nil
}

// NewLazyGitFixture builds what LazyGitTable needs: a capfs binary from this
// module and a private state and cache directory (not the C project and Go
// tree of NewLazyRunFixture). It needs FUSE, bwrap and git.
func NewLazyGitFixture() (*LazyRunFixture, error) {
	if err := fuseexport.Available(); err != nil {
		return nil, err
	}
	for _, tool := range []string{"bwrap", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is not installed", tool)
		}
	}
	root, err := os.MkdirTemp("", "capfs-bench-lazygit-")
	if err != nil {
		return nil, err
	}
	fx := &LazyRunFixture{Capfs: filepath.Join(root, "capfs"), root: root}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		fx.Close()
		return nil, err
	}
	build := exec.Command("go", "build", "-o", fx.Capfs, "./cmd/capfs")
	build.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := build.CombinedOutput(); err != nil {
		fx.Close()
		return nil, fmt.Errorf("go build capfs: %v: %s", err, out)
	}
	fx.env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(root, "state"), "CAPFS_CACHE_DIR="+filepath.Join(root, "cache"))
	return fx, nil
}

// LazyGitTable measures git reads (status, log -p, blame) on a generated
// repository (gitBenchFiles files, gitBenchCommits commits), each repeated
// reps times in one shell so that capfs's start-up is amortized: plain on
// the host, through `capfs run --lazy` (the .git scanned, from the cache
// after the warm-up round, and read through the FUSE layer) and through
// `capfs run --no-lazy` (checked out). count interleaved rounds after one
// warm-up; the median and the fastest are printed with their ratio to
// plain. The "true" rows are each mode's start-up and review, which the other
// rows include. The target: lazy within 1.3× of plain.
func LazyGitTable(out, progress io.Writer, fx *LazyRunFixture, count, reps int) error {
	if _, err := exec.LookPath("git"); err != nil {
		return fmt.Errorf("git is not installed")
	}
	repo := filepath.Join(fx.root, "gitrepo")
	if err := os.Mkdir(repo, 0o755); err != nil {
		return err
	}
	if err := writeGitBenchRepo(repo); err != nil {
		return err
	}
	fmt.Fprintf(out, "| git reads on %d files, %d commits, %d× per run (%d rounds) | median | / plain | fastest | / plain |\n|---|---:|---:|---:|---:|\n",
		gitBenchFiles, gitBenchCommits, reps, count)
	for _, cmd := range []string{"true", "git status --porcelain", "git log -p", "git blame d01/f0001.go"} {
		script := fmt.Sprintf("i=0; while [ $i -lt %d ]; do %s >/dev/null || exit 1; i=$((i+1)); done", reps, cmd)
		modes := []struct {
			name string
			argv []string
		}{
			{"plain", []string{"sh", "-c", script}},
			{"capfs run --lazy", []string{fx.Capfs, "run", "--lazy", "--", "sh", "-c", script}},
			{"capfs run --no-lazy", []string{fx.Capfs, "run", "--no-lazy", "--", "sh", "-c", script}},
		}
		samples := make([][]time.Duration, len(modes))
		for r := range count + 1 {
			for i, m := range modes {
				d, err := fx.timed(repo, m.argv...)
				if err != nil {
					return err
				}
				fmt.Fprintf(progress, "lazy git: round %d %-25s %-20s %v\n", r, cmd, m.name, d.Round(time.Millisecond))
				if r > 0 {
					samples[i] = append(samples[i], d)
				}
			}
		}
		base, baseMin := medianOf(samples[0]), slices.Min(samples[0])
		for i, m := range modes {
			d, dm := medianOf(samples[i]), slices.Min(samples[i])
			fmt.Fprintf(out, "| `%s`, %s | %s | %.2f× | %s | %.2f× |\n", cmd, m.name, fmtNs(float64(d)), float64(d)/float64(base), fmtNs(float64(dm)), float64(dm)/float64(baseMin))
		}
	}
	return nil
}
