//go:build !linux && !windows

package sqlite

import "os"

// datasync makes f's data durable. Without fdatasync it is a full sync
// (F_FULLFSYNC on darwin, through [os.File.Sync]).
func datasync(f *os.File) error { return f.Sync() }
