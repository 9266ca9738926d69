//go:build linux

package fuseexport

import (
	"testing"
	"time"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// mountT mounts d on a fresh directory for the length of t, or skips t when
// this machine cannot mount FUSE file systems.
func mountT(t testing.TB, d *dir.Dir, opts Options) (string, *Server) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("FUSE is not usable here (needs /dev/fuse, and root or fusermount3 from the fuse3 package; make sysdeps installs it): %v", err)
	}
	mp := t.TempDir()
	s, err := Mount(mp, d, opts)
	if err != nil {
		t.Fatalf("Mount: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(100 * time.Millisecond); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return mp, s
}

// physicalT is a physical backend over a fresh host directory, closed when
// t ends.
func physicalT(t testing.TB) *physical.FS {
	t.Helper()
	pb, err := physical.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pb.Close() })
	return pb
}

// probeMount is the host-side backend the conformance suites drive a mount
// through. It is the probe, not the subject: it walks with the portable
// resolver, since openat2 fails a resolution that takes a link target's ".."
// with EAGAIN whenever a rename lands anywhere in the system meanwhile, which
// over FUSE (a round trip per link) on a loaded test run is every try.
func probeMount(t *testing.T, mp string) vfs.Backend {
	t.Helper()
	b, err := physical.New(mp, physical.WithResolver(physical.ResolverPortable))
	if err != nil {
		t.Fatalf("physical.New on the mount: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
