package fuseexport

import (
	"testing"
	"time"

	"github.com/capfs/capfs/dir"
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
