package bench

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// CLIFixture is what the CLI workloads (issue 13's benchmark) run on: a git
// work tree holding a copy of $(go env GOROOT)/src (a local clone of GoSrcRepo: gitree cannot open a --shared clone, whose objects are found through alternates),
// with a set of uncommitted changes for the diff workload, and a capfs binary
// built from this module. capfs runs in the work tree with its default mounts
// (project = the work tree, ref/head = its HEAD) and its default audit log
// (under a private XDG_STATE_HOME), as a user would run it.
type CLIFixture struct {
	Dir   string // the work tree
	Capfs string // the capfs binary
	state string // XDG_STATE_HOME for capfs
	root  string // the temporary directory holding everything
	// Lines is what grep -rnIE finds for MCPPattern in the tree (the same
	// pattern as the MCP workloads); every grep implementation must find it.
	Lines int
	// Changed is the number of files git diff --stat --no-renames reports.
	Changed int
}

// CLIDiffEdits, CLIDiffRemoves and CLIDiffAdds are the uncommitted changes the
// diff workload compares: files with a line appended, files deleted, files added.
const (
	CLIDiffEdits   = 200
	CLIDiffRemoves = 20
	CLIDiffAdds    = 20
)

// NewCLIFixture clones the Go source fixture into a temporary work tree, makes
// the diff workload's changes, and builds capfs.
func NewCLIFixture() (*CLIFixture, error) {
	repo, _, err := GoSrcRepo()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "capfs-bench-cli-")
	if err != nil {
		return nil, err
	}
	fx := &CLIFixture{root: root, Dir: filepath.Join(root, "src"), Capfs: filepath.Join(root, "capfs"), state: filepath.Join(root, "state")}
	fail := func(err error) (*CLIFixture, error) {
		os.RemoveAll(root)
		return nil, err
	}
	if err := os.Mkdir(fx.state, 0o700); err != nil {
		return fail(err)
	}
	clone := exec.Command("git", "clone", "-q", repo, fx.Dir)
	clone.Env = GitEnv()
	if out, err := clone.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("git clone: %v: %s", err, out))
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
	// A work tree as users have it: its files older than its index. Right
	// after the clone they share the index's second ("racily clean"), which
	// makes git and capfs alike re-read every file.
	time.Sleep(1100 * time.Millisecond)
	if _, err := fx.git("update-index", "-q", "--refresh"); err != nil {
		return fail(err)
	}
	if err := fx.makeChanges(); err != nil {
		return fail(err)
	}
	lines, err := grepCLI(fx.Dir, "-rnIE")
	if err != nil {
		return fail(err)
	}
	fx.Lines = lines
	out, err := fx.git("diff", "--stat", "--no-renames")
	if err != nil {
		return fail(err)
	}
	fx.Changed = diffstatFiles(out)
	if want := CLIDiffEdits + CLIDiffRemoves + CLIDiffAdds; fx.Changed != want {
		return fail(fmt.Errorf("git diff --stat reports %d files, want %d", fx.Changed, want))
	}
	return fx, nil
}

