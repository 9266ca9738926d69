//go:build unix && !linux

package cas

import (
	"syscall"
	"testing"
)

type hostSourceForTest struct{}

// check has nothing to check here: SnapshotHost reads through the physical
// backend, whose own tests cover swapped links.
func (hostSourceForTest) check(t *testing.T, host, outside string) error {
	t.Skip("SnapshotHost reads through the physical backend on this system; its tests cover swapped links")
	return nil
}

func mkfifo(t *testing.T, p string) {
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
}
