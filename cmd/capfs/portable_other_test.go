//go:build !linux

package main

import "testing"

// detachMountsUnder does nothing: lazy runs mount FUSE on Linux only
// (run_e2e_test.go has the Linux one).
func detachMountsUnder(*testing.T, string) {}

// needSandbox skips t: capfs run's sandbox is Linux-only (run_test.go has the
// Linux one).
func needSandbox(t *testing.T) {
	t.Helper()
	t.Skip(sandboxReason)
}

// sandboxReason says why capfs run cannot sandbox here.
const sandboxReason = "capfs run's sandbox (bubblewrap) is Linux-only"
