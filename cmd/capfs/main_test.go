package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/internal/mountkind"
	"github.com/capfs/capfs/internal/testenv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testTmp is the directory TestMain makes for the package's tests: the
// capfs binary, the MCP scratch ($XDG_DATA_HOME).
var testTmp string

// The capfs binary, built on first use (capfsBinary).
var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		return m.Run() // a fuzzing worker runs only the fuzz target, which needs no binary
	}
	tmp, err := os.MkdirTemp("", "capfs-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	cleanup, err := testenv.PrivateTmp()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	// capfs mcp keeps its scratch under $XDG_DATA_HOME: the tests' goes with tmp.
	os.Setenv("XDG_DATA_HOME", filepath.Join(tmp, "data"))
	testTmp = tmp
	return m.Run()
}

// capfsBinary returns the capfs binary, building it on first use. Only the
// tests that need capfs as a process of its own call it: run (the sandbox,
// its signals, the egress shim that re-executes capfs), mount (FUSE), a
// terminal, a signal, MCP over pipes. The others run capfs in-process
// ([runCapfs]).
func capfsBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binPath = filepath.Join(testTmp, "capfs")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatalf("building capfs: %v", binErr)
	}
	return binPath
}

// openMount opens the backend a spec names in the test process's
// environment, a memory mount without its own quota getting memQuota
// ([openMountCtx]).
func openMount(spec mountSpec, memQuota int64) (*mounted, error) {
	return openMountCtx(context.Background(), spec, mountkind.Env{MemoryQuota: memQuota})
}

// result is one run of capfs.
type result struct {
	stdout, stderr string
	code           int
}

// runCapfs runs capfs in dir with args, with its state (the default audit log)
// under a temporary XDG_STATE_HOME.
func runCapfs(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return runCapfsEnv(t, dir, nil, args...)
}

// runCapfsEnv is runCapfs with env added to the environment.
func runCapfsEnv(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return runCapfsTimeout(t, dir, env, 5*time.Minute, args...)
}

// runCapfsTimeout is runCapfsEnv with a deadline: a capfs still running after d
// fails the test, so a hang fails it instead of running into the package
// timeout. A --mount in args makes the namespace exactly the mounts named
// ([exactMounts]).
func runCapfsTimeout(t *testing.T, dir string, env []string, d time.Duration, args ...string) result {
	t.Helper()
	return capfsRun(t, dir, env, d, exactMounts(args))
}

// capfsRun runs the command line args in dir, with os.Environ(), a
// temporary XDG_STATE_HOME and env (later entries win), for at most d: as a
// process of its own when the command needs one ([needsBinary]), else
// in-process through [execute].
func capfsRun(t *testing.T, dir string, env []string, d time.Duration, args []string) result {
	t.Helper()
	state := t.TempDir()
	env = append(append(os.Environ(), "XDG_STATE_HOME="+state), env...)
	if needsBinary(args) {
		t.Cleanup(func() { detachMountsUnder(t, state) }) // a killed lazy run's mount
		return runCapfsBin(t, dir, env, d, args)
	}
	return runCapfsIn(t, dir, env, d, args)
}

// needsBinary reports whether the command line args runs a command that
// needs capfs as a process of its own: run and sync (the sandbox, its
// signal handling, materialize's state directory in the process's
// environment), mount (FUSE).
func needsBinary(args []string) bool {
	cmd, _, err := newRootCmd(environ{}, io.Discard).Find(args)
	if err != nil {
		return false
	}
	for ; cmd.HasParent(); cmd = cmd.Parent() {
		if !cmd.Parent().HasParent() {
			switch cmd.Name() {
			case "run", "sync", "mount":
				return true
			}
		}
	}
	return false
}

// runCapfsBin runs args with the capfs binary in dir with the environment
// env, killing it after d (its children's hold on the output is dropped 10 s
// later).
func runCapfsBin(t *testing.T, dir string, env []string, d time.Duration, args []string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, capfsBinary(t), args...)
	cmd.WaitDelay = 10 * time.Second
	cmd.Dir = dir
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("capfs %q was still running after %v: killed (stderr: %s)", args, d, errb.String())
	}
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("capfs %q: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return result{out.String(), errb.String(), code}
}

