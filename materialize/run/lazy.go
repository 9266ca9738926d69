//go:build linux

package run

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/capfs/capfs/backends/overlay"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/fuseexport"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// Lazy is a lazy mount's work tree: a Dir served through FUSE with a
// copy-on-write upper layer ([overlay.Overlay]).
//
// Start-up makes a constant number of Dir calls whatever the tree's size (the
// root's Stat when mounting).
type Lazy struct {
	Mountpoint string // the FUSE mount to bind into the sandbox
	priv       string // the private directory (0700) holding the mount point
	upper      string // the upper directory (capfs-checkout-*: kept and recovered as a checkout)
	// restoreProcs undoes narrowProcs (nil: nothing to undo).
	restoreProcs func()
	ov           *overlay.Overlay
	srv          *fuseexport.Server
	tree         bool // the upper is handed on (to a Tree, or left for the user)
}

// LazyOptions configure [StartLazy].
type LazyOptions struct {
	// View, if not nil, decides the sandbox's calls as they are made (paths
	// from the work tree's root); a [ViewPolicy] also hides from listings what
	// the source's policy denies.
	View policy.Policy
	// MountDir is where the mount point's private directory is made ("":
	// [LazyMountDir]). Dead mounts a killed run left there are swept first.
	MountDir string
	// Unaddressable, if not nil, is told of each name a listing leaves out
	// because no path can hold it ([fuseexport.Options.Unaddressable]).
	Unaddressable func(vfs.Path, vfs.Unaddressable)
	// NarrowProcs lowers GOMAXPROCS for the mount's life (see [LazyProcs]).
	NarrowProcs bool
}

// LazyAvailable reports whether lazy mounts can work here (FUSE usable).
func LazyAvailable() error { return fuseexport.Available() }

// LazyUpperRoom is the room a lazy mount's upper directory asks of /dev/shm:
// the upper holds what the command writes, which nobody knows before it runs.
const LazyUpperRoom = 1 << 30

// LazyBase is the parent of a lazy mount's upper directory.
//
// It is where checkouts are made ([materialize.DefaultBase]), asking for
// [LazyUpperRoom]: $CAPFS_TMPDIR when set, else /dev/shm when it is a
// writable tmpfs with 1 GiB (and a margin) free, else the temporary
// directory. On tmpfs the command's files are written to memory and copied
// to the source once, at sync-back, as a checkout's are; on a disk, each new
// file would be made twice there (in the upper, then in the source), and a
// file system that scans recently freed inodes at every creation (ext4
// without a journal) pays that twice. A command that writes more than
// /dev/shm holds gets ENOSPC: $CAPFS_TMPDIR puts the upper on a disk.
func LazyBase() string {
	return materialize.DefaultBase(LazyUpperRoom)
}

// StartLazy serves work on a new mount point with a copy-on-write upper.
//
// Each is made in a new private directory (mode 0700): the upper under
// [LazyBase], named capfs-checkout-* like a checkout, so that a kept one is
// found, synced and recovered as checkouts are; the mount point under
// opts.MountDir. Reads of the source are decided by work's own policy as
// well as opts.View, so hidden paths are absent.
func StartLazy(ctx context.Context, work *dir.Dir, opts LazyOptions) (*Lazy, error) {
	if err := fuseexport.Available(); err != nil {
		return nil, err
	}
	base := LazyBase()
	mnt := opts.MountDir
	if mnt == "" {
		mnt = LazyMountDir()
	}
	SweepLazy(mnt)
	upper, err := os.MkdirTemp(base, "capfs-checkout-")
	if err != nil {
		return nil, err
	}
	// The mount point is in a private directory of its own: the mount's root
	// shows the work tree's mode, and with allow_other (root) nobody else may
	// reach it.
	priv, err := os.MkdirTemp(mnt, "capfs-lazy-")
	if err != nil {
		os.Remove(upper)
		return nil, err
	}
	lw := &Lazy{Mountpoint: filepath.Join(priv, "work"), upper: upper, priv: priv}
	if err := lw.mount(work, opts); err != nil {
		os.RemoveAll(upper)
		os.RemoveAll(priv)
		return nil, err
	}
	if opts.NarrowProcs {
		lw.restoreProcs = narrowProcs()
	}
	return lw, nil
}

