//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestBwrapExecCheck: a command that is not found inside exits 127, one that
// cannot be executed 126, each with a line naming it, as in a shell; with
// NoExecCheck bwrap's own status (1) comes back.
func TestBwrapExecCheck(t *testing.T) {
	needBwrap(t)
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, "noexec"), []byte("echo hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := Mount{Source: d, Target: "/w"}
	for _, tc := range []struct {
		path string
		code int
		msg  string
	}{
		{"capfs-no-such-command", 127, "capfs-no-such-command: command not found"},
		{"/w/missing", 127, "/w/missing: no such file"},
		{"/w/noexec", 126, "/w/noexec: permission denied"},
		{"/w", 126, "/w: is a directory"},
		{"true", 0, ""},
	} {
		res, _, errOut := runOut(t, bwrapRunner(BubblewrapOptions{}), &Launch{Path: tc.path, Mounts: []Mount{m}})
		if res.ExitCode != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tc.path, res.ExitCode, errOut, tc.code, tc.msg)
		}
	}
	res, _, _ := runOut(t, bwrapRunner(BubblewrapOptions{NoExecCheck: true}), &Launch{Path: "capfs-no-such-command"})
	if res.ExitCode != 1 {
		t.Errorf("NoExecCheck: exit %d, want bwrap's 1", res.ExitCode)
	}
}

// TestBwrapTerminalAndSignals: with a Terminal the command has it as its
// controlling terminal; Signals reach it while it runs.
func TestBwrapTerminalAndSignals(t *testing.T) {
	needBwrap(t)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	go func() {
		buf := make([]byte, 1024)
		for {
			if _, err := ptmx.Read(buf); err != nil {
				return
			}
		}
	}()
	sigs := make(chan os.Signal, 1)
	var errb strings.Builder
	l := &Launch{Path: "sh", Args: []string{"-c", `test -t 0 || exit 3; trap 'exit 42' TERM; echo ready >&2; while :; do sleep 0.05; done`},
		Stdin: tty, Stdout: tty, Stderr: &lockedBuilder{b: &errb}, Terminal: tty, Signals: sigs}
	go func() {
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) && !strings.Contains(lockedString(&errb), "ready") {
			time.Sleep(20 * time.Millisecond)
		}
		sigs <- syscall.SIGTERM
	}()
	res, err := bwrapRunner(BubblewrapOptions{}).Run(t.Context(), l)
	tty.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The shell traps TERM (42); bwrap, in the same process group, may be the
	// one to report it (128+15).
	if res.ExitCode != 42 && res.ExitCode != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d (stderr %q): want the trap's 42 or death by SIGTERM", res.ExitCode, lockedString(&errb))
	}
}

var builderMu = make(chan struct{}, 1)

type lockedBuilder struct{ b *strings.Builder }

func (w *lockedBuilder) Write(p []byte) (int, error) {
	builderMu <- struct{}{}
	defer func() { <-builderMu }()
	return w.b.Write(p)
}

func lockedString(b *strings.Builder) string {
	builderMu <- struct{}{}
	defer func() { <-builderMu }()
	return b.String()
}