// runCapfsIn runs args in-process: [execute] in an [environ] of dir and env,
// with an empty stdin, under a context that ends after d. A command still
// running 10 s after that fails the test (its goroutine is left behind); a
// panic fails it with the stack.
func runCapfsIn(t *testing.T, dir string, env []string, d time.Duration, args []string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out, errb lockedBuffer
	done := make(chan outcome, 1)
	go runExecute(ctx, testEnviron(dir, env), args, strings.NewReader(""), &out, &errb, done)
	select {
	case o := <-done:
		if o.panic != "" {
			t.Fatalf("capfs %q panicked: %s", args, o.panic)
		}
		if ctx.Err() != nil {
			t.Fatalf("capfs %q was still running after %v: cancelled (stderr: %s)", args, d, errb.String())
		}
		return result{out.String(), errb.String(), o.code}
	case <-time.After(d + 10*time.Second):
		t.Fatalf("capfs %q was still running 10 s after its %v deadline (stderr: %s)", args, d, errb.String())
	}
	return result{}
}

// testEnviron is the environ of a command line run in-process in dir with
// the environment env (KEY=VALUE, later entries win, as exec takes them).
func testEnviron(dir string, env []string) environ {
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			vars[k] = v
		}
	}
	return environ{dir: dir, getenv: func(k string) string { return vars[k] }}
}

// exactMounts gives a command line naming its mounts (-m) exactly those:
// --mount adds to the default mounts (the test's directory as project, ...),
// which the tests checking a namespace they built do not expect.
func exactMounts(args []string) []string {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-m" || a == "--mount" || strings.HasPrefix(a, "--mount=") {
			return append([]string{"--no-default-mounts"}, args...)
		}
	}
	return args
}

// want fails the test unless r exited with code; it shows the run otherwise.
func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// writeTree creates files (path -> contents) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// project makes a small host tree and returns its path.
func project(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"README.md":        "# demo\nHello, capfs.\n",
		"src/main.go":      "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n",
		"src/util/util.go": "package util\n\n// Hello says hello.\nfunc Hello() string { return \"HELLO\" }\n",
		"data/blob.bin":    "hello\x00binary\n",
		".env":             "TOKEN=hello-secret\n",
	})
	if err := os.Symlink("src/main.go", filepath.Join(root, "main-link")); err != nil {
		t.Fatal(err)
	}
	return root
}

// noHostPath fails if s mentions the host path root.
func noHostPath(t *testing.T, s, root string) {
	t.Helper()
	if strings.Contains(s, root) {
		t.Errorf("output names the host path %s:\n%s", root, s)
	}
}

func TestLs(t *testing.T) {
	t.Parallel()
	root := project(t)
	m := "p=physical:" + root
	r := runCapfs(t, root, "--mount", m, "ls", "p").want(t, 0)
	want := ".env\nREADME.md\ndata/\nmain-link\nsrc/\n"
	if r.stdout != want {
		t.Errorf("ls p = %q, want %q", r.stdout, want)
	}
	r = runCapfs(t, root, "--mount", m, "ls", "-l", "p").want(t, 0)
	if !strings.Contains(r.stdout, "main-link -> src/main.go") || !strings.Contains(r.stdout, "drwx") {
		t.Errorf("ls -l p lacks the link target or a directory mode:\n%s", r.stdout)
	}
	if lines := strings.Split(r.stdout, "\n"); !strings.HasPrefix(lines[0], "?") || !strings.HasSuffix(lines[0], " .env") {
		t.Errorf("ls -l p shows the secret .env's metadata, or not its name: %q", lines[0])
	}
	r = runCapfs(t, root, "--mount", m, "ls").want(t, 0)
	if r.stdout != "p/\n" {
		t.Errorf("ls of the root = %q, want p/", r.stdout)
	}
	r = runCapfs(t, root, "--mount", m, "ls", "/p/src/main.go").want(t, 0)
	if r.stdout != "/p/src/main.go\n" {
		t.Errorf("ls of a file = %q", r.stdout)
	}
	r = runCapfs(t, root, "--mount", m, "ls", "p/missing").want(t, 1)
	if !strings.HasPrefix(r.stderr, "capfs: ") || !strings.Contains(r.stderr, "p/missing") || !strings.Contains(r.stderr, "(not_found)") {
		t.Errorf("ls of a missing path: stderr %q", r.stderr)
	}
	noHostPath(t, r.stderr, root)
}

