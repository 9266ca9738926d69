//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/capfs/capfs/fuseexport"
)

// End-to-end tests of capfs run's review flow, capfs sync, signals, the
// terminal, the build caches and --rev, each running the binary as a
// subprocess.

// detachMountsUnder detaches the dead FUSE mounts under dir: what a lazy
// run killed by a failing test (SIGKILL) leaves in its state directory,
// which could not be removed otherwise and would outlive the test.
func detachMountsUnder(t *testing.T, dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasPrefix(f[4], dir+"/") {
			continue
		}
		if err := fuseexport.ClearStale(f[4]); err != nil {
			t.Logf("a mount left under the test's state directory: %v", err)
		}
	}
}

var keptIDRe = regexp.MustCompile(`\(id ([0-9]+)\)`)

// keptIDOf returns the id run printed for a kept checkout.
func keptIDOf(t *testing.T, stderr string) string {
	t.Helper()
	m := keptIDRe.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no kept checkout id in:\n%s", stderr)
	}
	return m[1]
}

func checkouts(t *testing.T, base string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(base, "capfs-checkout-*"))
	return m
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestRunSyncNeverThenSync: --sync=never applies nothing and keeps the
// checkout; capfs sync --diff shows it, --dry-run lists it, capfs sync ID
// applies it and removes the checkout and its record.
func TestRunSyncNeverThenSync(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "old\n"})
	env, base := stateEnv(t)
	r := runCapfsEnv(t, root, env, "run", "--sync=never", "--", "sh", "-c", "echo new > a.txt; echo made > b.txt").want(t, 0)
	if got := readFile(t, filepath.Join(root, "a.txt")); got != "old\n" {
		t.Errorf("a.txt = %q after --sync=never", got)
	}
	for _, want := range []string{"not applied (--sync=never) in project: 1 added, 1 modified", "  M project/a.txt  4 B\n", "  A project/b.txt  5 B\n", "capfs sync --diff "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	id := keptIDOf(t, r.stderr)
	if k := checkouts(t, base); len(k) != 1 || !strings.HasSuffix(k[0], id) {
		t.Fatalf("kept checkouts %v, id %s", k, id)
	}
	l := runCapfsEnv(t, root, env, "sync", "--list").want(t, 0)
	if !strings.Contains(l.stdout, id+"  ") || !strings.Contains(l.stdout, "echo new") {
		t.Errorf("sync --list:\n%s", l.stdout)
	}
	d := runCapfsEnv(t, root, env, "sync", "--diff", id).want(t, 0)
	for _, want := range []string{"diff --git a/a.txt b/a.txt", "-old\n+new\n", "new file mode 100644", "+made\n"} {
		if !strings.Contains(d.stdout, want) {
			t.Errorf("sync --diff lacks %q:\n%s", want, d.stdout)
		}
	}
	runCapfsEnv(t, root, env, "sync", "--dry-run", id).want(t, 0)
	if got := readFile(t, filepath.Join(root, "a.txt")); got != "old\n" {
		t.Errorf("a.txt = %q after sync --dry-run", got)
	}
	s := runCapfsEnv(t, root, env, "sync").want(t, 0) // the one kept checkout of project
	if !strings.Contains(s.stderr, "capfs: sync: applied in project: 1 added, 1 modified") || !strings.Contains(s.stderr, "is removed") {
		t.Errorf("sync:\n%s", s.stderr)
	}
	if readFile(t, filepath.Join(root, "a.txt")) != "new\n" || readFile(t, filepath.Join(root, "b.txt")) != "made\n" {
		t.Errorf("sync did not apply the changes")
	}
	if k := checkouts(t, base); len(k) != 0 {
		t.Errorf("checkouts left after sync: %v", k)
	}
	runCapfsEnv(t, root, env, "sync", id).want(t, exitUsage) // its record is gone
}

