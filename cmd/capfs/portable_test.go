package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// resolvers are the values of CAPFS_PHYSICAL_RESOLVER every test here runs
// with: openat2 where the kernel has it, and the portable walk.
var resolvers = []string{"auto", "portable"}

// stateEnv is an environment with its own state directory (kept checkouts,
// journals, the audit log) and checkout base, shared by the calls of one test.
func stateEnv(t *testing.T) (env []string, base string) {
	t.Helper()
	base = t.TempDir()
	state := t.TempDir()
	// Cleanups run last first: this one runs after the test's own (which
	// kill a capfs still running) and before the directories are removed.
	t.Cleanup(func() { detachMountsUnder(t, state) })
	return []string{"XDG_STATE_HOME=" + state, "CAPFS_TMPDIR=" + base}, base
}

// TestLinuxOnlyCmd: a command other systems cannot run (cmd_other.go) takes any
// arguments and fails with not_supported, naming itself and the reason, and
// exits as a failure, not a usage error.
func TestLinuxOnlyCmd(t *testing.T) {
	c := linuxOnlyCmd("mount", "Serve", "FUSE export is not available on this OS")
	if !c.DisableFlagParsing {
		t.Error("the command parses flags: a Linux-only flag would fail as a usage error first")
	}
	err := c.RunE(c, []string{"--ro", "/mnt"})
	var ve *vfs.Error
	if !errors.As(err, &ve) || ve.Code != vfs.CodeNotSupported {
		t.Fatalf("RunE = %v, want a not_supported error", err)
	}
	if code := exitCodeOf(err); code != exitFailed {
		t.Errorf("exit status %d, want %d", code, exitFailed)
	}
	msg := formatError(err)
	for _, want := range []string{"mount", "FUSE export is not available on this OS"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
}