// makeChanges edits, removes and adds .go files (in name order, so every run
// makes the same changes); the added files are staged as intent-to-add so git
// diff shows them.
func (fx *CLIFixture) makeChanges() error {
	var goFiles []string
	err := filepath.WalkDir(fx.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() && strings.HasSuffix(p, ".go") && !strings.Contains(p, "testdata") {
			goFiles = append(goFiles, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(goFiles)
	step := len(goFiles) / (CLIDiffEdits + CLIDiffRemoves)
	for i := 0; i < CLIDiffEdits+CLIDiffRemoves; i++ {
		p := goFiles[i*step]
		if i < CLIDiffEdits {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			_, err = f.WriteString("\n// edited by the capfs CLI benchmark\n")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		} else if err := os.Remove(p); err != nil {
			return err
		}
	}
	var added []string
	for i := 0; i < CLIDiffAdds; i++ {
		p := filepath.Join(fx.Dir, "capfsbench", fmt.Sprintf("added%02d.go", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("package capfsbench\n\n// File %d.\nconst N%d = %d\n", i, i, i)), 0o644); err != nil {
			return err
		}
		added = append(added, p)
	}
	_, err = fx.git(append([]string{"add", "-N"}, added...)...)
	return err
}

func (fx *CLIFixture) git(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = fx.Dir
	cmd.Env = GitEnv()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// Close removes the fixture.
func (fx *CLIFixture) Close() error { return os.RemoveAll(fx.root) }

// statFiles reads "N files changed" from a diffstat.
func diffstatFiles(out string) int {
	m := regexp.MustCompile(`(?m)^ (\d+) files? changed`).FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	n := 0
	fmt.Sscan(m[1], &n)
	return n
}

// CLIImpl is one way of doing a CLI workload: a command line run in the work
// tree, and a check of its output.
type CLIImpl struct {
	Name string
	Peer bool
	Argv func(fx *CLIFixture) []string
	// Check validates one run's standard output.
	Check func(fx *CLIFixture, out []byte) error
}

// CLIWorkload is one workload with its implementations, capfs's first.
type CLIWorkload struct {
	Name  string
	Impls []CLIImpl
}

// CLIWorkloads returns issue 13's CLI benchmark: capfs grep beside rg, git grep
// and grep -rn (the same pattern, the same tree, the same matching lines), and
// capfs diff --stat beside git diff --stat.
func CLIWorkloads() []CLIWorkload {
	lines := func(fx *CLIFixture, out []byte) error {
		if n := bytes.Count(out, []byte("\n")); n != fx.Lines {
			return fmt.Errorf("%d lines, grep -rnIE finds %d", n, fx.Lines)
		}
		return nil
	}
	stat := func(fx *CLIFixture, out []byte) error {
		if n := diffstatFiles(string(out)); n != fx.Changed {
			return fmt.Errorf("%d files changed, git diff --stat says %d", n, fx.Changed)
		}
		return nil
	}
	return []CLIWorkload{
		{Name: "grep -n " + MCPPattern, Impls: []CLIImpl{
			{Name: "capfs grep -n", Argv: func(fx *CLIFixture) []string { return []string{fx.Capfs, "grep", "-n", MCPPattern} }, Check: lines},
			{Name: "capfs grep -n --audit=off", Argv: func(fx *CLIFixture) []string {
				return []string{fx.Capfs, "--audit=off", "grep", "-n", MCPPattern}
			}, Check: lines},
			{Name: "rg -n", Peer: true, Argv: func(*CLIFixture) []string { return []string{"rg", "-n", MCPPattern} }, Check: lines},
			{Name: "git grep -n", Peer: true, Argv: func(*CLIFixture) []string { return []string{"git", "grep", "-nIE", MCPPattern} }, Check: lines},
			{Name: "grep -rnIE", Peer: true, Argv: func(*CLIFixture) []string { return []string{"grep", "-rnIE", MCPPattern, "."} }, Check: lines},
		}},
		{Name: fmt.Sprintf("diff --stat (%d edited, %d removed, %d added files)", CLIDiffEdits, CLIDiffRemoves, CLIDiffAdds), Impls: []CLIImpl{
			{Name: "capfs diff --stat ref/head project", Argv: func(fx *CLIFixture) []string {
				return []string{fx.Capfs, "diff", "--stat", "--no-renames", "ref/head", "project"}
			}, Check: stat},
			{Name: "git diff --stat", Peer: true, Argv: func(*CLIFixture) []string { return []string{"git", "diff", "--stat", "--no-renames"} }, Check: stat},
		}},
	}
}

// Run runs impl once in the fixture and returns its wall-clock time and the
// CPU time (user and system) it used.
func (fx *CLIFixture) Run(impl CLIImpl) (time.Duration, error) {
	d, _, err := fx.run(impl)
	return d, err
}

func (fx *CLIFixture) run(impl CLIImpl) (time.Duration, time.Duration, error) {
	argv := impl.Argv(fx)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = fx.Dir
	cmd.Env = append(GitEnv(), "XDG_STATE_HOME="+fx.state, "LC_ALL=C", "NO_COLOR=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, 0, fmt.Errorf("%s: %v: %s", impl.Name, err, errb.Bytes())
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if err := impl.Check(fx, out.Bytes()); err != nil {
		return d, cpu, fmt.Errorf("%s: %v", impl.Name, err)
	}
	return d, cpu, nil
}

// CLITable runs every CLI workload count times per implementation,
// interleaved (one run of each in turn, so load changes hit all alike), and
// writes a table of median wall-clock and CPU (user+system) times with capfs's
// ratio to each peer: on a loaded machine the CPU column is the steadier one.
func CLITable(out io.Writer, fx *CLIFixture, count int) error {
	median := func(ts []time.Duration) time.Duration {
		s := append([]time.Duration(nil), ts...)
		sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
		return s[len(s)/2]
	}
	for _, w := range CLIWorkloads() {
		wall := make([][]time.Duration, len(w.Impls))
		cpu := make([][]time.Duration, len(w.Impls))
		for range count {
			for i, im := range w.Impls {
				d, c, err := fx.run(im)
				if err != nil {
					return err
				}
				wall[i] = append(wall[i], d)
				cpu[i] = append(cpu[i], c)
			}
		}
		fmt.Fprintf(out, "\n%s (%d runs each, medians)\n", w.Name, count)
		fmt.Fprintf(out, "| %-36s | %9s | %9s | %-18s | %-18s |\n", "implementation", "wall", "cpu", "capfs / peer, wall", "capfs / peer, cpu")
		fmt.Fprintf(out, "|%s|%s|%s|%s|%s|\n", strings.Repeat("-", 38), strings.Repeat("-", 11), strings.Repeat("-", 11), strings.Repeat("-", 20), strings.Repeat("-", 20))
		w0, c0 := median(wall[0]), median(cpu[0])
		for i, im := range w.Impls {
			mw, mc := median(wall[i]), median(cpu[i])
			rw, rc := "", ""
			if im.Peer {
				rw = fmt.Sprintf("%.2fx", float64(w0)/float64(mw))
				rc = fmt.Sprintf("%.2fx", float64(c0)/float64(mc))
			}
			fmt.Fprintf(out, "| %-36s | %9s | %9s | %-18s | %-18s |\n", im.Name, mw.Round(time.Millisecond), mc.Round(time.Millisecond), rw, rc)
		}
	}
	return nil
}