// TestRunSyncLaterConflict: a kept checkout whose path the source changed in
// the meantime is a conflict at capfs sync; the rest is applied and the
// checkout stays for another try.
func TestRunSyncLaterConflict(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "old\n"})
	env, base := stateEnv(t)
	r := runCapfsEnv(t, root, env, "run", "--sync=never", "--", "sh", "-c", "echo ours > a.txt; echo x > b.txt").want(t, 0)
	id := keptIDOf(t, r.stderr)
	writeTree(t, root, map[string]string{"a.txt": "theirs\n"})
	s := runCapfsEnv(t, root, env, "sync", id).want(t, exitSyncBack)
	if !strings.Contains(s.stderr, "conflict: project/a.txt") || readFile(t, filepath.Join(root, "b.txt")) != "x\n" || readFile(t, filepath.Join(root, "a.txt")) != "theirs\n" {
		t.Errorf("sync with a conflict:\n%s", s.stderr)
	}
	if len(checkouts(t, base)) != 1 {
		t.Fatalf("the checkout was not kept for another try")
	}
	runCapfsEnv(t, root, env, "sync", "--conflict", "ours", id).want(t, 0)
	if readFile(t, filepath.Join(root, "a.txt")) != "ours\n" || len(checkouts(t, base)) != 0 {
		t.Errorf("sync --conflict ours: a.txt %q, checkouts %v", readFile(t, filepath.Join(root, "a.txt")), checkouts(t, base))
	}
}

// TestRunDryRunAndDiscard: --dry-run applies and keeps nothing; --keep keeps
// the checkout even after applying, and capfs sync --discard removes it.
func TestRunDryRunAndDiscard(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "old\n"})
	env, base := stateEnv(t)
	r := runCapfsEnv(t, root, env, "run", "--dry-run", "--", "sh", "-c", "echo new > a.txt").want(t, 0)
	if !strings.Contains(r.stderr, "would apply (--dry-run) in project: 1 modified") || !strings.Contains(r.stderr, "discarded") {
		t.Errorf("dry run:\n%s", r.stderr)
	}
	if readFile(t, filepath.Join(root, "a.txt")) != "old\n" || len(checkouts(t, base)) != 0 {
		t.Errorf("--dry-run changed something")
	}
	r = runCapfsEnv(t, root, env, "run", "--keep", "--", "sh", "-c", "echo new > a.txt").want(t, 0)
	id := keptIDOf(t, r.stderr)
	if readFile(t, filepath.Join(root, "a.txt")) != "new\n" || len(checkouts(t, base)) != 1 {
		t.Fatalf("--keep: a.txt %q, checkouts %v", readFile(t, filepath.Join(root, "a.txt")), checkouts(t, base))
	}
	runCapfsEnv(t, root, env, "sync", "--discard", id).want(t, 0)
	if len(checkouts(t, base)) != 0 {
		t.Errorf("--discard left %v", checkouts(t, base))
	}
	// With no terminal, --sync=ask applies nothing, keeps the changes and
	// exits 3 (a change left unapplied), as README says.
	r = runCapfsEnv(t, root, env, "run", "--sync=ask", "--", "sh", "-c", "echo newer > a.txt").want(t, exitSyncBack)
	if !strings.Contains(r.stderr, "needs a terminal") || readFile(t, filepath.Join(root, "a.txt")) != "new\n" || len(checkouts(t, base)) != 1 {
		t.Errorf("--sync=ask without a terminal:\n%s", r.stderr)
	}
	// Another kept checkout mentions the earlier one.
	r = runCapfsEnv(t, root, env, "run", "--sync=never", "--", "sh", "-c", "echo newest > a.txt").want(t, 0)
	if !strings.Contains(r.stderr, "1 earlier kept checkout(s) of project: capfs sync --list") {
		t.Errorf("the earlier kept checkout is not mentioned:\n%s", r.stderr)
	}
	runCapfsEnv(t, root, env, "sync", "--discard", "--all").want(t, 0)
	if len(checkouts(t, base)) != 0 {
		t.Errorf("--discard --all left %v", checkouts(t, base))
	}
}

// TestRunRefusedKeptForInspection: a refused change does not stop the others
// (--on-reject apply-rest, the default); the refused file stays in the kept
// checkout, and the summary says how to look at it.
func TestRunRefusedKeptForInspection(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "a\n"})
	env, base := stateEnv(t)
	r := runCapfsEnv(t, root, env, "run", "--no-lazy", "--", "sh", "-c", "echo legit > a.txt; echo evil > .bashrc").want(t, exitSyncBack)
	if readFile(t, filepath.Join(root, "a.txt")) != "legit\n" {
		t.Errorf("the legitimate change was not applied:\n%s", r.stderr)
	}
	if _, err := os.Lstat(filepath.Join(root, ".bashrc")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf(".bashrc reached the project")
	}
	id := keptIDOf(t, r.stderr)
	for _, want := range []string{"capfs: refused: added project/.bashrc", "capfs sync --diff " + id} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	k := checkouts(t, base)
	if len(k) != 1 || readFile(t, filepath.Join(k[0], ".bashrc")) != "evil\n" {
		t.Fatalf("the refused file is not in the kept checkout %v", k)
	}
	d := runCapfsEnv(t, root, env, "sync", "--diff", id).want(t, 0)
	if !strings.Contains(d.stdout, "+evil") || strings.Contains(d.stdout, "a.txt") {
		t.Errorf("sync --diff after apply-rest shows:\n%s", d.stdout)
	}
}

