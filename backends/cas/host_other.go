//go:build !linux

package cas

import (
	"context"

	"github.com/capfs/capfs/backends/physical"
)

// SnapshotHost is Snapshot of the host directory root, through the physical
// backend (on Linux it reads the directory directly, see host_linux.go). The stat
// cache compares size, permission and modification time only.
func (s *Store) SnapshotHost(ctx context.Context, root string, opts SnapshotOptions) (Digest, error) {
	b, err := physical.New(root)
	if err != nil {
		return Digest{}, err
	}
	if opts.StatCache == "" {
		opts.StatCache = "host:" + root
	}
	return s.snapshot(ctx, backendSource{b: b}, opts)
}
