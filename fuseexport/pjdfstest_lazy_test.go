//go:build linux

package fuseexport_test

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize/run"
	"github.com/capfs/capfs/policy"
)

// TestPjdfstestLazyServe serves the lazy layer of `capfs run` for
// pjdfstest.sh until SIGTERM; it is skipped unless CAPFS_PJDFSTEST_LAZY is
// set.
//
// CAPFS_PJDFSTEST_LAZY is the host directory under the layer (a physical Dir
// with the CLI's default policy and GitGuard, as a session's). The layer is
// [run.StartLazy]'s, with the view policy `capfs run` gives it; its mount
// point is made under CAPFS_PJDFSTEST_LAZY_MOUNTDIR and written, once
// mounted, to the file CAPFS_PJDFSTEST_LAZY_READY. The mount point's private
// directory is opened to every user (0755): pjdfstest runs steps as other
// users, where a sandbox binds the mount point instead.
func TestPjdfstestLazyServe(t *testing.T) {
	root := os.Getenv("CAPFS_PJDFSTEST_LAZY")
	if root == "" {
		t.Skip("CAPFS_PJDFSTEST_LAZY not set: run by fuseexport/pjdfstest.sh")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	b, err := physical.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pol := policy.Defaults()
	src, _ := dir.New(b, dir.WithPolicy(pol), dir.WithHooks(dir.GitGuard(b)))
	lw, err := run.StartLazy(ctx, src, run.LazyOptions{
		View:     run.ViewPolicy{Inner: pol},
		MountDir: os.Getenv("CAPFS_PJDFSTEST_LAZY_MOUNTDIR"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := lw.Close(); err != nil {
			t.Error(err)
		}
	}()
	if err := os.Chmod(filepath.Dir(lw.Mountpoint), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv("CAPFS_PJDFSTEST_LAZY_READY"), []byte(lw.Mountpoint), 0o644); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
}