func TestCat(t *testing.T) {
	t.Parallel()
	root := project(t)
	m := "p=physical:" + root
	r := runCapfs(t, root, "-m", m, "cat", "p/README.md", "p/main-link").want(t, 0)
	if want := "# demo\nHello, capfs.\npackage main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n"; r.stdout != want {
		t.Errorf("cat = %q, want %q", r.stdout, want)
	}
	for _, tc := range []struct {
		path, code string
	}{
		{"p/missing.txt", "not_found"},
		{"p/src", "is_a_directory"},
		{"p/.env", "fs_permission_denied"},
		{"p/../../etc/passwd", "path_outside_sandbox"},
	} {
		r := runCapfs(t, root, "-m", m, "cat", tc.path).want(t, 1)
		if !strings.HasPrefix(r.stderr, "capfs: ") || !strings.Contains(r.stderr, "("+tc.code+")") {
			t.Errorf("cat %s: stderr %q, want code %s", tc.path, r.stderr, tc.code)
		}
		if r.stdout != "" {
			t.Errorf("cat %s printed %q", tc.path, r.stdout)
		}
		noHostPath(t, r.stderr, root)
	}
	// The exact form of an error line.
	r = runCapfs(t, root, "-m", m, "cat", "p/missing.txt").want(t, 1)
	if want := "capfs: open p/missing.txt: no such file or directory (not_found)\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
}

