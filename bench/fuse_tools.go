//go:build linux

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/fuseexport"
	"github.com/capfs/capfs/materialize/run"
	"github.com/capfs/capfs/policy"
)

// Real tools on a host directory, on a capfs mount of it and in the lazy
// layer over it (issue 29 item 6: FUSEToolsTable).

// The shape of FUSEToolsTable's tree: ToolsDirs directories of
// ToolsFilesPerDir files of toolsFileSize bytes.
const (
	ToolsDirs        = 200
	ToolsFilesPerDir = 100
	ToolsFiles       = ToolsDirs * ToolsFilesPerDir
	toolsFileSize    = 1 << 10
	// toolsLoopOps is how many stats, and opens and reads, a loop row makes.
	toolsLoopOps = 5000
)

// ToolsFixture is what FUSEToolsTable runs on.
//
// Root is the host directory each target serves: a git work tree (as a
// run's project is) of ShallowFile (4 KiB) and src, ToolsFiles files; its
// history is one commit in one pack, and its index is fresh. Tar, outside
// Root, is a tar of src.
type ToolsFixture struct {
	Root, Tar string
	base      string
}

// NewToolsFixture builds the fixture. It needs git and tar.
func NewToolsFixture() (*ToolsFixture, error) {
	for _, tool := range []string{"git", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is not installed", tool)
		}
	}
	base, err := os.MkdirTemp("", "capfs-bench-tools-")
	if err != nil {
		return nil, err
	}
	fx := &ToolsFixture{Root: filepath.Join(base, "host"), Tar: filepath.Join(base, "tree.tar"), base: base}
	if err := fx.build(); err != nil {
		fx.Close()
		return nil, err
	}
	return fx, nil
}

// build writes the fixture's files.
func (fx *ToolsFixture) build() error {
	if err := os.MkdirAll(fx.Root, 0o755); err != nil {
		return err
	}
	if err := writeToolsRepo(fx.Root); err != nil {
		return err
	}
	if b, err := exec.Command("tar", "-cf", fx.Tar, "-C", filepath.Join(fx.Root, "src"), ".").CombinedOutput(); err != nil {
		return fmt.Errorf("tar c: %v: %s", err, b)
	}
	// Files older than the lazy layer's racy window, and an index written
	// a second after them (git status rewrites it), which every target sees
	// clean: git status then reads no file.
	time.Sleep(1100 * time.Millisecond)
	return runGit(filepath.Join(fx.Root, ".git"), fx.Root, "status", "--porcelain")
}

// writeToolsRepo makes, at dir, a repository of one commit (written by git
// fast-import into one pack) and checks it out: ShallowFile, and src holding
// ToolsDirs directories of ToolsFilesPerDir files.
func writeToolsRepo(dir string) error {
	var s bytes.Buffer
	fmt.Fprintf(&s, "commit refs/heads/main\ncommitter B <b@example.com> 1700000000 +0000\ndata 4\ntree\n")
	fmt.Fprintf(&s, "M 100644 inline %s\ndata %d\n%s\n", ShallowFile, len(fileData), fileData)
	for d := range ToolsDirs {
		for f := range ToolsFilesPerDir {
			line := fmt.Sprintf("// d%03d/f%03d.go\n", d, f)
			body := strings.Repeat(line, toolsFileSize/len(line)+1)[:toolsFileSize]
			fmt.Fprintf(&s, "M 100644 inline src/d%03d/f%03d.go\ndata %d\n%s\n", d, f, len(body), body)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"fast-import", "--quiet"}, {"checkout", "-q", "-f", "main"}} {
		c := exec.Command("git", args...)
		c.Dir, c.Env = dir, GitEnv()
		if args[0] == "fast-import" {
			c.Stdin = &s
		}
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", args[0], err, out)
		}
	}
	return nil
}

// Close removes the fixture.
func (fx *ToolsFixture) Close() error { return os.RemoveAll(fx.base) }