// mount makes the layer over work and serves it at lw.Mountpoint.
func (lw *Lazy) mount(work *dir.Dir, o LazyOptions) error {
	if err := os.Mkdir(lw.Mountpoint, 0o700); err != nil {
		return err
	}
	var lower vfs.Backend = work.Backend()
	h, hiding := o.View.(ViewPolicy)
	if hiding {
		lower = hidingLower{Backend: lower, view: h}
	}
	var err error
	lw.ov, err = overlay.NewOverlay(lower, lw.upper)
	if err != nil {
		return err
	}
	var opts []dir.Option
	if o.View != nil {
		opts = append(opts, dir.WithPolicy(o.View))
	}
	if hiding {
		opts = append(opts, dir.WithHooks(h))
	}
	view, _ := dir.New(lw.ov, opts...)
	lw.srv, err = fuseexport.Mount(lw.Mountpoint, view, fuseexport.Options{AllowOther: os.Geteuid() == 0, Name: "capfs-lazy", Passthrough: true, ReadDirPlus: true, Unaddressable: o.Unaddressable})
	if err != nil {
		lw.ov.Close()
		return fmt.Errorf("lazy work tree: %w", err)
	}
	return nil
}

// SweepLazy removes the dead mounts that killed lazy mounts left under dir.
//
// Each capfs-lazy-* directory whose mount point is a dead FUSE mount
// (SIGKILL, a crash) is detached and removed. A live mount (another run's)
// answers, and is left alone; so is the killed run's upper directory, which
// holds its changes.
func SweepLazy(dir string) {
	dirs, _ := filepath.Glob(filepath.Join(dir, "capfs-lazy-*"))
	for _, d := range dirs {
		mp := filepath.Join(d, "work")
		if fuseexport.CheckStale(mp) == nil {
			continue
		}
		if fuseexport.ClearStale(mp) == nil {
			os.Remove(mp)
			os.Remove(d)
		}
	}
}

// UpperDir is the host directory holding the sandbox's changes.
func (lw *Lazy) UpperDir() string { return lw.upper }

// Stop unmounts the work tree.
//
// It waits up to two seconds for files the sandbox left open, then aborts
// the connection. Calling it again does nothing.
func (lw *Lazy) Stop() error { return lw.srv.Close(2 * time.Second) }

// Changes lists the changes the sandbox made (see [overlay.Overlay.Changes]).
func (lw *Lazy) Changes(ctx context.Context) ([]overlay.Change, error) {
	return lw.ov.Changes(ctx)
}

// Finish stops the mount and returns the Tree of the sandbox's changes.
//
// src, the work Dir the layer was made over, is the Tree's source. The Tree
// owns the upper directory from then on (its Close removes it unless kept).
// On failure the upper directory stays for the user ([Lazy.UpperDir]): Close
// leaves it. Either way capfs gets back the CPUs the mount took.
func (lw *Lazy) Finish(ctx context.Context, src *dir.Dir) (*materialize.Tree, error) {
	t, err := lw.finish(ctx, src)
	lw.restore() // the mount is stopped: the review has every CPU
	lw.tree = true
	return t, err
}

func (lw *Lazy) finish(ctx context.Context, src *dir.Dir) (*materialize.Tree, error) {
	if err := lw.Stop(); err != nil {
		return nil, err
	}
	return UpperTree(ctx, lw.ov, src)
}

