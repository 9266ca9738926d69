//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/fuseexport"
	"github.com/capfs/capfs/materialize/run"
	"github.com/capfs/capfs/materialize/sandbox"
	"github.com/capfs/capfs/vfs"
)

// Tool directories through a mount of their own (issue 26: nothing hidden
// shows through).
//
// A run binds host directories for its tools: the project's build cache
// (cache.go), the host's Go module cache and, when it is not under /usr, Go
// toolchain. A bind mount's entry in the sandbox's /proc/self/mountinfo names
// its source's path within its file system (its "root" field), whatever the
// target: /root/.cache/capfs/<key>/data, /home/alice/go/pkg/mod. Only a mount
// that is a file system of its own shows "/" there. So the run serves them
// all through one FUSE mount of its own (a Dir over a Namespace holding each
// directory, physical backends, the module cache and toolchain read-only) and
// binds its subdirectories: mountinfo shows "/cache-0", "/gomod" and "/go".
// Read-only checkouts (grants) made in a directory on disk whose path would
// show ($CAPFS_TMPDIR) are served the same way ("/grant-N"). Where FUSE is
// not available the directories are bound as they are, and the run says so
// in its summary (noteShownMounts), as it does for what else still shows.
//
// The Dir has the default policy (allow all) and no audit, as the binds it
// stands for: these are the user's own caches, shown whole; every call is
// still one Dir call. Reads and writes of their files go to the kernel
// directly where FUSE passthrough works (fuseexport.Options.Passthrough).

// toolMount is the FUSE mount serving a run's tool directories.
type toolMount struct {
	srv  *fuseexport.Server
	priv string // the private directory (0700) holding the mount point
	mp   string // the mount point
	fss  []*physical.FS
}

// Names of the tool directories at the root of the mount.
const (
	toolGoMod  = "gomod"
	toolGoRoot = "go"
)

// toolFUSE reports whether FUSE mounts can be made here (a variable for
// tests of the fallback).
var toolFUSE = fuseexport.Available

// toolCacheName names the i-th cache (sandbox.CacheDir) in the mount.
func toolCacheName(i int) string { return "cache-" + strconv.Itoa(i) }

// toolDir is a host directory the mount serves: its name at the mount's
// root, whether read-only, and how to point the run at it (set gets the
// directory's path in the mount).
type toolDir struct {
	name, host string
	ro         bool
	set        func(string)
}

// toolDirs lists the host directories of opts the mount serves: every
// cache, read-write, the module cache and the toolchain, read-only, unless
// under /usr (the sandbox shows /usr as it is).
func toolDirs(opts *sandbox.BubblewrapOptions) []toolDir {
	var ds []toolDir
	for i := range opts.Caches {
		c := &opts.Caches[i]
		ds = append(ds, toolDir{toolCacheName(i), c.Source, false, func(p string) { c.Source = p }})
	}
	if opts.GoModCache != "" && !underUsr(opts.GoModCache) {
		ds = append(ds, toolDir{toolGoMod, opts.GoModCache, true, func(p string) { opts.GoModCache = p }})
	}
	if opts.GoRoot != "" && !underUsr(opts.GoRoot) {
		ds = append(ds, toolDir{toolGoRoot, opts.GoRoot, true, func(p string) { opts.GoRoot = p }})
	}
	return ds
}

func underUsr(p string) bool {
	p = filepath.Clean(p)
	return p == "/usr" || len(p) > 5 && p[:5] == "/usr/"
}

// mountToolDirs serves opts' tool directories (toolDirs) through one FUSE
// mount and points opts at it: each cache's Source, GoModCache and GoRoot
// become the mount's subdirectories. It returns the mount, nil when there
// is nothing to serve; on an error (no FUSE here, the mount failed) opts is
// unchanged.
func mountToolDirs(opts *sandbox.BubblewrapOptions) (*toolMount, error) {
	return mountTools(toolDirs(opts))
}

// mountTools serves ds through one FUSE mount (a Dir over a Namespace of
// physical backends) and calls each one's set with its path there.
func mountTools(ds []toolDir) (*toolMount, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	if err := toolFUSE(); err != nil {
		return nil, err
	}
	tm := &toolMount{}
	ns := vfs.NewNamespace()
	ids := []vfs.Path{vfs.Root}
	for _, d := range ds {
		fs, err := physical.New(d.host)
		if err != nil {
			tm.closeFS()
			return nil, err
		}
		tm.fss = append(tm.fss, fs)
		p := vfs.MustParse(d.name)
		if err := ns.Mount(p, fs, vfs.MountOptions{ReadOnly: d.ro}); err != nil {
			tm.closeFS()
			return nil, err
		}
		ids = append(ids, p)
	}
	if err := tm.mount(ns, ids); err != nil {
		tm.closeFS()
		return nil, err
	}
	for _, d := range ds {
		d.set(filepath.Join(tm.mp, d.name))
	}
	return tm, nil
}

// mount serves ns on a new mount point, in a private directory named as a
// lazy run's (capfs-lazy-*/work, under run.LazyMountDir), so that what a killed
// run leaves is swept the same way (run.SweepLazy).
func (tm *toolMount) mount(ns *vfs.Namespace, ids []vfs.Path) error {
	mnt := run.LazyMountDir()
	run.SweepLazy(mnt)
	priv, err := os.MkdirTemp(mnt, "capfs-lazy-tools-")
	if err != nil {
		return err
	}
	mp := filepath.Join(priv, "work")
	if err := os.Mkdir(mp, 0o700); err != nil {
		os.Remove(priv)
		return err
	}
	d, _ := dir.New(ns)
	srv, err := fuseexport.Mount(mp, d, fuseexport.Options{
		Mounts: ids, AllowOther: os.Geteuid() == 0, Name: "capfs-tools",
		Passthrough: true, ReadDirPlus: true,
	})
	if err != nil {
		os.Remove(mp)
		os.Remove(priv)
		return err
	}
	tm.srv, tm.priv, tm.mp = srv, priv, mp
	return nil
}

