//go:build windows

package sqlite

import (
	"errors"
	"math"
	"os"

	"golang.org/x/sys/windows"
)

// lockExclusive locks f exclusively without waiting; errWouldBlock when
// another holder has it. Windows byte-range locks are mandatory, so the lock
// covers one byte far past any data (and past SQLite's own lock bytes): it
// excludes another FS without blocking SQLite's reads and writes.
func lockExclusive(f *os.File) error {
	ol := windows.Overlapped{Offset: math.MaxUint32 - 1, OffsetHigh: math.MaxUint32 >> 1}
	err := windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return errWouldBlock
	}
	return err
}

// datasync makes f's data durable. FlushFileBuffers needs a handle open for
// writing, so a read-only f is synced through a second, writable handle.
func datasync(f *os.File) error {
	err := f.Sync()
	if !errors.Is(err, windows.ERROR_ACCESS_DENIED) {
		return err
	}
	w, err := os.OpenFile(f.Name(), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer w.Close()
	return w.Sync()
}
