package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capfs/capfs/audit"
)

// linkTree makes a tree with every kind of symlink: absolute, climbing out of
// the mount, dangling, looping, into a secret, and an ordinary one; the
// links that leave the mount sort first, so a listing that stopped at them
// would show nothing else.
func linkTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"d/f.txt": "f\n", "z.txt": "z\n", ".env": "S=1\n"})
	for link, target := range map[string]string{
		"a-abs": "/etc/passwd", "b-up": "../outside", "c-dangling": "d/none",
		"e-loop": "e-loop", "f-secret": ".env", "g-inner": "d/f.txt", "d/h-up": "../../x",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestLinks checks ls -l, tree and stat on links: every entry is listed, each
// link with its target (an absolute one is not shown) and a note when it
// leaves the mount, dangles or loops.
func TestLinks(t *testing.T) {
	t.Parallel()
	root := linkTree(t)
	m := "p=physical:" + root
	r := runCapfs(t, root, "-m", m, "ls", "-l", "p").want(t, 0)
	for _, want := range []string{
		"a-abs -> (absolute target, not shown) [leaves the mount]\n",
		"b-up -> ../outside [leaves the mount]\n",
		"c-dangling -> d/none [dangling]\n",
		"e-loop -> e-loop [loops]\n",
		"f-secret -> .env [reaches a path the policy refuses]\n",
		"g-inner -> d/f.txt\n",
		" z.txt\n", " d/\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("ls -l lacks %q:\n%s", want, r.stdout)
		}
	}
	noHostPath(t, r.stdout, root)
	if strings.Contains(r.stdout, "/etc/passwd") {
		t.Errorf("ls -l shows an absolute target:\n%s", r.stdout)
	}
	r = runCapfs(t, root, "-m", m, "tree", "p").want(t, 0)
	for _, want := range []string{"├── a-abs -> (absolute target, not shown) [leaves the mount]\n", "│   └── h-up -> ../../x [leaves the mount]\n", "└── z.txt\n", "1 directory, 10 files\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tree lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCapfs(t, root, "-m", m, "stat", "p/b-up").want(t, 0)
	if !strings.Contains(r.stdout, "target:   ../outside\nreaches:  leaves the mount\n") {
		t.Errorf("stat of a link leaving the mount:\n%s", r.stdout)
	}
	r = runCapfs(t, root, "-m", m, "stat", "p/g-inner").want(t, 0)
	if !strings.Contains(r.stdout, "reaches:  regular file\n") {
		t.Errorf("stat of an inner link:\n%s", r.stdout)
	}
	// A link given as PATH is listed as itself, even one leaving the mount.
	r = runCapfs(t, root, "-m", m, "ls", "-l", "p/a-abs").want(t, 0)
	if !strings.Contains(r.stdout, "p/a-abs -> (absolute target, not shown) [leaves the mount]") {
		t.Errorf("ls -l of a link: %q", r.stdout)
	}
}

// TestJSON checks --json on every listing command: valid JSON with the fields
// documented, and no host path.
func TestJSON(t *testing.T) {
	t.Parallel()
	root := linkTree(t)
	m := "p=physical:" + root
	var ls []map[string]any
	r := runCapfs(t, root, "-m", m, "ls", "--json", "p").want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), &ls); err != nil {
		t.Fatalf("ls --json: %v\n%s", err, r.stdout)
	}
	byName := map[string]map[string]any{}
	for _, e := range ls {
		byName[e["name"].(string)] = e
	}
	if len(ls) != 9 || byName["b-up"]["link_note"] != "leaves the mount" || byName["b-up"]["target"] != "../outside" ||
		byName["a-abs"]["target_absolute"] != true || byName["a-abs"]["target"] != nil ||
		byName[".env"]["hidden"] != true || byName["z.txt"]["size"] != 2.0 || byName["d"]["type"] != "directory" || byName["z.txt"]["path"] != "p/z.txt" {
		t.Errorf("ls --json:\n%s", r.stdout)
	}
	var tree map[string]any
	r = runCapfs(t, root, "-m", m, "tree", "--json", "p").want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), &tree); err != nil {
		t.Fatalf("tree --json: %v\n%s", err, r.stdout)
	}
	if kids, _ := tree["children"].([]any); len(kids) != 9 {
		t.Errorf("tree --json has %d children:\n%s", len(kids), r.stdout)
	}
	var st map[string]any
	r = runCapfs(t, root, "-m", m, "stat", "--json", "p/g-inner").want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st["reaches"] != "regular file" || st["mount"].(map[string]any)["kind"] != "physical" {
		t.Errorf("stat --json (%v):\n%s", err, r.stdout)
	}
	var mounts []map[string]any
	r = runCapfs(t, root, "-m", m, "--no-default-mounts", "mounts", "--json").want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), &mounts); err != nil || len(mounts) != 1 || mounts[0]["path"] != "/p" || mounts[0]["read_only"] != false {
		t.Errorf("mounts --json (%v):\n%s", err, r.stdout)
	}
	var globs []string
	r = runCapfs(t, root, "-m", m, "glob", "--json", "p/**/*.txt").want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), &globs); err != nil || strings.Join(globs, ",") != "p/d/f.txt,p/z.txt" {
		t.Errorf("glob --json (%v):\n%s", err, r.stdout)
	}
	for _, out := range []string{r.stdout} {
		noHostPath(t, out, root)
	}
}

