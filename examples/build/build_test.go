package build

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/internal/testenv"
)

// capfsBin is the capfs command, built once by TestMain.
var capfsBin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "capfs-build-example-")
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
	capfsBin = filepath.Join(tmp, "capfs")
	build := exec.Command("go", "build", "-o", capfsBin, "github.com/capfs/capfs/cmd/capfs")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building capfs:", err)
		return 1
	}
	return m.Run()
}

// copyProject copies hello/ (without build outputs) to a new directory.
func copyProject(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "hello")
	err := filepath.WalkDir("hello", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("hello", p)
		if rel == "bin" {
			return fs.SkipDir
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// capfsRun runs `capfs --audit LOG run -- make ARGS...` in dir.
func capfsRun(t *testing.T, dir, log string, makeArgs ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(capfsBin, append([]string{"--audit", log, "run", "--", "make"}, makeArgs...)...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// skipWithoutSandbox skips when bubblewrap or make is missing, or bubblewrap
// cannot create its namespaces here.
func skipWithoutSandbox(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"bwrap", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	dir := t.TempDir()
	cmd := exec.Command(capfsBin, "--audit", filepath.Join(dir, "a.jsonl"), "run", "--", "true")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("bubblewrap cannot run here: %v\n%s", err, out)
	}
}

// TestSandboxedMake runs `capfs run -- make` on a copy of the sample project with
// no configuration, and checks the compiled program came back and runs on the
// host, a second run has nothing to do, and the audit log holds the sync-back's
// writes.
func TestSandboxedMake(t *testing.T) {
	skipWithoutSandbox(t)
	var target, bin, greeting string
	if _, err := exec.LookPath("cc"); err == nil {
		bin, greeting = "bin/hello", "bin/greeting.txt"
	} else {
		if testing.Short() {
			t.Skip("no C compiler, and the Go build of the sample is slow in -short mode")
		}
		target, bin, greeting = "go", "bin/hello-go", "bin/greeting-go.txt"
	}
	dir := copyProject(t)
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	var makeArgs []string
	if target != "" {
		makeArgs = []string{target}
	}
	_, stderr, code := capfsRun(t, dir, log, makeArgs...)
	if code != 0 {
		t.Fatalf("capfs run -- make exited %d:\n%s", code, stderr)
	}
	for _, want := range []string{"(sandboxed; wrappers: bubblewrap", "audit log: " + log} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	// The summary lists each added file ("  A project/bin/hello  15.6 KiB").
	for _, f := range []string{bin, greeting} {
		listed := false
		for _, line := range strings.Split(stderr, "\n") {
			if fields := strings.Fields(line); len(fields) >= 2 && fields[0] == "A" && fields[1] == "project/"+f {
				listed = true
			}
		}
		if !listed {
			t.Errorf("the summary does not list project/%s as added:\n%s", f, stderr)
		}
	}
	got, err := os.ReadFile(filepath.Join(dir, greeting))
	if err != nil || string(got) != "Hello, sandbox, from inside the capfs sandbox!\n" {
		t.Errorf("%s = %q, %v", greeting, got, err)
	}
	out, err := exec.Command(filepath.Join(dir, bin), "host").Output()
	if err != nil || string(out) != "Hello, host, from inside the capfs sandbox!\n" {
		t.Errorf("running the synced-back %s on the host: %q, %v", bin, out, err)
	}

	// The outputs are up to date (modification times survive the round trip):
	// make has nothing to do, and nothing changes.
	_, stderr, code = capfsRun(t, dir, log, makeArgs...)
	if code != 0 || !strings.Contains(stderr, "no changes in project") {
		t.Errorf("second run: exit %d, stderr:\n%s", code, stderr)
	}

	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events, err := audit.ReadJSONL(f)
	if err != nil {
		t.Fatal(err)
	}
	var wrote, ran bool
	for _, e := range events {
		if e.Path == "project/"+bin && e.Outcome == audit.OK && e.Subject == "capfs/run" {
			wrote = true
		}
		if e.Op == "run" && e.Outcome == audit.OK {
			ran = true
		}
		if strings.Contains(e.Path+e.Dest+e.GuestPath, dir) {
			t.Errorf("an audit event names the host path: %+v", e)
		}
	}
	if !wrote || !ran {
		t.Errorf("audit log lacks the run (%v) or the write of %s (%v)", ran, bin, wrote)
	}
}
