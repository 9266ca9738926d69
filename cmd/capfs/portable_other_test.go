//go:build !linux

package main

import "testing"

// detachMountsUnder does nothing: lazy runs mount FUSE on Linux only
// (run_e2e_test.go has the Linux one).
func detachMountsUnder(*testing.T, string) {}