// TestVersionCompletion checks --version and the completion scripts.
func TestVersionCompletion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runCapfs(t, dir, "--version").want(t, 0)
	if !regexp.MustCompile(`^capfs \S+ .*go1\.\d+`).MatchString(r.stdout) {
		t.Errorf("--version = %q", r.stdout)
	}
	for shell, want := range map[string]string{"bash": "complete -o default", "zsh": "#compdef capfs", "fish": "complete -c capfs"} {
		r := runCapfs(t, dir, "completion", shell).want(t, 0)
		if !strings.Contains(r.stdout, want) {
			t.Errorf("completion %s lacks %q", shell, want)
		}
	}
	// Namespace paths complete from the namespace.
	writeTree(t, dir, map[string]string{"src/main.go": "x\n", "sub/a": "a\n"})
	r = runCapfs(t, dir, "__complete", "-m", "p=physical:"+dir, "cat", "p/s")
	if !strings.Contains(r.stdout, "p/src/\np/sub/\n") {
		t.Errorf("path completion = %q", r.stdout)
	}
}

// TestErrorsNameNoGoMethod checks that no error names a Go method or type, and
// that each says which guest path and what to do.
func TestErrorsNameNoGoMethod(t *testing.T) {
	t.Parallel()
	root := linkTree(t)
	m := "p=physical:" + root
	goName := regexp.MustCompile(`\b(OpenFile|ReadFile|ReadDir|Lstat|Readlink|WriteFile|MkdirAll|Sub|Handle\.\w+|\*?vfs\.\w+|main\.\w+)\b`)
	for _, args := range [][]string{
		{"cat", "p/missing"}, {"cat", "p/.env"}, {"cat", "p/d"}, {"cat", "p/a-abs"}, {"cat", "p/../../etc/passwd"},
		{"ls", "p/missing"}, {"stat", "p/missing"}, {"tree", "p/missing"}, {"grep", "x", "p/missing"},
		{"diff", "p/missing", "p/d"}, {"cat", "p/e-loop"}, {"glob", "p/["},
	} {
		r := runCapfs(t, root, append([]string{"-m", m}, args...)...)
		if r.code == 0 || !strings.HasPrefix(r.stderr, "capfs: ") {
			t.Errorf("%q: exit %d, stderr %q", args, r.code, r.stderr)
			continue
		}
		if goName.MatchString(r.stderr) {
			t.Errorf("%q: the error names Go code: %q", args, r.stderr)
		}
		if !strings.Contains(r.stderr, "p/") && args[0] != "glob" {
			t.Errorf("%q: the error does not name the guest path: %q", args, r.stderr)
		}
		noHostPath(t, r.stderr, root)
	}
	r := runCapfs(t, root, "-m", m, "cat", "p/.env").want(t, 1)
	if !strings.Contains(r.stderr, "--allow-secret") {
		t.Errorf("a secret's error does not say what to do: %q", r.stderr)
	}
}

// TestAuditLog checks --audit=off, stderr, /dev/null, the level and rotation by
// size with a bounded number of files.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	root := linkTree(t)
	m := "p=physical:" + root
	state := t.TempDir()
	r := runCapfsEnvState(t, root, state, "-m", m, "--audit=off", "ls", "p").want(t, 0)
	if _, err := os.Stat(filepath.Join(state, "capfs", "audit.jsonl")); !os.IsNotExist(err) || r.stderr != "" {
		t.Errorf("--audit=off wrote a log (%v) or printed %q", err, r.stderr)
	}
	r = runCapfs(t, root, "-m", m, "--audit", "/dev/null", "cat", "p/z.txt").want(t, 0)
	if r.stderr != "" {
		t.Errorf("--audit /dev/null printed %q", r.stderr)
	}
	if st, err := os.Stat("/dev/null"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null was replaced: %v %v", st, err)
	}
	r = runCapfs(t, root, "-m", m, "--audit", "stderr", "--audit-level", "denied", "cat", "p/z.txt", "p/.env").want(t, 1)
	if n := strings.Count(r.stderr, `"outcome":"denied"`); n != 1 || strings.Contains(r.stderr, `"outcome":"ok"`) {
		t.Errorf("--audit stderr --audit-level denied:\n%s", r.stderr)
	}
	runCapfs(t, root, "--audit-level", "some", "ls").want(t, 2)
	runCapfs(t, root, "--audit-max-size", "huge", "ls").want(t, 2)

	// Rotation through the CLI: a 1 MiB limit on a log that is already full
	// rotates it at the first event.
	logDir := t.TempDir()
	log := filepath.Join(logDir, "audit.jsonl")
	full := strings.Repeat(`{"time":"2026-01-01T00:00:00Z","request_id":"x","op":"stat","path":"p","outcome":"ok","duration_ns":1}`+"\n", (1<<20)/100)
	if err := os.WriteFile(log, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	runCapfs(t, root, "-m", m, "--audit", log, "--audit-max-size", "1MiB", "--audit-max-files", "2", "ls", "p").want(t, 0)
	// In process, many events: at most 1 MiB per file and 2 rotated files.
	sink, closeSink, err := openAuditSink(auditSettings{dest: log, maxSize: "1MiB", maxFiles: 2}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30000 { // refusals: one line each, not held for a compact record
		sink.Record(t.Context(), audit.Event{RequestID: strconv.Itoa(i), Op: "read", Path: "p/" + strings.Repeat("n", 100), Outcome: audit.Denied})
	}
	if err := closeSink(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(logDir, "audit*"))
	var total int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 1<<20 {
			t.Errorf("%s is %d bytes, over the 1 MiB limit", filepath.Base(f), st.Size())
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", filepath.Base(f), st.Mode().Perm())
		}
		total += st.Size()
	}
	if len(files) != 3 {
		t.Errorf("want the log and 2 rotated files, got %d: %v", len(files), files)
	}
	if total > 3<<20 || total < 1<<20 { // rotated files may be compressed
		t.Errorf("the logs hold %d bytes", total)
	}
	// Every line of every file is a whole event.
	for _, f := range files {
		readAudit(t, f)
	}
}

