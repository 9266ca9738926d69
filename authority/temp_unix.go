//go:build unix

package authority

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockNew creates the lock file path (which must not exist) and locks it.
func lockNew(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return f, nil
}

// lockExisting locks the lock file path if no process holds it.
func lockExisting(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// unlock releases a lock, removing its file first when remove is set (so no
// other process can lock a file about to disappear and think it owns it).
func unlock(f *os.File, remove bool) {
	if f == nil {
		return
	}
	if remove {
		os.Remove(f.Name())
	}
	f.Close()
}