// TestRunCompactSummary: many changes are summarised by directory, with the
// first --show paths; --json lists every one.
func TestRunCompactSummary(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"keep.txt": "k\n"})
	script := "mkdir -p gen/a gen/b && for i in $(seq 1 150); do echo $i > gen/a/f$i; done && for i in $(seq 1 30); do echo $i > gen/b/g$i; done"
	r := runCapfs(t, root, "run", "--", "sh", "-c", script).want(t, 0)
	for _, want := range []string{"applied in project: 183 added", "    project/gen/a/: 150 added", "    project/gen/b/: 30 added", "  ... and 173 more"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if n := strings.Count(r.stderr, "\n  A "); n != 10 {
		t.Errorf("%d paths listed, want 10:\n%s", n, r.stderr)
	}
	r = runCapfs(t, root, "run", "--json", "--", "sh", "-c", "rm -r gen; echo z > z.txt").want(t, 0)
	var sum struct {
		Result  string         `json:"result"`
		Counts  map[string]int `json:"counts"`
		Changes []struct{ Kind, Path string }
	}
	line := r.stderr[strings.Index(r.stderr, "{"):]
	line = line[:strings.Index(line, "\n")]
	if err := json.Unmarshal([]byte(line), &sum); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stderr)
	}
	if sum.Result != "applied" || sum.Counts["deleted"] != 183 || sum.Counts["added"] != 1 || len(sum.Changes) != 184 {
		t.Errorf("--json summary: %+v", sum)
	}
}

// TestRunLimitFlags: the sync's limits are flags.
func TestRunLimitFlags(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	env, _ := stateEnv(t)
	r := runCapfsEnv(t, root, env, "run", "--max-files", "2", "--", "sh", "-c", "touch a b c").want(t, exitSyncBack)
	if !strings.Contains(r.stderr, "quota_exceeded") {
		t.Errorf("--max-files 2:\n%s", r.stderr)
	}
	r = runCapfsEnv(t, root, env, "run", "--max-file-size", "1K", "--", "sh", "-c", "head -c 2000 /dev/zero > big; echo s > small").want(t, exitSyncBack)
	if !strings.Contains(r.stderr, "refused: added project/big") || readFile(t, filepath.Join(root, "small")) != "s\n" {
		t.Errorf("--max-file-size 1K:\n%s", r.stderr)
	}
	runCapfsEnv(t, root, env, "run", "--max-bytes", "100", "--", "sh", "-c", "head -c 2000 /dev/zero > big2").want(t, exitSyncBack)
	runCapfsEnv(t, root, env, "run", "--max-depth", "2", "--", "sh", "-c", "mkdir -p x/y/z && touch x/y/z/f").want(t, exitSyncBack)
}

