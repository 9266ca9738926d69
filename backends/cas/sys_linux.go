//go:build linux

package cas

import (
	"os"

	"golang.org/x/sys/unix"
)

// flock takes the store's cross-process lock: shared for an ingest, exclusive for
// a garbage collection. It waits for a holder of the other kind.
func flock(f *os.File, exclusive bool) {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		if err := unix.Flock(int(f.Fd()), how); err != unix.EINTR {
			return
		}
	}
}

func unflock(f *os.File) { unix.Flock(int(f.Fd()), unix.LOCK_UN) }

// syncDir makes everything written to the file system holding dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return err
	}
	return nil
}
