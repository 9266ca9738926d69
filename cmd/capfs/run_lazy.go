package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/fuseexport"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/sandbox"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// Lazy sandboxes (capfs run --lazy, the default where FUSE works).
//
// The work path is not checked out: the sandbox gets, bound at its target,
// a FUSE mount of a copy-on-write layer (fuseexport.Overlay) over the work Dir.
// Nothing is read or copied before the command starts; files are read through
// the Dir (its policy and audit) on first access, and every change lands in a
// private upper directory. After the command exits the mount is stopped and
// materialize.OpenUpper turns the upper directory and the layer's bases (what
// each changed source entry was when the command first saw it: looked it up,
// listed or read it) into a Tree, which the review syncs back exactly as a
// checkout's: the same plan, validation, conflicts, --sync modes, summary,
// kept checkouts and exit codes.
//
// Inside, the layer is decided by a policy mirroring the source's: a write the
// source would refuse fails at once (EACCES), every .git is read-only, and
// the contents of every .git are out of reach but the work root's, shown when
// its history scan allows (run_git.go).
//
// What differs from a checkout, and what a lazy run does not guarantee:
//
//   - Writes the source would refuse fail inside at once (EROFS) rather than
//     at sync-back; so do names the Dir cannot hold, FIFOs, sockets and
//     devices, symlinks that are absolute or leave the tree (EPERM), and
//     setuid or setgid bits (EACCES), which a checkout lets the command make
//     and then refuses or strips.
//   - The sandbox reads the source as it is when each file is first read,
//     not as it was at the start: a host edit made during the run may show
//     (within the kernel's one-second cache), and a file read while the host
//     rewrites it may show a mix. An edit the command did not see (made
//     after its first look at the path) is a conflict at sync-back when the
//     sandbox changed the same path, never overwritten; one made before it,
//     which the command saw, is not (in a checkout, which shows the tree as
//     it was at the start, every edit made during the run is).
//   - Paths the policy hides are absent from listings and lookups, but the
//     run does not list them as a checkout's walk does ("not in the
//     sandbox: ..."): nothing is walked.
//   - A run killed with SIGKILL leaves its mount dead (ENOTCONN) until the
//     next lazy run sweeps it; its upper directory, which holds its changes,
//     stays, as a killed checkout does.

// envRunLazy, when set to 0 or 1, decides run's default mode (--lazy or
// --no-lazy override it).
const envRunLazy = "CAPFS_RUN_LAZY"

// lazyWork is the work tree of a lazy sandbox: the work Dir served through
// FUSE with a copy-on-write upper layer (fuseexport.Overlay).
//
// Start-up makes a constant number of Dir calls whatever the tree's size (the
// root's Stat when mounting).
type lazyWork struct {
	Mountpoint string // the FUSE mount to bind into the sandbox
	priv       string // the private directory (0700) holding the mount point
	upper      string // the upper directory (capfs-checkout-*: kept and recovered as a checkout)
	// restoreProcs undoes narrowProcs (nil: nothing to undo).
	restoreProcs func()
	ov           *fuseexport.Overlay
	srv          *fuseexport.Server
	tree         bool // Finish made a Tree, which owns the upper directory now
}

// lazyAvailable reports whether lazy sandboxes can work here (FUSE usable).
func lazyAvailable() error { return fuseexport.Available() }

// lazyUpperRoom is the room a lazy run's upper directory asks of /dev/shm:
// the upper holds what the command writes, which nobody knows before it runs.
const lazyUpperRoom = 1 << 30

// lazyBase is the parent of a lazy run's upper directory: where checkouts
// are made (materialize.DefaultBase), asking for lazyUpperRoom. That is
// $CAPFS_TMPDIR when set, else /dev/shm when it is a writable tmpfs with
// 1 GiB (and a margin) free, else the temporary directory. On tmpfs the
// command's files are written to memory and copied to the source once, at
// sync-back, as a checkout's are; on a disk, each new file would be made
// twice there (in the upper, then in the source), and a file system that
// scans recently freed inodes at every creation (ext4 without a journal)
// pays that twice. A command that writes more than /dev/shm holds gets
// ENOSPC: $CAPFS_TMPDIR puts the upper on a disk.
func lazyBase() string {
	return materialize.DefaultBase(lazyUpperRoom)
}