// toolsTarget is one side of FUSEToolsTable: open serves the fixture's Root
// and returns the directory the tools run in and how to stop serving it.
type toolsTarget struct {
	name string
	open func(fx *ToolsFixture) (string, func() error, error)
}

// toolsTargets are the host directory; `capfs mount` of a Dir with
// policy.Defaults() over the physical backend on it (FUSEImpls' mount: the
// options capfs mount passes by default, one-second caches); and the lazy
// layer a `capfs run` gives its command (run.StartLazy: an overlay of that
// Dir with a fresh upper under run.LazyBase, mounted with passthrough and
// READDIRPLUS, the view's policy mirroring the source's and showing .git,
// GOMAXPROCS narrowed as in a run).
func toolsTargets() []toolsTarget {
	host := func(fx *ToolsFixture) (string, func() error, error) {
		return fx.Root, func() error { return nil }, nil
	}
	mount := func(fx *ToolsFixture) (string, func() error, error) {
		for _, im := range FUSEImpls() {
			if im.Name == FUSEMountDefault {
				t, err := im.New(fx.Root)
				if err != nil {
					return "", nil, err
				}
				return t.(*fuseTarget).root, t.Close, nil
			}
		}
		return "", nil, errors.New("no " + FUSEMountDefault)
	}
	lazy := func(fx *ToolsFixture) (string, func() error, error) {
		pb, err := physical.New(fx.Root)
		if err != nil {
			return "", nil, err
		}
		work, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
		view := run.ViewPolicy{Inner: policy.Defaults(), Git: &run.GitView{Shown: true}}
		lw, err := run.StartLazy(context.Background(), work, run.LazyOptions{View: view, MountDir: fx.base, NarrowProcs: true})
		if err != nil {
			pb.Close()
			return "", nil, err
		}
		return lw.Mountpoint, func() error { return errors.Join(lw.Close(), pb.Close()) }, nil
	}
	return []toolsTarget{{"host directory", host}, {"capfs mount", mount}, {"lazy layer", lazy}}
}

// toolsWorkload is one row of FUSEToolsTable. run does the row's work in
// root, a target's directory, and returns its time: a tool's wall time, or a
// loop's time per operation. mountMax and lazyMax are the targets (time /
// host time); zero is none. needs names a tool that may be missing (the row
// is then skipped).
type toolsWorkload struct {
	name              string
	mountMax, lazyMax float64
	run               func(fx *ToolsFixture, root string) (time.Duration, error)
	needs             string
}

// toolsWorkloads are FUSEToolsTable's rows, in the order they run on each
// target: each leaves what the next needs (tar x the tree rm -rf removes;
// git status runs before either leaves an untracked tree).
func toolsWorkloads() []toolsWorkload {
	return []toolsWorkload{
		{"`git status --porcelain`", 2, 1.5, warm(".", "sh", "-c", `out=$(git status --porcelain) && [ -z "$out" ] || { echo "$out" | head; exit 1; }`), ""},
		{"`find . -type f \\| wc -l`", 2, 1.5, warm("src", "sh", "-c", fmt.Sprintf(`n=$(find . -type f | wc -l); [ "$n" -eq %d ] || { echo "$n files"; exit 1; }`, ToolsFiles)), ""},
		{"`du -s`", 2, 1.5, warm("src", "du", "-s"), ""},
		{"`tar x` of the tree into an empty directory", 2, 1.5, func(fx *ToolsFixture, root string) (time.Duration, error) {
			if err := os.Mkdir(filepath.Join(root, "x"), 0o755); err != nil {
				return 0, err
			}
			d, err := tool(root, "tar", "-xf", fx.Tar, "-C", "x")
			return d, errors.Join(err, exists(root, "x/d199/f099.go"))
		}, ""},
		{"`rsync -a src/ r/` into an empty directory", 0, 0, func(fx *ToolsFixture, root string) (time.Duration, error) {
			d, err := tool(root, "rsync", "-a", "src/", "r/")
			return d, errors.Join(err, exists(root, "r/d199/f099.go"))
		}, "rsync"},
		{"`rsync -a src/ r/` again (no-op)", 2, 1.5, func(fx *ToolsFixture, root string) (time.Duration, error) {
			return tool(root, "rsync", "-a", "src/", "r/")
		}, "rsync"},
		{"`rm -rf` of the extracted tree", 2, 1.5, func(fx *ToolsFixture, root string) (time.Duration, error) {
			d, err := tool(root, "rm", "-rf", "x")
			if _, serr := os.Lstat(filepath.Join(root, "x")); err == nil && serr == nil {
				err = errors.New("rm -rf x left x")
			}
			return d, err
		}, ""},
		{fmt.Sprintf("warm `stat` of one file (Go loop of %d, per op)", toolsLoopOps), 1.5, 1.5, statOps, ""},
		{fmt.Sprintf("warm open+read 4 KiB+close (Go loop of %d, per op)", toolsLoopOps), 1.5, 1.5, readOps, ""},
	}
}