// UpperTree returns the Tree of the changes ov holds over src.
//
// src is the Dir whose Backend is ov's lower. The Tree is ov's upper
// directory, with the base of every entry it changed (see
// [overlay.Overlay.Bases]), for the sync-back to judge changes and
// conflicts as a checkout's. ov must be stopped (unmounted).
func UpperTree(ctx context.Context, ov *overlay.Overlay, src *dir.Dir) (*materialize.Tree, error) {
	upper := ov.UpperDir()
	bases := ov.Bases()
	entries := make(map[string]materialize.Entry, len(bases))
	// The upper read as the overlay reads it: a link there is the guest's
	// data, followed beneath the upper only, never out to the host.
	up, uerr := physical.New(upper, physical.WithVerbatimLinks())
	if uerr == nil {
		defer up.Close()
	}
	for p, b := range bases {
		if uerr != nil || !holds(ctx, up, p) {
			// Not in the upper: removed, unless the layer still shows the
			// source's entry there (then it is unchanged).
			if vp, perr := vfs.ParseGuest(p); perr == nil {
				if _, err := ov.Lstat(ctx, vp); err == nil {
					continue
				}
			}
		}
		entries[p] = materialize.Entry{Type: b.Type, Mode: b.Mode, Size: b.Size, ModTime: b.ModTime, Digest: b.Digest, Target: b.Target}
	}
	if rt := ov.RootTime(); !rt.IsZero() {
		// The root's time when the layer started: a root whose entries the
		// command created and removed gets the time it left, as a checkout's.
		entries["."] = materialize.Entry{Type: fs.ModeDir, ModTime: rt}
	}
	return materialize.OpenUpper(ctx, src, upper, entries)
}

// holds reports whether upper holds an entry at p (its Lstat succeeds).
func holds(ctx context.Context, upper *physical.FS, p string) bool {
	vp, err := vfs.ParseGuest(p)
	if err == nil {
		_, err = upper.Lstat(ctx, vp)
	}
	return err == nil
}

// restore gives capfs back the CPUs narrowProcs took for the mount's life.
func (lw *Lazy) restore() {
	if lw.restoreProcs != nil {
		lw.restoreProcs()
	}
}

// Close stops the mount and removes the mount point, and the upper directory
// unless Finish handed it on.
func (lw *Lazy) Close() error {
	err := lw.Stop()
	lw.restore()
	// A mount the sandbox kept busy past the grace, then aborted, must not
	// outlive this process as a dead mount point.
	err = errors.Join(err, fuseexport.ClearStale(lw.Mountpoint))
	err = errors.Join(err, lw.ov.Close(), os.Remove(lw.Mountpoint), os.Remove(lw.priv))
	if !lw.tree {
		err = errors.Join(err, os.RemoveAll(lw.upper))
	}
	return err
}

// LazyProcs is how many CPUs capfs's own goroutines run on (GOMAXPROCS)
// while a lazy mount serves the command, on a machine of ncpu.
//
// It is a quarter of them, at least one. The server's requests are short
// (tens of microseconds), and each Go scheduler thread it wakes on another
// CPU takes that CPU from the command for a moment: with every CPU its own,
// a lazy C build on two CPUs took 1.29× a plain build's time, with one,
// 1.22× (medians of 10 alternated rounds; the compilers themselves ran 9 %
// longer beside the wider server).
func LazyProcs(ncpu int) int { return max(1, ncpu/4) }

// narrowProcs lowers GOMAXPROCS to LazyProcs for the life of a lazy mount and
// returns what restores it; GOMAXPROCS set in the environment is left alone.
func narrowProcs() (restore func()) {
	prev := runtime.GOMAXPROCS(0)
	n := LazyProcs(runtime.NumCPU())
	if os.Getenv("GOMAXPROCS") != "" || n >= prev {
		return func() {}
	}
	runtime.GOMAXPROCS(n)
	var once sync.Once
	return func() { once.Do(func() { runtime.GOMAXPROCS(prev) }) }
}