// signalRun starts `capfs run` on a command that makes a change, says it is
// ready, and waits; it returns the process and its stderr once ready.
func signalRun(t *testing.T, root string, env []string, base string, extra ...string) (*exec.Cmd, *bytes.Buffer, chan error) {
	t.Helper()
	args := append([]string{"run"}, extra...)
	args = append(args, "--", "sh", "-c", "echo new > out.txt; touch ready; while :; do sleep 0.05; done")
	cmd := exec.Command(capfsBinary(t), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		if m, _ := filepath.Glob(filepath.Join(base, "*", "ready")); len(m) == 1 {
			return cmd, &stderr, done
		}
		select {
		case err := <-done:
			t.Fatalf("capfs exited early: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func exitOf(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if err == nil {
		return 0
	}
	if !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return ee.ExitCode()
}

// TestRunSignalsNoLeak: SIGTERM, SIGHUP and SIGINT reach the command, capfs
// waits for it, reports, syncs nothing and removes the checkout (keeps it
// under --keep); the exit status is the command's (128+N).
func TestRunSignalsNoLeak(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	for _, tc := range []struct {
		sig  syscall.Signal
		name string
		keep bool
	}{{syscall.SIGTERM, "SIGTERM", false}, {syscall.SIGHUP, "SIGHUP", false}, {syscall.SIGINT, "SIGINT", false}, {syscall.SIGTERM, "SIGTERM", true}} {
		t.Run(fmt.Sprintf("%s keep=%v", tc.name, tc.keep), func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			env, base := stateEnv(t)
			var extra []string
			if tc.keep {
				extra = []string{"--keep"}
			}
			cmd, stderr, done := signalRun(t, root, env, base, extra...)
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			code := exitOf(t, <-done)
			if code != 128+int(tc.sig) {
				t.Errorf("exit %d, want %d\n%s", code, 128+int(tc.sig), stderr)
			}
			if !strings.Contains(stderr.String(), "interrupted by "+tc.name+": nothing synced back") {
				t.Errorf("stderr:\n%s", stderr)
			}
			if _, err := os.Lstat(filepath.Join(root, "out.txt")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("out.txt was synced back after %s", tc.name)
			}
			k := checkouts(t, base)
			if tc.keep != (len(k) == 1) || len(k) > 1 {
				t.Errorf("checkouts left %v (keep %v)", k, tc.keep)
			}
			if tc.keep && readFile(t, filepath.Join(k[0], "out.txt")) != "new\n" {
				t.Errorf("the kept checkout lacks the command's file")
			}
		})
	}
}

// TestRunClosedPipeNoLeak: `capfs run -- CMD 2>&1 | head -1`: the command dies
// of SIGPIPE, capfs's messages go nowhere, and no checkout is left behind
// that nobody was told of.
func TestRunClosedPipeNoLeak(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	env, base := stateEnv(t)
	cmd := exec.Command(capfsBinary(t), "run", "--", "sh", "-c", "echo x > f; yes")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	buf := make([]byte, 2)
	if _, err := io.ReadFull(pr, buf); err != nil {
		t.Fatal(err)
	}
	pr.Close() // as head does after its first line
	code := exitOf(t, cmd.Wait())
	if code != 128+int(syscall.SIGPIPE) {
		t.Errorf("exit %d, want %d (the command's death by SIGPIPE)", code, 128+int(syscall.SIGPIPE))
	}
	if k := checkouts(t, base); len(k) != 0 {
		t.Errorf("checkouts left behind: %v", k)
	}
}

// ptyRun runs capfs under a pseudo-terminal (as from an interactive shell)
// and lets the test type into it.
type ptyRun struct {
	t    *testing.T
	cmd  *exec.Cmd
	ptmx *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

func startPty(t *testing.T, root string, env []string, args ...string) *ptyRun {
	t.Helper()
	cmd := exec.Command(capfsBinary(t), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), append([]string{"TERM=dumb"}, env...)...)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	p := &ptyRun{t: t, cmd: cmd, ptmx: ptmx, done: make(chan error, 1)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		ptmx.Close()
	})
	return p
}

// expect waits until the output holds s (from the whole output so far).
func (p *ptyRun) expect(s string) {
	p.t.Helper()
	p.expectCount(s, 1)
}

// expectCount waits until s shows n times in the terminal output (within 20
// seconds).
func (p *ptyRun) expectCount(s string, n int) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		ok := strings.Count(p.out.String(), s) >= n
		p.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.t.Fatalf("no %q (%d times) in the terminal output:\n%s", s, n, p.out.String())
}