// startLazyWork serves work on a new mount point with a copy-on-write upper,
// each in a new private directory (mode 0700) under lazyBase: the upper named
// capfs-checkout-* like a checkout, so that a kept one is found, synced and
// recovered as checkouts are. pol, if not nil, decides the sandbox's calls as
// they are made (paths from the work tree's root); reads of the source are
// decided by work's own policy as well, so hidden paths are absent.
func startLazyWork(ctx context.Context, work *dir.Dir, pol policy.Policy) (*lazyWork, error) {
	return startLazyWorkTold(ctx, work, pol, nil)
}

// startLazyWorkTold is startLazyWork; tell, if not nil, is told of each name
// a listing leaves out because no path can hold it
// (fuseexport.Options.Unaddressable).
func startLazyWorkTold(ctx context.Context, work *dir.Dir, pol policy.Policy, tell func(vfs.Path, vfs.Unaddressable)) (*lazyWork, error) {
	if err := fuseexport.Available(); err != nil {
		return nil, err
	}
	base := lazyBase()
	mnt := lazyMountDir(base)
	clearStaleLazy(mnt)
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
	mp := filepath.Join(priv, "work")
	lw := &lazyWork{Mountpoint: mp, upper: upper, priv: priv}
	fail := func(err error) (*lazyWork, error) {
		os.RemoveAll(upper)
		os.RemoveAll(priv)
		return nil, err
	}
	if err := os.Mkdir(mp, 0o700); err != nil {
		return fail(err)
	}
	var lower vfs.Backend = work.Backend()
	if h, ok := pol.(lazyViewPolicy); ok {
		lower = hidingLower{Backend: lower, view: h}
	}
	lw.ov, err = fuseexport.NewOverlay(lower, upper)
	if err != nil {
		return fail(err)
	}
	var opts []dir.Option
	if pol != nil {
		opts = append(opts, dir.WithPolicy(pol))
	}
	if h, ok := pol.(lazyViewPolicy); ok {
		opts = append(opts, dir.WithHooks(h))
	}
	view, _ := dir.New(lw.ov, opts...)
	lw.srv, err = fuseexport.Mount(mp, view, fuseexport.Options{AllowOther: os.Geteuid() == 0, Name: "capfs-lazy", Passthrough: true, ReadDirPlus: true, Unaddressable: tell})
	if err != nil {
		lw.ov.Close()
		return fail(fmt.Errorf("lazy work tree: %w", err))
	}
	return lw, nil
}

// lazyMountDir is where lazy runs make their mount points: "mnt" in capfs's
// state directory (private, 0700, and small, so that sweeping it for dead
// mounts costs little whatever the temporary directory holds), else base.
func lazyMountDir(base string) string {
	j, err := materialize.DefaultJournalDir()
	if err != nil {
		return base
	}
	d := filepath.Join(filepath.Dir(j), "mnt")
	if os.MkdirAll(d, 0o700) != nil || checkPrivateDir(d) != nil {
		return base
	}
	return d
}

