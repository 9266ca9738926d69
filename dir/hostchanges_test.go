package dir_test

import (
	"context"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// TestHostChanges: a Dir's HostChanges channel receives after a write lock
// or a revocation by its own Control or an ancestor's, never blocks the
// host, and stops after stop.
func TestHostChanges(t *testing.T) {
	m := memory.New()
	_ = m.Mkdir(context.Background(), vfs.MustParse("sub"), 0o755)
	d, ctl := dir.New(m)
	child, err := ctl.Child(context.Background(), "sub")
	if err != nil {
		t.Fatal(err)
	}
	ch, stop := child.Dir().HostChanges()
	ctl.SetWritable(false)
	ctl.SetWritable(true) // coalesced with the first: the host does not block
	select {
	case <-ch:
	default:
		t.Fatal("no value after the parent's SetWritable")
	}
	if child.Dir().Revoked() {
		t.Fatal("Revoked before any revocation")
	}
	ctl.Revoke()
	select {
	case <-ch:
	default:
		t.Fatal("no value after the parent's Revoke")
	}
	if !child.Dir().Revoked() || !d.Revoked() {
		t.Error("Revoked false after the parent's Revoke")
	}
	stop()
	stop()
	ctl.SetWritable(false)
	select {
	case <-ch:
		t.Error("a value after stop")
	default:
	}
}