// TestAllowFixturesRun checks that --allow-test-fixtures reaches capfs run's
// sandbox: a *.pem under testdata is in the checkout with it, absent without,
// and .env stays out either way.
func TestAllowFixturesRun(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap is not installed (make sysdeps)")
	}
	root := t.TempDir()
	writeTree(t, root, map[string]string{"testdata/k.pem": "KEY\n", ".env": "S=1\n"})
	r := runCapfs(t, root, "run", "--", "cat", "testdata/k.pem")
	if r.code == 125 {
		t.Skipf("no working sandbox here: %s", r.stderr)
	}
	if r.code == 0 || strings.Contains(r.stdout, "KEY") {
		t.Errorf("without the flag the fixture is readable: exit %d, %q", r.code, r.stdout)
	}
	r = runCapfs(t, root, "--allow-test-fixtures", "run", "--", "cat", "testdata/k.pem").want(t, 0)
	if r.stdout != "KEY\n" {
		t.Errorf("--allow-test-fixtures: %q / %q", r.stdout, r.stderr)
	}
	r = runCapfs(t, root, "--allow-test-fixtures", "run", "--", "cat", ".env")
	if r.code == 0 || strings.Contains(r.stdout, "S=1") {
		t.Errorf("--allow-test-fixtures let .env in: exit %d, %q", r.code, r.stdout)
	}
}

// TestSignalStuck checks that a browsing command answers SIGTERM within a
// second or two even when it is stuck: capfs cat of a large file writing into a
// pipe nobody reads.
func TestSignalStuck(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	big := filepath.Join(root, "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	cmd := exec.Command(capfsBinary(t), "-m", "p=physical:"+root+",ro", "--audit=off", "cat", "p/big")
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
	out, err := cmd.StdoutPipe() // never read: the pipe fills and cat blocks
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Errorf("capfs cat after SIGTERM: %v, want exit status 130", err)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("capfs cat ignored SIGTERM")
	}
}

// TestColorTerminal runs capfs under a pseudo-terminal (script(1)): ls and
// grep colour their output there by default, and not with NO_COLOR set or
// --color=never.
func TestColorTerminal(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("script(1) is not installed (util-linux)")
	}
	root := t.TempDir()
	writeTree(t, root, map[string]string{"d/f.txt": "needle\n"})
	m := "p=physical:" + root
	onTTY := func(env []string, args ...string) string {
		t.Helper()
		line := capfsBinary(t)
		for _, a := range args {
			line += " '" + a + "'"
		}
		cmd := exec.Command("script", "-qc", line, "/dev/null")
		cmd.Env = append(append(os.Environ(), "XDG_STATE_HOME="+t.TempDir(), "TERM=xterm"), env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("script -c %s: %v", line, err)
		}
		return string(out)
	}
	for _, args := range [][]string{{"-m", m, "ls", "p"}, {"-m", m, "grep", "needle", "p"}} {
		if out := onTTY(nil, args...); !strings.Contains(out, "\x1b[") {
			t.Errorf("%q on a terminal is not coloured: %q", args, out)
		}
		if out := onTTY([]string{"NO_COLOR=1"}, args...); strings.Contains(out, "\x1b[") {
			t.Errorf("%q with NO_COLOR is coloured: %q", args, out)
		}
		if out := onTTY(nil, append(args[:len(args):len(args)], "--color=never")...); strings.Contains(out, "\x1b[") {
			t.Errorf("%q --color=never is coloured: %q", args, out)
		}
	}
}