// tool runs argv in dir and returns its wall time (fork and exec included).
//
// env -C enters dir, not the child Go forks: this process serves the
// mounts, and with the lazy layer's GOMAXPROCS of one the thread that forks
// holds the only P until the child execs, so a chdir into the mount before
// the exec would wait for an answer nobody can send.
func tool(dir string, argv ...string) (time.Duration, error) {
	return (&LazyRunFixture{env: GitEnv()}).timed("", append([]string{"env", "-C", dir}, argv...)...)
}

// warm runs argv in root/sub once untimed (caches warm, as a tool run
// again finds them), then times it.
func warm(sub string, argv ...string) func(*ToolsFixture, string) (time.Duration, error) {
	return func(_ *ToolsFixture, root string) (time.Duration, error) {
		if _, err := tool(filepath.Join(root, sub), argv...); err != nil {
			return 0, err
		}
		return tool(filepath.Join(root, sub), argv...)
	}
}

// exists says whether root/name exists.
func exists(root, name string) error {
	_, err := os.Lstat(filepath.Join(root, name))
	return err
}

// statOps stats ShallowFile toolsLoopOps times, after one untimed stat, and
// returns the time per stat.
func statOps(_ *ToolsFixture, root string) (time.Duration, error) {
	t := osTarget{root: root}
	op := func() error {
		if size, err := t.Stat(ShallowFile); size != FileSize || err != nil {
			return fmt.Errorf("stat %s: %d bytes, %v", ShallowFile, size, err)
		}
		return nil
	}
	return loopOps(op)
}

// readOps opens, reads and closes ShallowFile toolsLoopOps times, after one
// untimed read, and returns the time per read.
func readOps(_ *ToolsFixture, root string) (time.Duration, error) {
	t, buf := osTarget{root: root}, make([]byte, FileSize+1)
	op := func() error {
		if n, err := readOnce(t, ShallowFile, buf); n != FileSize || err != nil {
			return fmt.Errorf("read %s: %d bytes, %v", ShallowFile, n, err)
		}
		return nil
	}
	return loopOps(op)
}

// loopOps runs op once untimed, then toolsLoopOps times, and returns the
// time per op. The loop has a P of its own (GOMAXPROCS one more while it
// runs), as a process would have its CPU: the server keeps the Ps it was
// given, and no request waits for the runtime to take back a P a blocked
// stat holds.
func loopOps(op func() error) (time.Duration, error) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1))
	if err := op(); err != nil {
		return 0, err
	}
	start := time.Now()
	for range toolsLoopOps {
		if err := op(); err != nil {
			return 0, err
		}
	}
	return time.Since(start) / toolsLoopOps, nil
}

// cleanToolsRound removes what a round left in the host directory (the
// rsync'd tree; the extracted one if rm -rf failed), untimed.
func cleanToolsRound(fx *ToolsFixture) error {
	return errors.Join(os.RemoveAll(filepath.Join(fx.Root, "x")), os.RemoveAll(filepath.Join(fx.Root, "r")))
}