// expectAsking sends ask every half second until s is in the terminal
// output (within 20 seconds): for what a shell reports only when asked, once
// it has happened (a killed job's end).
func (p *ptyRun) expectAsking(ask, s string) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		p.send(ask)
		for range 25 {
			p.mu.Lock()
			ok := strings.Contains(p.out.String(), s)
			p.mu.Unlock()
			if ok {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.t.Fatalf("no %q in the terminal output:\n%s", s, p.out.String())
}

func (p *ptyRun) send(s string) {
	p.t.Helper()
	if _, err := p.ptmx.Write([]byte(s)); err != nil {
		p.t.Fatal(err)
	}
}

func (p *ptyRun) wait() int {
	p.t.Helper()
	select {
	case err := <-p.done:
		return exitOf(p.t, err)
	case <-time.After(30 * time.Second):
		p.mu.Lock()
		defer p.mu.Unlock()
		p.t.Fatalf("capfs did not exit:\n%s", p.out.String())
	}
	return -1
}

// TestRunBashUnderPty: `capfs run -- bash` on a terminal gets a terminal of its
// own: Ctrl-C stops the foreground job, not the session; Ctrl-Z stops a job
// that bash can then resume; the window size follows capfs's; capfs exits when
// bash does, with its status, and syncs back what bash made.
func TestRunBashUnderPty(t *testing.T) {
	needSandbox(t)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found")
	}
	t.Parallel()
	root := t.TempDir()
	env, base := stateEnv(t)
	p := startPty(t, root, env, "run", "--sync=always", "--", "bash", "--norc", "--noprofile", "-i")
	p.expect("$ ")
	p.send("test -t 0 && echo is-a-$((1+1))-tty; stty size\n")
	p.expect("is-a-2-tty")
	p.expect("30 100")
	// Each job says it has started from inside its own process: bash puts a
	// job in its own process group, and in the terminal's foreground, before
	// the job runs anything, so once it speaks a key goes to it (a fixed pause
	// instead raced the fork under load).
	p.send("(echo started-$((2+6)); exec sleep 60)\n")
	p.expect("started-8")
	p.send("\x03") // Ctrl-C: the sleep, not bash, and not capfs
	p.send("echo after-sleep-$?\n")
	p.expect("after-sleep-130")
	if err := pty.Setsize(p.ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	p.send("stty size\n")
	p.expect("40 120")
	p.send("(echo started-$((3+4)); exec sleep 60)\n")
	p.expect("started-7")
	p.send("\x1a") // Ctrl-Z: bash stops the job
	p.expect("Stopped")
	// The stopped job comes back to the foreground and a Ctrl-C ends it: bash
	// reports its status. (Killing it in the background raced under load: a job
	// stopped before it exec'd its command could still ignore SIGTERM, and one
	// continued in the background stopped again on taking the terminal.)
	// bash prints the job as it resumes it ("( echo ...; exec sleep 60 )", a
	// second time after the Stopped line); a Ctrl-C is sent until the job's
	// status shows.
	p.send("fg\n")
	p.expectCount("exec sleep 60 )", 2)
	p.expectAsking("\x03echo after-fg-$?\n", "after-fg-130")
	p.send("echo made > made.txt; echo bye-$((2+3)); exit 4\n")
	p.expect("bye-5")
	if code := p.wait(); code != 4 {
		t.Errorf("exit %d, want bash's 4", code)
	}
	if readFile(t, filepath.Join(root, "made.txt")) != "made\n" {
		t.Errorf("made.txt not synced back:\n%s", p.out.String())
	}
	if k := checkouts(t, base); len(k) != 0 {
		t.Errorf("checkouts left: %v", k)
	}
}

// TestRunAskUnderPty: --sync=ask on a terminal shows the summary, a diff on
// demand, and applies on "y".
func TestRunAskUnderPty(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "old\n"})
	env, base := stateEnv(t)
	env = append(env, "PAGER=cat")
	p := startPty(t, root, env, "run", "--sync=ask", "--", "sh", "-c", "echo new > a.txt")
	p.expect("apply 1 change(s) to project? ")
	p.send("d\n")
	p.expect("+new")
	p.send("y\n")
	p.expect("applied in project: 1 modified")
	if code := p.wait(); code != 0 {
		t.Errorf("exit %d", code)
	}
	if readFile(t, filepath.Join(root, "a.txt")) != "new\n" || len(checkouts(t, base)) != 0 {
		t.Errorf("ask y: a.txt %q, checkouts %v", readFile(t, filepath.Join(root, "a.txt")), checkouts(t, base))
	}
}

