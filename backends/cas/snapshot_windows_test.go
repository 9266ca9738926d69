//go:build windows

package cas

import "testing"

type hostSourceForTest struct{}

// check has nothing to check here: SnapshotHost reads through the physical
// backend, which is not available on this system.
func (hostSourceForTest) check(t *testing.T, host, outside string) error {
	t.Skip("SnapshotHost reads through the physical backend, not available on this system")
	return nil
}

// mkfifo skips t: windows has no FIFOs.
func mkfifo(t *testing.T, p string) {
	t.Helper()
	t.Skip("no FIFOs on windows")
}
