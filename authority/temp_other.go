//go:build !unix

package authority

import "os"

// Without flock, a workspace's lock file only marks it; ReapTemp cannot tell a
// live owner from a dead one and reaps nothing.
func lockNew(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
}

func lockExisting(path string) (*os.File, error) { return nil, os.ErrPermission }

func unlock(f *os.File, remove bool) {
	if f == nil {
		return
	}
	if remove {
		os.Remove(f.Name())
	}
	f.Close()
}
