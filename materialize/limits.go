//go:build linux

package materialize

import "github.com/capfs/capfs/vfs"

// This file holds what a checkout shares with the writers of its changes:
// sync-back (syncback.Run) and Export bound their writes by the same
// Limits and list the changes they refuse as Refusal.

// Default limits of a sync-back (and of Export), used where a Limits field is 0.
const (
	DefaultMaxFiles       = 100_000 // entries created or rewritten
	DefaultMaxBytes int64 = 1 << 30 // bytes of regular files written (1 GiB)
	DefaultMaxDepth       = 64      // path components of any path written
)

// Limits bound what one sync-back (syncback.Run) or Export may write. A zero field means its default
// (DefaultMaxFiles, DefaultMaxBytes, DefaultMaxDepth); a negative one, no limit.
type Limits struct {
	MaxFiles int   // entries added, modified or type-changed (deletions, mode and time changes are not counted)
	MaxBytes int64 // total size of the regular files written
	MaxDepth int   // number of components of the deepest path written
}

// WithDefaults returns l with each zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxFiles == 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxDepth == 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// Refusal is a change a sync-back (syncback.Run) or Export refused to write.
type Refusal struct {
	Change Change
	Code   vfs.Code
	Reason string
}
