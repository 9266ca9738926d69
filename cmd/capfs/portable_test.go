package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/capfs/capfs/vfs"
)

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