func TestTree(t *testing.T) {
	t.Parallel()
	root := project(t)
	m := "p=physical:" + root
	r := runCapfs(t, root, "-m", m, "tree", "p").want(t, 0)
	for _, want := range []string{"└── src\n", "    └── util\n", "        └── util.go\n", "├── data\n│   └── blob.bin\n", "main-link -> src/main.go", "3 directories, 6 files\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tree lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCapfs(t, root, "-m", m, "tree", "--depth", "1", "p").want(t, 0)
	if strings.Contains(r.stdout, "── main.go") || !strings.Contains(r.stdout, "└── src\n") {
		t.Errorf("tree --depth 1 went too deep or missed src:\n%s", r.stdout)
	}
	runCapfs(t, root, "-m", m, "tree", "--depth", "-1", "p").want(t, 2)
	runCapfs(t, root, "-m", m, "tree", "p/nope").want(t, 1)
}

func TestStat(t *testing.T) {
	t.Parallel()
	root := project(t)
	r := runCapfs(t, root, "-m", "p=physical:"+root+",ro", "stat", "p/main-link").want(t, 0)
	for _, want := range []string{"type:     symlink", "target:   src/main.go", "mount:    p (physical, read-only)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stat lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCapfs(t, root, "-m", "p=physical:"+root, "stat", "p/src/main.go").want(t, 0)
	if !strings.Contains(r.stdout, "size:     48") || !strings.Contains(r.stdout, "(physical, read-write)") {
		t.Errorf("stat of a file:\n%s", r.stdout)
	}
	runCapfs(t, root, "-m", "p=physical:"+root, "stat").want(t, 2)
}

func TestGlob(t *testing.T) {
	t.Parallel()
	root := project(t)
	m := "p=physical:" + root
	r := runCapfs(t, root, "-m", m, "glob", "p/**/*.go").want(t, 0)
	if want := "p/src/main.go\np/src/util/util.go\n"; r.stdout != want {
		t.Errorf("glob = %q, want %q", r.stdout, want)
	}
	r = runCapfs(t, root, "-m", m, "glob", "p/**/*.rs").want(t, 1)
	if r.stdout != "" || r.stderr != "" {
		t.Errorf("glob without match printed %q / %q", r.stdout, r.stderr)
	}
	r = runCapfs(t, root, "-m", m, "glob", "p/[").want(t, 1)
	if !strings.Contains(r.stderr, "invalid_path") {
		t.Errorf("malformed glob: %q", r.stderr)
	}
}

func TestGrep(t *testing.T) {
	t.Parallel()
	root := project(t)
	m := "p=physical:" + root
	r := runCapfs(t, root, "-m", m, "grep", "hello", "p").want(t, 0)
	// Not the binary file, not the secret .env, and case-sensitive.
	if want := "p/src/main.go:\tprintln(\"hello\")\np/src/util/util.go:// Hello says hello.\n"; r.stdout != want {
		t.Errorf("grep hello = %q, want %q", r.stdout, want)
	}
	r = runCapfs(t, root, "-m", m, "grep", "-i", "-n", "hello", "p").want(t, 0)
	want := "p/README.md:2:Hello, capfs.\np/src/main.go:4:\tprintln(\"hello\")\np/src/util/util.go:3:// Hello says hello.\np/src/util/util.go:4:func Hello() string { return \"HELLO\" }\n"
	if r.stdout != want {
		t.Errorf("grep -i -n = %q, want %q", r.stdout, want)
	}
	r = runCapfs(t, root, "-m", m, "grep", "-il", "hello").want(t, 0)
	if want := "p/README.md\np/src/main.go\np/src/util/util.go\n"; r.stdout != want {
		t.Errorf("grep -il = %q, want %q", r.stdout, want)
	}
	// One file: no file name, as grep.
	r = runCapfs(t, root, "-m", m, "grep", "-n", "Hello", "p/src/util/util.go").want(t, 0)
	if !strings.HasPrefix(r.stdout, "3:// Hello") {
		t.Errorf("grep on one file = %q", r.stdout)
	}
	r = runCapfs(t, root, "-m", m, "grep", "nothing-matches-this", "p").want(t, 1)
	// The secret .env is summarised once on stderr.
	if want := "capfs: grep: 1 path not searched, refused by the policy (secret **/.env): p/.env; pass --allow-secret GLOB to search one, or --allow-test-fixtures for test data directories\n"; r.stdout != "" || r.stderr != want {
		t.Errorf("grep without match printed %q / %q", r.stdout, r.stderr)
	}
	r = runCapfs(t, root, "-m", m, "grep", "(", "p").want(t, 2)
	if !strings.Contains(r.stderr, "bad regular expression") {
		t.Errorf("bad regexp: %q", r.stderr)
	}
	runCapfs(t, root, "-m", m, "grep", "x", "p/missing").want(t, 2)
}

func TestDiff(t *testing.T) {
	t.Parallel()
	a, b := t.TempDir(), t.TempDir()
	writeTree(t, a, map[string]string{"same.txt": "same\n", "f.txt": "one\ntwo\nthree\n", "gone.txt": "bye\n"})
	writeTree(t, b, map[string]string{"same.txt": "same\n", "f.txt": "one\n2\nthree\n", "new.txt": "hi\n"})
	args := []string{"-m", "a=physical:" + a + ",ro", "-m", "b=physical:" + b}
	r := runCapfs(t, a, append(args, "diff", "a", "b")...).want(t, 0)
	for _, want := range []string{
		"diff --git a/f.txt b/f.txt\n", "-two\n+2\n",
		"diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n",
		"diff --git a/new.txt b/new.txt\nnew file mode 100644\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("diff lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "same.txt") {
		t.Errorf("diff shows an unchanged file:\n%s", r.stdout)
	}
	r = runCapfs(t, a, append(args, "diff", "-x", "*.txt", "a", "b")...).want(t, 0)
	if r.stdout != "" {
		t.Errorf("diff --exclude '*.txt' = %q", r.stdout)
	}
	r = runCapfs(t, a, append(args, "diff", "a/f.txt", "b/f.txt")...).want(t, 0)
	if !strings.HasPrefix(r.stdout, "diff --git a/f.txt b/f.txt\n") || !strings.Contains(r.stdout, "-two\n+2\n") {
		t.Errorf("file diff:\n%s", r.stdout)
	}
	r = runCapfs(t, a, append(args, "diff", "a/same.txt", "b/same.txt")...).want(t, 0)
	if r.stdout != "" {
		t.Errorf("diff of equal files = %q", r.stdout)
	}
	r = runCapfs(t, a, append(args, "diff", "a", "b/f.txt")...).want(t, 1)
	if !strings.Contains(r.stderr, "(is_a_directory)") {
		t.Errorf("diff dir file: %q", r.stderr)
	}
	runCapfs(t, a, append(args, "diff", "a")...).want(t, 2)
}

func TestMounts(t *testing.T) {
	t.Parallel()
	root := project(t)
	r := runCapfs(t, root, "-m", "src=physical:"+root+"/src,ro", "-m", "deep/tmp=memory:", "mounts").want(t, 0)
	for _, want := range []string{"/src", "physical", "ro", "/deep/tmp", "memory", "rw"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("mounts lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCapfs(t, root, "-m", "src=physical:"+root+"/src,ro", "-m", "deep/tmp=memory:", "ls", "deep").want(t, 0)
	if r.stdout != "tmp/\n" {
		t.Errorf("ls deep = %q", r.stdout)
	}
}

// TestBadInput checks usage errors: bad flags, arguments, mount specs and
// configuration files exit 2 with a message on stderr and nothing on stdout.
func TestBadInput(t *testing.T) {
	t.Parallel()
	root := project(t)
	badConfig := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(badConfig, []byte("[[mount]]\npath = \"x\"\nkind = \"memory\"\ncolour = \"blue\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badPolicy := filepath.Join(t.TempDir(), "policy.toml")
	if err := os.WriteFile(badPolicy, []byte("default = \"maybe\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--no-such-flag", "ls"}, "unknown flag"},
		{[]string{"ls", "--no-such-flag"}, "unknown flag"},
		{[]string{"no-such-command"}, "unknown command"},
		{[]string{"cat"}, "requires at least 1 arg"},
		{[]string{"ls", "a", "b"}, "accepts at most 1 arg"},
		{[]string{"-m", "p", "ls"}, "want PATH=KIND:ARG"},
		{[]string{"-m", "p=nfs:server", "ls"}, `unknown kind "nfs"`},
		{[]string{"-m", "p=physical:", "ls"}, "needs a host directory"},
		{[]string{"-m", "p=physical:" + root + "/nope", "ls"}, "no such directory"},
		{[]string{"-m", "p=physical:" + root + "/README.md", "ls"}, "not a directory"},
		{[]string{"-m", "../up=memory:", "ls"}, "bad mount path"},
		{[]string{"-m", "a\\b=memory:", "ls"}, "bad mount path"},
		{[]string{"-m", "=memory:", "ls"}, "empty mount path"},
		{[]string{"-m", "t=memory:stuff", "ls"}, "memory takes no argument"},
		{[]string{"-m", "t=memory:,rx", "ls"}, "unknown option"},
		{[]string{"-m", "t=memory:", "-m", "t=memory:", "ls"}, "two mounts at the same path"},
		{[]string{"-m", "g=git:" + root, "ls"}, "--mount g=git:"},
		{[]string{"--config", filepath.Join(root, "nope.toml"), "ls"}, "no such file"},
		{[]string{"--config", badConfig, "ls"}, "unknown keys: mount.colour"},
		{[]string{"--policy", badPolicy, "ls"}, "--policy"},
		{[]string{"--audit", filepath.Join(root, "nodir", "audit.jsonl"), "ls"}, "--audit"},
	} {
		r := runCapfs(t, root, tc.args...)
		if r.code != 2 {
			t.Errorf("capfs %q: exit %d, want 2 (stderr %q)", tc.args, r.code, r.stderr)
			continue
		}
		if !strings.HasPrefix(r.stderr, "capfs: ") || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("capfs %q: stderr %q, want it to contain %q", tc.args, r.stderr, tc.msg)
		}
		if r.stdout != "" {
			t.Errorf("capfs %q: stdout %q", tc.args, r.stdout)
		}
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runCapfs(t, dir, "--help").want(t, 0)
	for _, want := range []string{"capability", "Exit codes", "[[mount]]", "ls", "run", "grep", "--mount"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("capfs --help lacks %q", want)
		}
	}
	r = runCapfs(t, dir, "help", "grep").want(t, 0)
	if !strings.Contains(r.stdout, "--files-with-matches") {
		t.Errorf("capfs help grep:\n%s", r.stdout)
	}
	r = runCapfs(t, dir, "ls", "--help").want(t, 0)
	if !strings.Contains(r.stdout, "--long") {
		t.Errorf("capfs ls --help:\n%s", r.stdout)
	}
}

// TestConfigFile runs the documented example configuration.
func TestConfigFile(t *testing.T) {
	t.Parallel()
	cfg, err := filepath.Abs("testdata/capfs.toml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := runCapfs(t, dir, "--config", cfg, "mounts").want(t, 0)
	for _, want := range []string{"/project", "/docs", "ro", "/scratch", "memory"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("mounts from the example config lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCapfs(t, dir, "--config", cfg, "cat", "project/README.txt").want(t, 0)
	if r.stdout != "hello from the config example\n" {
		t.Errorf("cat = %q", r.stdout)
	}
	// The example's policy file denies private.txt.
	r = runCapfs(t, dir, "--config", cfg, "cat", "docs/private.txt").want(t, 1)
	if !strings.Contains(r.stderr, "private notes (fs_permission_denied)") {
		t.Errorf("cat of a denied file: %q", r.stderr)
	}
	// --mount adds to the configuration's mounts.
	r = runCapfs(t, dir, "--config", cfg, "-m", "extra=memory:", "ls").want(t, 0)
	if r.stdout != "docs/\nextra/\nproject/\nscratch/\n" {
		t.Errorf("ls = %q", r.stdout)
	}
}

// TestAudit checks that the commands' calls land in the audit log, and that the
// default log goes under $XDG_STATE_HOME.
func TestAudit(t *testing.T) {
	t.Parallel()
	root := project(t)
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	runCapfs(t, root, "-m", "p=physical:"+root, "--audit", logPath, "--subject", "tester", "cat", "p/README.md").want(t, 0)
	runCapfs(t, root, "-m", "p=physical:"+root, "--audit", logPath, "cat", "p/.env").want(t, 1)
	evs := readAudit(t, logPath)
	var sawRead, sawDenied bool
	for _, e := range evs {
		if e.Path == "p/README.md" && e.Outcome == audit.OK && e.Subject == "tester" {
			sawRead = true
		}
		if e.Path == "p/.env" && e.Outcome == audit.Denied && e.Subject == "capfs/cat" {
			sawDenied = true
		}
		noHostPath(t, e.Path+e.Dest+e.GuestPath, root)
	}
	if !sawRead || !sawDenied {
		t.Errorf("audit log lacks the read (%v) or the denial (%v): %+v", sawRead, sawDenied, evs)
	}

	state := t.TempDir()
	runCapfsEnvState(t, root, state, "-m", "p=physical:"+root, "ls", "p").want(t, 0)
	if evs := readAudit(t, filepath.Join(state, "capfs", "audit.jsonl")); len(evs) == 0 {
		t.Error("the default audit log is empty")
	}
}

func runCapfsEnvState(t *testing.T, dir, state string, args ...string) result {
	t.Helper()
	return runCapfsEnv(t, dir, []string{"XDG_STATE_HOME=" + state}, args...)
}

func readAudit(t *testing.T, name string) []audit.Event {
	t.Helper()
	f, err := audit.OpenLogFile(name) // a rotated one may be compressed
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := audit.ReadJSONL(f)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// gitRepo makes a git repository with one commit and returns its work tree.
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root := t.TempDir()
	writeTree(t, root, files)
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "initial"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return root
}

// TestDefaults checks the no-flag namespace inside a git repository: project is
// the current directory, ref/head the same directory at HEAD (read-only), tmp a
// memory mount.
func TestDefaults(t *testing.T) {
	t.Parallel()
	root := gitRepo(t, map[string]string{"a.txt": "committed\n", "sub/b.txt": "b\n"})
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCapfs(t, root, "ls").want(t, 0)
	if r.stdout != "project/\nref/\ntmp/\n" {
		t.Errorf("ls = %q", r.stdout)
	}
	r = runCapfs(t, root, "mounts").want(t, 0)
	for _, line := range []string{"/project", "/ref/head", "/tmp"} {
		if !strings.Contains(r.stdout, line) {
			t.Errorf("mounts lacks %s:\n%s", line, r.stdout)
		}
	}
	noHostPath(t, r.stdout, root)
	r = runCapfs(t, root, "cat", "ref/head/a.txt", "project/a.txt").want(t, 0)
	if r.stdout != "committed\nedited\n" {
		t.Errorf("cat = %q", r.stdout)
	}
	r = runCapfs(t, root, "stat", "ref/head/a.txt").want(t, 0)
	if !strings.Contains(r.stdout, "(git, read-only)") {
		t.Errorf("ref/head is not read-only:\n%s", r.stdout)
	}
	r = runCapfs(t, root, "diff", "-x", ".git/**", "ref/head", "project").want(t, 0)
	if !strings.Contains(r.stdout, "diff --git a/a.txt b/a.txt") || !strings.Contains(r.stdout, "-committed\n+edited\n") || strings.Contains(r.stdout, "b.txt") {
		t.Errorf("diff ref/head project:\n%s", r.stdout)
	}
	// In a subdirectory, ref/head is that subdirectory at HEAD.
	r = runCapfs(t, filepath.Join(root, "sub"), "ls", "ref/head").want(t, 0)
	if r.stdout != "b.txt\n" {
		t.Errorf("ls ref/head from sub = %q", r.stdout)
	}

	// Outside a repository: no ref/head.
	plain := t.TempDir()
	if _, _, inRepo := gitTop(plain); inRepo {
		t.Skip("the temporary directory is inside a git repository")
	}
	r = runCapfs(t, plain, "ls").want(t, 0)
	if r.stdout != "project/\ntmp/\n" {
		t.Errorf("ls outside a repository = %q", r.stdout)
	}
}

// TestGitMount mounts git revisions with --mount.
func TestGitMount(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t, map[string]string{"a.txt": "committed\n"})
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := runCapfs(t, dir, "-m", "r="+"git:"+repo+"@main", "-m", "h=git:"+repo, "cat", "r/a.txt", "h/a.txt").want(t, 0)
	if r.stdout != "committed\ncommitted\n" {
		t.Errorf("cat = %q", r.stdout)
	}
	r = runCapfs(t, dir, "-m", "r=git:"+repo+"@main", "mounts").want(t, 0)
	if lines := strings.Split(r.stdout, "\n"); len(lines) < 2 || strings.Join(strings.Fields(lines[1])[:3], " ") != "/r git ro" {
		t.Errorf("mounts:\n%s", r.stdout)
	}
	r = runCapfs(t, dir, "-m", "r=git:"+repo+"@no-such-rev", "ls").want(t, 2)
	if !strings.Contains(r.stderr, "no-such-rev") || !strings.Contains(r.stderr, "(not_found)") {
		t.Errorf("bad revision: %q", r.stderr)
	}
	// ",rw" cannot make a git mount writable.
	r = runCapfs(t, dir, "-m", "r=git:"+repo+",rw", "stat", "r/a.txt").want(t, 0)
	if !strings.Contains(r.stdout, "(git, read-only)") {
		t.Errorf("a git mount is writable:\n%s", r.stdout)
	}
}

// capfsServer is a capfs command line running in-process as a server a test
// drives ([startCapfs]): its stdin and stdout are pipes, its stderr a buffer.
type capfsServer struct {
	stdin    *io.PipeWriter // the command's stdin: Close is its end of input
	stdout   *io.PipeReader // the command's stdout, at EOF once it returned
	stderr   *lockedBuffer
	args     []string
	cancel   context.CancelFunc
	finished chan struct{} // closed when the command returned, with result set
	result   outcome
}

// outcome is how an in-process command line ended: its exit code, or the
// panic it raised (with the stack).
type outcome struct {
	code  int
	panic string
}

// runExecute runs [execute] and reports its outcome on done, a panic
// included.
func runExecute(ctx context.Context, env environ, args []string, stdin io.Reader, stdout, stderr io.Writer, done chan<- outcome) {
	defer func() {
		if p := recover(); p != nil {
			done <- outcome{panic: fmt.Sprintf("%v\n%s", p, debug.Stack())}
		}
	}()
	done <- outcome{code: execute(ctx, env, args, stdin, stdout, stderr)}
}

// startCapfs starts the command line args in-process in dir, with
// os.Environ(), a temporary XDG_STATE_HOME and env, as a server (capfs mcp)
// the test talks to through its pipes. The test's cleanup stops it.
func startCapfs(t *testing.T, dir string, env []string, args ...string) *capfsServer {
	t.Helper()
	env = append(append(os.Environ(), "XDG_STATE_HOME="+t.TempDir()), env...)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	s := &capfsServer{stdin: inW, stdout: outR, stderr: &lockedBuffer{}, args: args, cancel: cancel, finished: make(chan struct{})}
	go func() {
		ran := make(chan outcome, 1)
		runExecute(ctx, testEnviron(dir, env), args, inR, outW, s.stderr, ran)
		s.result = <-ran
		outW.Close() // the reader's EOF
		inR.Close()  // a write to the stdin of a command that returned fails
		close(s.finished)
	}()
	t.Cleanup(func() {
		if s.stop() < 0 {
			t.Errorf("capfs %q still running 20 s after it was stopped (stderr: %s)", args, s.stderr.String())
		}
		if s.result.panic != "" {
			t.Errorf("capfs %q panicked: %s", args, s.result.panic)
		}
	})
	return s
}

// stop ends the server as SIGINT ends capfs (its context is cancelled) and
// returns its exit code, or -1 when it has not returned 20 s later.
func (s *capfsServer) stop() int {
	s.cancel()
	return s.wait()
}

// wait waits up to 20 s for the server to return and returns its exit code,
// or -1.
func (s *capfsServer) wait() int {
	select {
	case <-s.finished:
		return s.result.code
	case <-time.After(20 * time.Second):
		return -1
	}
}

// transport is an MCP transport over the server's stdin and stdout. Its
// Close waits for the server to return, as the end of a process is waited
// for: a next server on the same files finds them free.
func (s *capfsServer) transport() mcp.Transport {
	return &mcp.IOTransport{Reader: s.stdout, Writer: waitCloser{s}}
}

// waitCloser writes to a server's stdin; Close ends it and waits for the
// server ([capfsServer.wait]).
type waitCloser struct{ s *capfsServer }

func (w waitCloser) Write(p []byte) (int, error) { return w.s.stdin.Write(p) }

func (w waitCloser) Close() error {
	w.s.stdin.Close()
	if w.s.wait() < 0 {
		return fmt.Errorf("capfs %q still running 20 s after its stdin closed", w.s.args)
	}
	return nil
}

// waitStderr waits up to 30 s for a line of the server's stderr containing
// sub and returns it from sub on, without its newline.
func (s *capfsServer) waitStderr(t *testing.T, sub string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		out := s.stderr.String()
		if i := strings.Index(out, sub); i >= 0 {
			line, _, _ := strings.Cut(out[i:], "\n")
			return line
		}
	}
	t.Fatalf("capfs %q did not write %q on stderr in 30 s: %s", s.args, sub, s.stderr.String())
	return ""
}