// toolsRound runs every workload once on t, in order, and adds each time to
// mins[workload] when it is the lowest yet.
func toolsRound(fx *ToolsFixture, t toolsTarget, ws []toolsWorkload, mins []time.Duration, progress io.Writer, round int) error {
	root, stop, err := t.open(fx)
	if err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	for i, w := range ws {
		d, werr := w.run(fx, root)
		if werr != nil {
			err = fmt.Errorf("%s on the %s: %w", w.name, t.name, werr)
			break
		}
		fmt.Fprintf(progress, "fuse tools: round %d %-15s %-60s %v\n", round, t.name, w.name, d)
		if mins[i] == 0 || d < mins[i] {
			mins[i] = d
		}
	}
	return errors.Join(err, stop(), cleanToolsRound(fx))
}

// FUSEToolsTable times real tools on fx's tree (ToolsFiles files) on three
// targets: the host directory, a `capfs mount` of it and the lazy layer over
// it (see toolsTargets). Each tool is a process of its own, timed by its
// wall time (fork and exec included); the stat and read rows are Go loops
// in this process, timed per operation. count interleaved rounds (each
// target in turn: load from elsewhere hits them alike) and the fastest of
// each is kept. It writes one Markdown table: each target's time, its ratio
// to the host directory, the target and whether it is met. It needs
// FUSE; it fails if a tool does not do its job (a count, a clean
// status, a file extracted). A row whose tool is not installed (rsync) is
// skipped, saying so.
func FUSEToolsTable(out, progress io.Writer, fx *ToolsFixture, count int) error {
	if err := fuseexport.Available(); err != nil {
		return err
	}
	targets, ws, skipped := toolsTargets(), toolsWorkloads(), []string(nil)
	ws = slices.DeleteFunc(ws, func(w toolsWorkload) bool {
		if _, err := exec.LookPath(w.needs); w.needs != "" && err != nil {
			skipped = append(skipped, fmt.Sprintf("| %s | skipped: %s is not installed | | | | | %s | |\n", w.name, w.needs, toolsGoal(w)))
			return true
		}
		return false
	})
	mins := make([][]time.Duration, len(targets))
	for i := range targets {
		mins[i] = make([]time.Duration, len(ws))
	}
	for r := range count {
		for i, t := range targets {
			if err := toolsRound(fx, t, ws, mins[i], progress, r+1); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(out, "| %d files in %d directories (fastest of %d rounds) | host directory | capfs mount | / host | lazy layer | / host | target (/ host) | met? |\n|---|---:|---:|---:|---:|---:|---|---|\n",
		ToolsFiles, ToolsDirs, count)
	for j, w := range ws {
		h, m, l := mins[0][j], mins[1][j], mins[2][j]
		rm, rl := float64(m)/float64(h), float64(l)/float64(h)
		fmt.Fprintf(out, "| %s | %s | %s | %.1f× | %s | %.1f× | %s | %s |\n", w.name, fmtNs(float64(h)), fmtNs(float64(m)), rm, fmtNs(float64(l)), rl,
			toolsGoal(w), toolsMet(w, rm, rl))
	}
	for _, row := range skipped {
		fmt.Fprint(out, row)
	}
	return nil
}

// toolsGoal is w's target as the table prints it.
func toolsGoal(w toolsWorkload) string {
	if w.mountMax == 0 {
		return "none"
	}
	return fmt.Sprintf("mount ≤ %g×, lazy ≤ %g×", w.mountMax, w.lazyMax)
}

// toolsMet says which of w's targets the ratios meet.
func toolsMet(w toolsWorkload, mount, lazy float64) string {
	if w.mountMax == 0 {
		return ""
	}
	word := func(r, max float64) string {
		if r <= max {
			return "met"
		}
		return "missed"
	}
	return "mount " + word(mount, w.mountMax) + ", lazy " + word(lazy, w.lazyMax)
}