// TestRunBuildCache: the build caches persist between runs of one project, are
// not synced into it, and are not shown to another project's runs; capfs cache
// ls lists them and clean removes them.
func TestRunBuildCache(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	top := t.TempDir()
	a, b := filepath.Join(top, "a"), filepath.Join(top, "b")
	writeTree(t, a, map[string]string{"f": "a\n"})
	writeTree(t, b, map[string]string{"f": "b\n"})
	cacheEnv := []string{"CAPFS_CACHE_DIR=" + filepath.Join(top, "cache")}
	runCapfsEnv(t, a, cacheEnv, "run", "--", "sh", "-c", `echo secret-of-a > "$GOCACHE/mark" && echo "$XDG_CACHE_HOME" > where`).want(t, 0)
	if got := readFile(t, filepath.Join(a, "where")); got != "/var/cache/capfs/xdg\n" {
		t.Errorf("XDG_CACHE_HOME = %q", got)
	}
	r := runCapfsEnv(t, a, cacheEnv, "run", "--", "cat", "/var/cache/capfs/go-build/mark").want(t, 0)
	if r.stdout != "secret-of-a\n" {
		t.Errorf("the cache did not persist: %q", r.stdout)
	}
	if _, err := os.Lstat(filepath.Join(a, "mark")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the cache was synced into the project")
	}
	r = runCapfsEnv(t, b, cacheEnv, "run", "--", "sh", "-c", "cat /var/cache/capfs/go-build/mark; ls -A /var/cache/capfs/go-build").want(t, 0)
	if strings.Contains(r.stdout, "secret-of-a") {
		t.Errorf("project b sees project a's cache: %q", r.stdout)
	}
	runCapfsEnv(t, a, cacheEnv, "run", "--no-cache", "--", "sh", "-c", "test ! -e /var/cache/capfs").want(t, 0)
	l := runCapfsEnv(t, a, cacheEnv, "cache", "ls").want(t, 0)
	if !strings.Contains(l.stdout, "physical:"+a) || !strings.Contains(l.stdout, "physical:"+b) {
		t.Errorf("cache ls:\n%s", l.stdout)
	}
	runCapfsEnv(t, a, cacheEnv, "cache", "clean").want(t, 0)
	l = runCapfsEnv(t, a, cacheEnv, "cache", "ls").want(t, 0)
	if strings.Contains(l.stdout, "physical:"+a+"\n") || !strings.Contains(l.stdout, "physical:"+b) {
		t.Errorf("cache clean removed the wrong cache:\n%s", l.stdout)
	}
	runCapfsEnv(t, a, cacheEnv, "cache", "clean", "--all").want(t, 0)
	l = runCapfsEnv(t, a, cacheEnv, "cache", "ls").want(t, 0)
	if strings.Contains(l.stdout, "physical:") {
		t.Errorf("cache clean --all left:\n%s", l.stdout)
	}
}

