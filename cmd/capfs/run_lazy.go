//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/capfs/capfs/materialize/run"
	"github.com/capfs/capfs/vfs"
)

// Lazy sandboxes (capfs run --lazy, the default where FUSE works).
//
// The work path is not checked out: the sandbox gets, bound at its target,
// a FUSE mount of a copy-on-write layer (overlay.Overlay) over the work Dir
// (run.StartLazy; the layer and its view live in package materialize/run).
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

// lazyAvailable reports whether lazy sandboxes can work here (FUSE usable).
func lazyAvailable() error { return run.LazyAvailable() }

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
	case r.s.env.env(envRunLazy) == "0":
		r.lazyWhy = envRunLazy + "=0"
	case avail != nil:
		r.lazyWhy = "FUSE is not usable here: " + avail.Error()
	default:
		r.lazy, r.lazyWhy = true, "the default where FUSE works"
	}
	return nil
}

// lazyOptions are the options of the lazy work tree of r.workDir: its view
// mirrors the session's policy, and shows the work root's .git when its
// history scan allows (run_git.go).
func (r *runner) lazyOptions(ctx context.Context) *run.LazyOptions {
	pol := run.ViewPolicy{Inner: r.s.Policy, Root: r.workPath.String(), Git: r.lazyGit(ctx)}
	return &run.LazyOptions{View: pol, NarrowProcs: true,
		Unaddressable: func(dir vfs.Path, u vfs.Unaddressable) {
			r.say("capfs run: %s: skipped 1 name the capability cannot address (%s: %s); the lazy work tree does not show it\n",
				showPath(r.workPath.Join(dir).String()), show(u.Name), u.Reason)
		}}
}

// finishLazy, once the command exited, stops the lazy mount and makes the
// work Tree of its changes for the review (run.Session.Finish). On failure
// the changes stay in the upper directory, which is named.
func (r *runner) finishLazy(ctx context.Context) error {
	if !r.lazy {
		return nil
	}
	// Not canceled by a signal: the review decides what an interrupted run keeps.
	if err := r.sess.Finish(context.WithoutCancel(ctx)); err != nil {
		var me *run.MountError
		if errors.As(err, &me) {
			err = me.Err
		}
		r.say("capfs: run: the lazy work tree: %s; its changes stay in %s\n", showError(err), show(r.sess.Views()[0].Lazy.UpperDir()))
		return exitStatus(exitSyncBack)
	}
	t := r.sess.Views()[0].Tree
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
