package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/internal/mountkind"
	"github.com/capfs/capfs/vfs"
)

// TestNeedsBinary: the harness runs in a process of its own exactly the
// command lines whose command is run, sync or mount, whatever flags come
// first.
func TestNeedsBinary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"run", "--", "true"}, true},
		{[]string{"-m", "x=memory:", "--audit", "off", "run", "--work", "x", "--", "ls"}, true},
		{[]string{"--no-default-mounts", "-m", "p=physical:/tmp", "mount", "/mnt"}, true},
		{[]string{"sync", "--discard", "last"}, true},
		{[]string{"-m", "run=memory:", "ls", "run"}, false},
		{[]string{"--subject", "mount", "cat", "p/run"}, false},
		{[]string{"help", "run"}, false},
		{[]string{"cas", "snapshot", "list"}, false},
		{[]string{"ls", "--no-such-flag"}, false},
		{[]string{"no-such-command"}, false},
		{nil, false},
	} {
		if got := needsBinary(tc.args); got != tc.want {
			t.Errorf("needsBinary(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// TestEnvironInProcess: a command line run in-process takes its relative
// host paths (mount sources, --config, --audit, archive's output) from its
// environ's directory and its variables from the environ's, not from the
// test process's: two run side by side, each in its own directory.
func TestEnvironInProcess(t *testing.T) {
	t.Parallel()
	root := project(t)
	other := t.TempDir()
	writeTree(t, other, map[string]string{"src/other.txt": "other\n", "cfg/capfs.toml": "[[mount]]\npath = \"o\"\nkind = \"physical\"\nsource = \"../src\"\n"})
	t.Run("side by side", func(t *testing.T) {
		for dir, want := range map[string]string{root: "main.go\nutil/\n", other: "other.txt\n"} {
			t.Run(filepath.Base(dir), func(t *testing.T) {
				t.Parallel()
				if r := runCapfs(t, dir, "-m", "s=physical:src", "ls", "s").want(t, 0); r.stdout != want {
					t.Errorf("ls of a mount of src in %s = %q, want %q", dir, r.stdout, want)
				}
			})
		}
	})
	r := runCapfs(t, other, "--config", "cfg/capfs.toml", "cat", "o/other.txt").want(t, 0)
	if r.stdout != "other\n" {
		t.Errorf("cat through a relative --config = %q", r.stdout)
	}
	r = runCapfs(t, root, "-m", "p=physical:.", "--audit", "log/audit.jsonl", "archive", "p/src", "src.tar").want(t, 2) // log/ is missing
	if !strings.HasPrefix(r.stderr, "capfs: --audit log/audit.jsonl: ") {
		t.Errorf("a bad --audit is not named as written: %q", r.stderr)
	}
	if err := os.Mkdir(filepath.Join(root, "log"), 0o700); err != nil {
		t.Fatal(err)
	}
	runCapfs(t, root, "-m", "p=physical:.", "--audit", "log/audit.jsonl", "archive", "--format", "tar", "p/src", "src.tar").want(t, 0)
	for _, f := range []string{"log/audit.jsonl", "src.tar"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("%s was not written in the command line's directory: %v", f, err)
		}
	}
	if os.Getenv("CAPFS_PHYSICAL_RESOLVER") != "" {
		t.Skip("CAPFS_PHYSICAL_RESOLVER is set in the test's environment")
	}
	r = runCapfsEnv(t, root, []string{"CAPFS_PHYSICAL_RESOLVER=bogus"}, "-m", "p=physical:.", "ls", "p").want(t, 2)
	if !strings.Contains(r.stderr, `CAPFS_PHYSICAL_RESOLVER="bogus"`) {
		t.Errorf("the environ's CAPFS_PHYSICAL_RESOLVER was not read: %q", r.stderr)
	}
}

// The fakepanic kind panics when opened: a command line that mounts it
// panics in the middle of execute.
var _ = mountkind.Register(&mountkind.Kind{
	Name:  "fakepanic",
	Usage: "fakepanic:",
	Help:  "a mount that panics when opened (tests)",
	Parse: func(*mountSpec, string, string) error { return nil },
	Open: func(context.Context, *mountSpec, mountkind.Env) (vfs.Backend, error) {
		panic("fakepanic opened")
	},
})

// TestInProcessPanic: a panic in a command run in-process is caught and
// reported with its stack (the harness then fails the test), instead of
// ending the test binary.
func TestInProcessPanic(t *testing.T) {
	t.Parallel()
	done := make(chan outcome, 1)
	args := []string{"--no-default-mounts", "--audit", "off", "-m", "x=fakepanic:", "ls", "x"}
	runExecute(context.Background(), testEnviron(t.TempDir(), nil), args, strings.NewReader(""), io.Discard, io.Discard, done)
	if o := <-done; !strings.Contains(o.panic, "fakepanic opened") || !strings.Contains(o.panic, "goroutine") {
		t.Errorf("outcome of a panicking command line: %+v", o)
	}
}

// TestHostPathsAsWritten: an error about a relative host path of the
// command line names it as written, not joined to the working directory
// (which the library that opened it would otherwise show).
func TestHostPathsAsWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"bad.toml": "x = 1\n"})
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"nope.toml", []string{"--policy", "nope.toml", "ls"}},
		{"bad.toml", []string{"--policy", "bad.toml", "ls"}},
		{"nope.sqlar", []string{"-m", "x=memory:", "sqlite", "import-sqlar", "nope.sqlar", "x/y"}},
		{"bad.toml", []string{"cas", "--store", "bad.toml", "snapshot", "list"}},
	} {
		r := runCapfs(t, dir, append([]string{"--audit", "off"}, tc.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.name) || strings.Contains(r.stderr, dir) {
			t.Errorf("capfs %q: exit %d, stderr %q: want a failure naming %s without %s", tc.args, r.code, r.stderr, tc.name, dir)
		}
	}
}