// TestRunRevOut: --rev runs on a git revision and writes its outputs into
// --out, leaving the work tree alone.
func TestRunRevOut(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	repo := gitRepo(t, map[string]string{"v.txt": "one\n", "Makefile": "all:\n\tcat v.txt > built.txt\n"})
	writeTree(t, repo, map[string]string{"v.txt": "work tree\n"})
	out := filepath.Join(t.TempDir(), "out")
	env, base := stateEnv(t)
	r := runCapfsEnv(t, repo, env, "run", "--rev", "HEAD", "--out", out, "--", "sh", "-c", "cat v.txt > built.txt; rm Makefile").want(t, 0)
	if got := readFile(t, filepath.Join(out, "built.txt")); got != "one\n" {
		t.Errorf("out/built.txt = %q\n%s", got, r.stderr)
	}
	if _, err := os.Lstat(filepath.Join(repo, "built.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("--rev wrote into the work tree")
	}
	if !strings.Contains(r.stderr, "not represented in") || !strings.Contains(r.stderr, "D project/Makefile") {
		t.Errorf("the deletion is not listed:\n%s", r.stderr)
	}
	if len(checkouts(t, base)) != 0 {
		t.Errorf("checkouts left")
	}
	// Without --out, the changes are kept, never lost silently.
	r = runCapfsEnv(t, repo, env, "run", "--rev", "HEAD", "--", "sh", "-c", "echo x > new.txt").want(t, 0)
	id := keptIDOf(t, r.stderr)
	if !strings.Contains(r.stderr, "is the git revision HEAD") || len(checkouts(t, base)) != 1 {
		t.Errorf("--rev without --out:\n%s", r.stderr)
	}
	out2 := filepath.Join(t.TempDir(), "out2")
	runCapfsEnv(t, repo, env, "sync", "--out", out2, id).want(t, 0)
	if readFile(t, filepath.Join(out2, "new.txt")) != "x\n" {
		t.Errorf("sync --out did not write new.txt")
	}
	runCapfsEnv(t, repo, env, "sync", id).want(t, exitUsage) // not written back

	// --commit writes them as a commit on a new branch started at the
	// revision; the work tree and HEAD stay as they were.
	head, _ := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output()
	r = runCapfsEnv(t, repo, env, "run", "--rev", "HEAD", "--commit", "capfs/built", "--", "sh", "-c", "cat v.txt > built.txt; rm Makefile").want(t, 0)
	if !strings.Contains(r.stderr, "committed ") || !strings.Contains(r.stderr, "on branch capfs/built") {
		t.Errorf("--commit:\n%s", r.stderr)
	}
	if b, err := exec.Command("git", "-C", repo, "show", "capfs/built:built.txt").Output(); err != nil || string(b) != "one\n" {
		t.Errorf("capfs/built:built.txt = %q, %v", b, err)
	}
	if err := exec.Command("git", "-C", repo, "cat-file", "-e", "capfs/built:Makefile").Run(); err == nil {
		t.Errorf("the deletion of Makefile is not in the commit")
	}
	if parent, _ := exec.Command("git", "-C", repo, "rev-parse", "capfs/built~1").Output(); string(parent) != string(head) {
		t.Errorf("the commit's parent is %q, want HEAD %q", parent, head)
	}
	if now, _ := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output(); string(now) != string(head) || readFile(t, filepath.Join(repo, "v.txt")) != "work tree\n" {
		t.Errorf("--commit moved HEAD or touched the work tree")
	}
	r = runCapfsEnv(t, repo, env, "run", "--rev", "HEAD", "--commit", "capfs/built", "--", "true").want(t, exitSyncBack)
	if !strings.Contains(r.stderr, "capfs/built") {
		t.Errorf("an existing branch:\n%s", r.stderr)
	}
	runCapfsEnv(t, repo, env, "run", "--commit", "x", "--", "true").want(t, exitUsage)

	// --work on a git mount runs the same way.
	out3 := filepath.Join(t.TempDir(), "out3")
	runCapfsEnv(t, t.TempDir(), env, "-m", "r=git:"+repo, "run", "--work", "r", "--out", out3, "--", "sh", "-c", "cat v.txt > y").want(t, 0)
	if readFile(t, filepath.Join(out3, "y")) != "one\n" {
		t.Errorf("--work on a git mount: out3/y = %q", readFile(t, filepath.Join(out3, "y")))
	}
}

// TestRunMemoryWorkMount: a memory work mount vanishes when capfs exits, so its
// changes are kept (or written into --out), never lost without a word.
func TestRunMemoryWorkMount(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	env, base := stateEnv(t)
	r := runCapfsEnv(t, root, env, "-m", "m=memory:", "run", "--work", "m", "--", "sh", "-c", "echo 1 > a; echo 2 > b").want(t, 0)
	if !strings.Contains(r.stderr, "is a memory mount, gone when capfs exits") || !strings.Contains(r.stderr, "2 added") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	k := checkouts(t, base)
	if len(k) != 1 || readFile(t, filepath.Join(k[0], "b")) != "2\n" {
		t.Errorf("the memory mount's changes were not kept: %v", k)
	}
	out := filepath.Join(t.TempDir(), "o")
	runCapfsEnv(t, root, env, "-m", "m=memory:", "run", "--work", "m", "--out", out, "--", "sh", "-c", "echo 1 > a").want(t, 0)
	if readFile(t, filepath.Join(out, "a")) != "1\n" {
		t.Errorf("--out did not get a")
	}
}

// TestMountAddsToDefaults: --mount adds to the default mounts; a --mount at a
// default's path replaces it; --no-default-mounts leaves them out.
func TestMountAddsToDefaults(t *testing.T) {
	t.Parallel()
	root, other := t.TempDir(), t.TempDir()
	cmd := exec.Command(capfsBinary(t), "-m", "extra=physical:"+other, "mounts")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/project", "/tmp", "/extra"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("mounts lacks %s:\n%s", want, out)
		}
	}
	cmd = exec.Command(capfsBinary(t), "-m", "project=physical:"+other, "mounts")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
	out, _ = cmd.Output()
	if strings.Count(string(out), "/project ") != 1 || !strings.Contains(string(out), other) {
		t.Errorf("a --mount at project did not replace the default:\n%s", out)
	}
	r := runCapfs(t, root, "--no-default-mounts", "-m", "extra=physical:"+other, "mounts").want(t, 0)
	if strings.Contains(r.stdout, "/project") || strings.Contains(r.stdout, "/tmp ") {
		t.Errorf("--no-default-mounts:\n%s", r.stdout)
	}
}

