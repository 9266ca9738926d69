//go:build !linux

package main

import (
	"github.com/capfs/capfs/vfs"
	"github.com/spf13/cobra"
)

// The commands below need Linux: run and sync check out and sync back through
// materialize (openat2, O_PATH) and run under bubblewrap; cache serves run's
// build caches; mount serves FUSE (go-fuse, Linux here). On this system each
// exists, so help lists it, and fails with not_supported saying why.

func newRunCmd(o *globalOptions) *cobra.Command {
	return linuxOnlyCmd("run", "Run a command in a sandbox on the namespace", "the sandbox (bubblewrap, checkouts, the lazy FUSE layer) is Linux-only for now")
}

func newSyncCmd(o *globalOptions) *cobra.Command {
	return linuxOnlyCmd("sync", "Sync a kept checkout back", "sync-back works on capfs run's checkouts, which are Linux-only for now")
}

func newCacheCmd(o *globalOptions) *cobra.Command {
	return linuxOnlyCmd("cache", "Manage capfs run's build caches", "the build caches serve capfs run, which is Linux-only for now")
}

func newMountCmd(o *globalOptions) *cobra.Command {
	return linuxOnlyCmd("mount", "Serve the namespace on a host directory through FUSE", "FUSE export is not available on this OS")
}

// runEgressShim does nothing: the egress shim runs inside capfs run's
// sandbox, which this system does not have.
func runEgressShim() {}

// lazyAvailable fails: lazy sandboxes need FUSE and the sandbox, Linux-only.
func lazyAvailable() error {
	return vfs.NewError(vfs.CodeNotSupported, "run", vfs.Path{}, "lazy sandboxes (FUSE) are Linux-only for now")
}
