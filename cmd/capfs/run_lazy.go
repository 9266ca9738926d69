package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/fuseexport"
	"github.com/capfs/capfs/policy"
)

// lazyWork is the work tree of a lazy sandbox (capfs run --lazy): the work Dir
// served through FUSE with a copy-on-write upper layer (fuseexport.Overlay).
// Nothing is read or copied before the command starts: files are read through
// the work Dir on first access, every change lands in a private upper
// directory, and Changes lists them, with what each source entry was when
// first changed, for the sync-back.
//
// Start-up makes a constant number of Dir calls whatever the tree's size (the
// root's Stat when mounting).
//
// Wiring (run.go, owned by the run/materialize work): where runner.checkout is
// called for the work path, a lazy run calls startLazyWork(ctx, workDir, pol)
// instead and adds sandbox.Mount{Source: lw.Mountpoint, Target:
// sandboxTarget(workPath), Writable: true} to r.mounts; after the command
// exits it calls lw.Stop, then syncs lw.Changes(ctx) back from lw.UpperDir()
// (which needs a materialize entry point taking an upper directory and the
// changes' bases in place of a checkout's manifest), then lw.Close.
type lazyWork struct {
	Mountpoint string // the FUSE mount to bind into the sandbox
	dir        string // private directory holding the mount point and the upper
	ov         *fuseexport.Overlay
	srv        *fuseexport.Server
}

// lazyAvailable reports whether lazy sandboxes can work here (FUSE usable).
func lazyAvailable() error { return fuseexport.Available() }

// startLazyWork serves work on a new mount point with a copy-on-write upper,
// both in a new private directory (mode 0700) under $CAPFS_TMPDIR, else the
// temporary directory. pol, if not nil, decides the sandbox's changes as they
// are made (paths from the work tree's root: the default patterns, which match
// at any depth, decide as they would on the source), so a write the source
// would refuse at sync-back fails at once; reads are decided by work's own
// policy, so hidden paths are absent.
func startLazyWork(ctx context.Context, work *dir.Dir, pol policy.Policy) (*lazyWork, error) {
	if err := fuseexport.Available(); err != nil {
		return nil, err
	}
	base := os.Getenv("CAPFS_TMPDIR")
	if base == "" {
		base = os.TempDir()
	}
	priv, err := os.MkdirTemp(base, "capfs-lazy-")
	if err != nil {
		return nil, err
	}
	lw := &lazyWork{dir: priv, Mountpoint: filepath.Join(priv, "work")}
	upper := filepath.Join(priv, "upper")
	for _, d := range []string{lw.Mountpoint, upper} {
		if err := os.Mkdir(d, 0o700); err != nil {
			os.RemoveAll(priv)
			return nil, err
		}
	}
	lw.ov, err = fuseexport.NewOverlay(work.Backend(), upper)
	if err != nil {
		os.RemoveAll(priv)
		return nil, err
	}
	var opts []dir.Option
	if pol != nil {
		opts = append(opts, dir.WithPolicy(pol))
	}
	view, _ := dir.New(lw.ov, opts...)
	lw.srv, err = fuseexport.Mount(lw.Mountpoint, view, fuseexport.Options{AllowOther: os.Geteuid() == 0})
	if err != nil {
		lw.ov.Close()
		os.RemoveAll(priv)
		return nil, fmt.Errorf("lazy work tree: %w", err)
	}
	return lw, nil
}

// UpperDir is the host directory holding the sandbox's changes.
func (lw *lazyWork) UpperDir() string { return lw.ov.UpperDir() }

// Stop unmounts the work tree (waiting up to two seconds for files the
// sandbox left open, then aborting the connection). Calling it again does
// nothing.
func (lw *lazyWork) Stop() error { return lw.srv.Close(2 * time.Second) }

// Changes lists the changes the sandbox made (see fuseexport.Overlay.Changes).
func (lw *lazyWork) Changes(ctx context.Context) ([]fuseexport.Change, error) {
	return lw.ov.Changes(ctx)
}

// Close stops the mount and removes the private directory, upper included:
// call it once the changes are synced back (or to discard them).
func (lw *lazyWork) Close() error {
	err := lw.Stop()
	err = errors.Join(err, lw.ov.Close())
	return errors.Join(err, os.RemoveAll(lw.dir))
}