// TestRunSignalDuringCheckout: a SIGTERM while the checkout is being made
// stops it: nothing runs, the partial checkout is removed, the status is
// 128+15.
func TestRunSignalDuringCheckout(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	for i := 0; i < 200; i++ {
		d := filepath.Join(root, fmt.Sprintf("d%03d", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 100; j++ {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d", j)), bytes.Repeat([]byte{'x'}, 4096), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	env, base := stateEnv(t)
	cmd := exec.Command(capfsBinary(t), "run", "--no-lazy", "--", "sh", "-c", "touch ran")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for len(checkouts(t, base)) == 0 {
		select {
		case err := <-done:
			t.Skipf("the checkout finished before it could be interrupted (%v)", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := exitOf(t, <-done)
	if strings.Contains(stderr.String(), "exited with status") {
		t.Skipf("the command ran before the signal arrived:\n%s", stderr.String())
	}
	if code != 128+int(syscall.SIGTERM) || !strings.Contains(stderr.String(), "interrupted by SIGTERM before the command started") {
		t.Errorf("exit %d:\n%s", code, stderr.String())
	}
	if k := checkouts(t, base); len(k) != 0 {
		t.Errorf("a partial checkout was left: %v", k)
	}
	if _, err := os.Lstat(filepath.Join(root, "ran")); err == nil {
		t.Errorf("the command ran")
	}
}

// TestRunGoTestCached: a second `capfs run -- go test ./...` reports the
// test's result "(cached)", as a second plain go test does, although the test
// creates and removes a file in its working directory (as cobra's do). Go's
// result cache hashes the status of every file and directory the test read:
// the checkout must give them the same path, times and sizes in both runs, so
// the directory's time the first run left is synced back.
func TestRunGoTestCached(t *testing.T) {
	needSandbox(t)
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not found in PATH")
	}
	t.Parallel()
	t.Run("checkout", func(t *testing.T) {
		t.Parallel()
		testRunGoTestCached(t, "0")
	})
	t.Run("lazy", func(t *testing.T) {
		if err := lazyAvailable(); err != nil {
			t.Skipf("lazy sandboxes need FUSE, not usable here: %v", err)
		}
		t.Parallel()
		testRunGoTestCached(t, "1")
	})
}

// testRunGoTestCached is TestRunGoTestCached with $CAPFS_RUN_LAZY set to lazy.
func testRunGoTestCached(t *testing.T, lazy string) {
	top := t.TempDir()
	proj := filepath.Join(top, "m")
	writeTree(t, proj, map[string]string{
		"go.mod":    "module example.com/m\n\ngo 1.22\n",
		"data.txt":  "input\n",
		"sub/s.txt": "more\n",
		"m_test.go": `package m

import (
	"os"
	"testing"
)

func TestReadsAndScratches(t *testing.T) {
	if b, err := os.ReadFile("data.txt"); err != nil || string(b) != "input\n" {
		t.Fatal(string(b), err)
	}
	if _, err := os.ReadDir("sub"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir("scratch", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("scratch/x.go", []byte("package x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll("scratch"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadDir("."); err != nil {
		t.Fatal(err)
	}
}
`,
	})
	// Files older than go's two-second cut-off for recently modified inputs.
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{".", "go.mod", "data.txt", "sub", "sub/s.txt", "m_test.go"} {
		if err := os.Chtimes(filepath.Join(proj, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	env, _ := stateEnv(t)
	env = append(env, "CAPFS_CACHE_DIR="+filepath.Join(top, "cache"), envRunLazy+"="+lazy)
	first := runCapfsEnv(t, proj, env, "run", "--", "go", "test", "./...").want(t, 0)
	if strings.Contains(first.stdout, "(cached)") {
		t.Fatalf("the first run was cached already:\n%s", first.stdout)
	}
	second := runCapfsEnv(t, proj, env, "run", "--", "go", "test", "./...").want(t, 0)
	if !strings.Contains(second.stdout, "ok  \texample.com/m\t(cached)") {
		t.Errorf("the second run missed go's test cache:\n%s\n%s", second.stdout, second.stderr)
	}
	if _, err := os.Lstat(filepath.Join(proj, "scratch")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the test's scratch directory reached the project: %v", err)
	}
	// A change to a file the test read is seen: the result is not cached.
	if err := os.WriteFile(filepath.Join(proj, "data.txt"), []byte("input\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(proj, "data.txt"), old.Add(time.Minute), old.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	third := runCapfsEnv(t, proj, env, "run", "--", "go", "test", "./...").want(t, 0)
	if strings.Contains(third.stdout, "(cached)") {
		t.Errorf("a changed input was not seen:\n%s", third.stdout)
	}
}