// clearStaleLazy removes what a lazy run killed before it could clean up
// (SIGKILL, a crash) left under dir: each capfs-lazy-* directory whose mount
// point is a dead FUSE mount is detached and removed. A live mount (another
// run's) answers, and is left alone; so is the killed run's upper directory,
// which holds its changes.
func clearStaleLazy(dir string) {
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
func (lw *lazyWork) UpperDir() string { return lw.upper }

// Stop unmounts the work tree (waiting up to two seconds for files the
// sandbox left open, then aborting the connection). Calling it again does
// nothing.
func (lw *lazyWork) Stop() error { return lw.srv.Close(2 * time.Second) }

// Changes lists the changes the sandbox made (see fuseexport.Overlay.Changes).
func (lw *lazyWork) Changes(ctx context.Context) ([]fuseexport.Change, error) {
	return lw.ov.Changes(ctx)
}

// Finish stops the mount and returns the Tree of the sandbox's changes, with
// src (the work Dir the layer was made over) as its source: it owns the upper
// directory from then on (its Close removes it unless kept).
func (lw *lazyWork) Finish(ctx context.Context, src *dir.Dir) (*materialize.Tree, error) {
	if err := lw.Stop(); err != nil {
		return nil, err
	}
	t, err := upperTree(ctx, lw.ov, src)
	if err != nil {
		return nil, err
	}
	lw.tree = true
	return t, nil
}

// upperTree returns the Tree of the changes ov holds over src, the Dir its
// lower is the Backend of: its upper directory, with the base of every entry
// it changed (see fuseexport.Overlay.Bases), for the sync-back to judge
// changes and conflicts as a checkout's. ov must be stopped (unmounted).
func upperTree(ctx context.Context, ov *fuseexport.Overlay, src *dir.Dir) (*materialize.Tree, error) {
	upper := ov.UpperDir()
	bases := ov.Bases()
	entries := make(map[string]materialize.Entry, len(bases))
	for p, b := range bases {
		if _, err := os.Lstat(filepath.Join(upper, p)); err != nil {
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

// restore gives capfs back the CPUs narrowProcs took for the mount's life.
func (lw *lazyWork) restore() {
	if lw.restoreProcs != nil {
		lw.restoreProcs()
	}
}

// Close stops the mount and removes the mount point, and the upper directory
// unless Finish handed it to a Tree.
func (lw *lazyWork) Close() error {
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

// hidingLower is the work Dir's backend view with the names the session's
// policy denies left out of listings, as a checkout leaves them out (the Dir
// refuses every call on them; its listings name them unless the policy hides
// secrets), and every .git listed empty unless the view shows it (lazyGitView).
//
// It keeps the optional interfaces of vfs.Optionals that a lower layer may
// offer: the read-side ones forward to the view (listings less what it hides).
// It withholds three: HostPather, since binding the host directory would show
// what it hides; Chowner, since a lower layer is only read and changes go back
// through the sync-back's review; and Locator, which the Dir's view beneath
// withholds.
type hidingLower struct {
	vfs.Backend
	view lazyViewPolicy
}

// ResolveStat resolves p in the work Dir's view in one call where it can
// (vfs.StatResolver): the names hidingLower leaves out of listings are
// resolved as Lstat finds them, so the answer is Lstat's.
func (h hidingLower) ResolveStat(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, vfs.Info, error) {
	return vfs.ResolveStat(ctx, h.Backend, p, follow)
}

func (h hidingLower) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	return hideEntries(ctx, h, p, vfs.ReadDir, func(e vfs.DirEntry) string { return e.Name })
}

// ReadDirInfo is ReadDir with each entry's status, read in one pass where the
// work Dir's view can (vfs.DirInfoReader).
func (h hidingLower) ReadDirInfo(ctx context.Context, p vfs.Path) ([]vfs.DirInfo, error) {
	return hideEntries(ctx, h, p, vfs.ReadDirInfo, func(e vfs.DirInfo) string { return e.Name })
}

// ResolveReadDir is ReadDir through the view's fused call (vfs.ListResolver):
// decide rules on the location listed.
func (h hidingLower) ResolveReadDir(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) ([]vfs.DirEntry, vfs.Location, error) {
	var loc vfs.Location
	ents, err := hideEntries(ctx, h, p, func(ctx context.Context, b vfs.Backend, p vfs.Path) ([]vfs.DirEntry, error) {
		ents, l, err := vfs.ResolveReadDir(ctx, b, p, decide)
		loc = l
		return ents, err
	}, func(e vfs.DirEntry) string { return e.Name })
	return ents, loc, err
}

// ResolveOpen forwards to the view (vfs.OpenResolver): the Dir beneath refuses
// what the policy denies, hidden names included.
func (h hidingLower) ResolveOpen(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) (vfs.File, vfs.Location, error) {
	return vfs.ResolveOpen(ctx, h.Backend, p, decide)
}

// HostLinkTarget forwards to the view when it is a vfs.HostLinkResolver (ok
// false otherwise).
func (h hidingLower) HostLinkTarget(ctx context.Context, p vfs.Path) (vfs.Path, bool, error) {
	if r, ok := h.Backend.(vfs.HostLinkResolver); ok {
		return r.HostLinkTarget(ctx, p)
	}
	return vfs.Path{}, false, nil
}

// hideEntries lists p in h's Backend with list, less the entries h hides.
func hideEntries[E any](ctx context.Context, h hidingLower, p vfs.Path, list func(context.Context, vfs.Backend, vfs.Path) ([]E, error), name func(E) string) ([]E, error) {
	ents, err := list(ctx, h.Backend, p)
	if err != nil {
		return nil, err
	}
	git := inGit(p.String())
	if git && !h.view.git.shows(p.String()) {
		return nil, nil
	}
	if h.view.inner == nil && !git {
		return ents, nil
	}
	out := make([]E, 0, len(ents))
	for _, e := range ents {
		if h.shows(ctx, p, git, name(e)) {
			out = append(out, e)
		}
	}
	return out, nil
}

// shows reports whether entry name of directory p (in a .git, if git) is
// listed: the git view shows it and the session's policy does not deny its
// status.
func (h hidingLower) shows(ctx context.Context, p vfs.Path, git bool, name string) bool {
	c, cerr := p.Child(name)
	if cerr != nil || (git && !h.view.git.shows(c.String())) {
		return false
	}
	if h.view.inner == nil {
		return true
	}
	r := policy.Request{Op: policy.OpStat, Path: h.view.join(c.String()), GuestPath: c.String(), Size: -1}
	return h.view.inner.Decide(ctx, &r).Effect != policy.Deny
}

// lazyViewPolicy is the policy and hook of a lazy sandbox's view of the work
// tree, mirroring the session's policy as a checkout does. As a hook it refuses
// with read_only (EROFS inside, as a checkout's read-only binds do) every
// write the session's policy denies, asked with the namespace path (root is
// the work path; an Ask lets the call through, the sync-back asks again with
// the session's Asker), and every write to a .git. As a policy it leaves
// reads to the source Dir beneath (which applies the session's policy to
// them) but denies everything beneath a .git that git does not show (run_git.go).
type lazyViewPolicy struct {
	inner policy.Policy
	root  string
	git   *lazyGitView // the work root's .git, when shown
}

// Decide is the view's policy.
func (p lazyViewPolicy) Decide(ctx context.Context, r *policy.Request) policy.Decision {
	if beneathGit(r.Path) && !p.git.shows(r.Path) {
		return policy.Decision{Effect: policy.Deny, Rule: "lazy:git-hidden", Reason: "this git history is not shown in the sandbox (see the run's summary)"}
	}
	return policy.Decision{Effect: policy.Allow, Rule: "lazy:view"}
}

// Before refuses the writes the source would refuse.
func (p lazyViewPolicy) Before(ctx context.Context, r *policy.Request) error {
	if !r.Op.Writes() {
		return nil
	}
	if inGit(r.Path) || (r.Dest != "" && inGit(r.Dest)) {
		return vfs.NewError(vfs.CodeReadOnly, string(r.Op), vfs.Root, "git directories are read-only in the sandbox")
	}
	if p.inner == nil {
		return nil
	}
	q := *r
	q.Path, q.Dest = p.join(r.Path), ""
	if r.Dest != "" {
		q.Dest = p.join(r.Dest)
	}
	if d := p.inner.Decide(ctx, &q); d.Effect == policy.Deny {
		return vfs.NewError(vfs.CodeReadOnly, string(r.Op), vfs.Root, "the policy refuses this write ("+d.Rule+")")
	}
	return nil
}

// After does nothing.
func (p lazyViewPolicy) After(context.Context, *policy.Request, error) {}

func (p lazyViewPolicy) join(rel string) string {
	switch {
	case p.root == "" || p.root == ".":
		return rel
	case rel == "" || rel == ".":
		return p.root
	}
	return p.root + "/" + rel
}

// inGit reports whether a component of p is ".git". It allocates nothing:
// the lazy view's policy asks it at every call.
func inGit(p string) bool {
	for c := range strings.SplitSeq(p, "/") {
		if c == ".git" {
			return true
		}
	}
	return false
}

// beneathGit reports whether p lies beneath a ".git" component: whether a
// component of p's parent is.
func beneathGit(p string) bool {
	i := strings.LastIndexByte(p, '/')
	return i >= 0 && inGit(p[:i])
}

// chooseLazy decides whether this run is lazy: --lazy/--no-lazy when given
// (--lazy where FUSE cannot work is an error), else $CAPFS_RUN_LAZY, else lazy
// when FUSE works here. It sets r.lazy and r.lazyWhy (the summary's note).
func (r *runner) chooseLazy(flag *bool) error {
	avail := lazyAvailable()
	switch {
	case flag != nil && *flag:
		if avail != nil {
			return fmt.Errorf("--lazy: FUSE is not usable here (%s); --no-lazy checks the work tree out", avail)
		}
		r.lazy, r.lazyWhy = true, "--lazy"
	case flag != nil:
		r.lazyWhy = "--no-lazy"
	case os.Getenv(envRunLazy) == "0":
		r.lazyWhy = envRunLazy + "=0"
	case avail != nil:
		r.lazyWhy = "FUSE is not usable here: " + avail.Error()
	default:
		r.lazy, r.lazyWhy = true, "the default where FUSE works"
	}
	return nil
}

// lazyProcs is how many CPUs capfs's own goroutines run on (GOMAXPROCS)
// while a lazy run's mount serves the command, on a machine of ncpu: a
// quarter of them, at least one. The server's requests are short (tens of
// microseconds), and each Go scheduler thread it wakes on another CPU takes
// that CPU from the command for a moment: with every CPU its own, a lazy C
// build on two CPUs took 1.29× a plain build's time, with one, 1.22× (medians
// of 10 alternated rounds; the compilers themselves ran 9 % longer beside the
// wider server).
func lazyProcs(ncpu int) int { return max(1, ncpu/4) }

// narrowProcs lowers GOMAXPROCS to lazyProcs for the life of a lazy mount and
// returns what restores it; GOMAXPROCS set in the environment is left alone.
func narrowProcs() (restore func()) {
	prev := runtime.GOMAXPROCS(0)
	n := lazyProcs(runtime.NumCPU())
	if os.Getenv("GOMAXPROCS") != "" || n >= prev {
		return func() {}
	}
	runtime.GOMAXPROCS(n)
	var once sync.Once
	return func() { once.Do(func() { runtime.GOMAXPROCS(prev) }) }
}

// startLazy mounts the lazy work tree of r.workDir and binds it at the work
// path's target; r.close unmounts it and removes what is left.
func (r *runner) startLazy(ctx context.Context) error {
	pol := lazyViewPolicy{inner: r.s.Policy, root: r.workPath.String(), git: r.lazyGit(ctx)}
	restore := narrowProcs()
	lw, err := startLazyWorkTold(ctx, r.workDir, pol, func(dir vfs.Path, u vfs.Unaddressable) {
		r.say("capfs run: %s: skipped 1 name the capability cannot address (%s: %s); the lazy work tree does not show it\n",
			showPath(r.workPath.Join(dir).String()), show(u.Name), u.Reason)
	})
	if err != nil {
		restore()
		return err
	}
	lw.restoreProcs = restore
	r.lazyWork = lw
	r.subs = append(r.subs, lw.Close)
	r.mounts = append(r.mounts, sandbox.Mount{Source: lw.Mountpoint, Target: sandboxTarget(r.workPath), Writable: true})
	r.seenTargets = append(r.seenTargets, r.workPath)
	return nil
}

// finishLazy, once the command exited, stops the lazy mount and makes the
// work Tree of its changes for the review. On failure the changes stay in the
// upper directory, which is named.
func (r *runner) finishLazy(ctx context.Context) error {
	lw := r.lazyWork
	if lw == nil {
		return nil
	}
	// Not canceled by a signal: the review decides what an interrupted run keeps.
	t, err := lw.Finish(context.WithoutCancel(ctx), r.workDir)
	lw.restore() // the mount is stopped: the review has every CPU
	if err != nil {
		lw.tree = true // leave the upper for the user
		r.say("capfs: run: the lazy work tree: %s; its changes stay in %s\n", showError(err), show(lw.UpperDir()))
		return exitStatus(exitSyncBack)
	}
	r.trees = append(r.trees, t)
	r.workTree = t
	if r.keep {
		t.Keep()
	}
	return nil
}

// workMode is the summary's line saying how the work tree reached the sandbox.
func (r *runner) workMode() string {
	if r.lazy {
		return "lazy (a FUSE mount with a copy-on-write layer: nothing copied before the start; " + r.lazyWhy + ")"
	}
	if r.workTree != nil {
		return "checkout (" + string(r.workTree.Strategy()) + "; " + r.lazyWhy + ")"
	}
	return "checkout (" + r.lazyWhy + ")"
}

// lazyFlagOf is run's --lazy/--no-lazy as given: nil when neither was.
func lazyFlagOf(cmd interface{ Flags() *pflag.FlagSet }, lazy, noLazy bool) (*bool, error) {
	f := cmd.Flags()
	switch {
	case f.Changed("lazy") && f.Changed("no-lazy"):
		if lazy == noLazy {
			return nil, usageErrorf("--lazy and --no-lazy: give one")
		}
		return &lazy, nil
	case f.Changed("lazy"):
		return &lazy, nil
	case f.Changed("no-lazy"):
		v := !noLazy
		return &v, nil
	}
	return nil, nil
}