func (tm *toolMount) closeFS() {
	for _, fs := range tm.fss {
		fs.Close()
	}
	tm.fss = nil
}

// Close stops the mount (waiting up to two seconds for files the sandbox
// left open) and removes its mount point. Calling it again does nothing.
func (tm *toolMount) Close() error {
	if tm == nil || tm.srv == nil {
		return nil
	}
	err := tm.srv.Close(2 * time.Second)
	err = errors.Join(err, fuseexport.ClearStale(tm.mp), os.Remove(tm.mp), os.Remove(tm.priv))
	tm.closeFS()
	tm.srv = nil
	return err
}

// useToolMount serves opts' tool directories, and r's read-only checkouts
// whose path would show (grantsShown), through one mount of their own for
// r's run (closed with r), or notes for the summary that their host paths
// show in the sandbox's /proc/self/mountinfo, and why.
func (r *runner) useToolMount(opts *sandbox.BubblewrapOptions) {
	tools := toolDirs(opts)
	tm, err := mountTools(append(slices.Clip(tools), r.grantsShown()...))
	if err != nil {
		if len(tools) > 0 {
			r.shownNotes = append(r.shownNotes, toolPhrase(tools)+" as their host directories (no FUSE mount of their own here: "+showError(err)+")")
		}
		return
	}
	if tm != nil {
		r.subs = append(r.subs, tm.Close)
	}
}

// grantsShown lists r's read-only checkouts whose entry in the sandbox's
// mountinfo would name a host directory (namesHostDir: a checkout under
// $CAPFS_TMPDIR on a disk), to serve through the tools' mount: read-only,
// a checkout shows the same through FUSE as bound. A bound grant
// (--bind-grants) is left as it is, as is the writable work checkout of
// --no-lazy, which through FUSE would lose what a checkout offers over the
// lazy mode (FIFOs, sockets, any symlink): noteShownMounts names them.
func (r *runner) grantsShown() []toolDir {
	var ds []toolDir
	for i := range r.mounts {
		m := &r.mounts[i]
		if m.Writable || m.File != nil || m.Source == "" {
			continue
		}
		if shown, err := mountinfoRoot(m.Source); err != nil || !namesHostDir(shown) {
			continue
		}
		ds = append(ds, toolDir{"grant-" + strconv.Itoa(i), m.Source, true, func(p string) { m.Source = p }})
	}
	return ds
}

// toolPhrase names the tool directories for the summary.
func toolPhrase(ds []toolDir) string {
	var what []string
	for _, d := range ds {
		switch {
		case d.name == toolGoMod:
			what = append(what, "Go's module cache")
		case d.name == toolGoRoot:
			what = append(what, "the Go toolchain")
		case !slices.Contains(what, "the build cache"):
			what = append(what, "the build cache")
		}
	}
	if len(what) < 2 {
		return strings.Join(what, "")
	}
	return strings.Join(what[:len(what)-1], ", ") + " and " + what[len(what)-1]
}

// noteShownMounts notes, for the summary, each of r's mounts whose entry in
// the sandbox's /proc/self/mountinfo will name a host directory: a bind's
// root there is its source's path within its file system, and only a
// checkout that is a file system of its own (a tmpfs per checkout, as root
// on /dev/shm; the lazy FUSE mount) or sits at the top of one shows none. A
// checkout made under $CAPFS_TMPDIR on a disk shows that path (a directory
// of the user's, such as /home/alice/scratch/capfs-checkout-123): capfs
// cannot mount a file system of its own there without FUSE, and serving a
// checked-out work tree through FUSE is what the lazy mode is. So the run
// says which path shows, and how to hide it.
func (r *runner) noteShownMounts() {
	for _, m := range r.mounts {
		if m.Source == "" {
			continue
		}
		shown, err := mountinfoRoot(m.Source)
		if err != nil || !namesHostDir(shown) {
			continue
		}
		how := "its directory's path on its file system: $CAPFS_TMPDIR unset or on a tmpfs, or --lazy, hides it"
		if m.File != nil {
			how = "bound from the host directory: without --bind-grants it is copied"
		}
		r.shownNotes = append(r.shownNotes, fmt.Sprintf("%s as %s (%s)", m.Target, show(shown), how))
	}
}

// namesHostDir reports whether a mountinfo root names a directory beyond
// the temporary directories every host has: "/capfs-checkout-1" (a
// checkout's own name on /dev/shm) or "/tmp/capfs-checkout-1" does not,
// "/home/alice/scratch/capfs-checkout-1" does.
func namesHostDir(root string) bool {
	switch filepath.Dir(root) {
	case "/", "/tmp", "/var/tmp", "/dev/shm":
		return false
	}
	return root != "/"
}

// mountinfoRoot returns the path of host directory p within its file
// system: what a bind of p shows as its root in /proc/self/mountinfo (the
// root of p's mount joined with p's place below the mount point).
func mountinfoRoot(p string) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, real, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx); err != nil {
		return "", err
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return "", errors.New("no mount id (kernel before 5.8)")
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	id := strconv.FormatUint(stx.Mnt_id, 10)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != id {
			continue
		}
		rel, err := filepath.Rel(unescapeMountinfo(f[4]), real)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return "", errors.New("not beneath its mount point")
		}
		return filepath.Join(unescapeMountinfo(f[3]), rel), nil
	}
	return "", errors.New("mount not found")
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
