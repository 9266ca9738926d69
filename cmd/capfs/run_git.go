//go:build linux

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/capfs/capfs/internal/buildcache"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/run"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// Git in a run's sandbox (--git auto, the default; omit; keep).
//
// A checkout run (--no-lazy) scans each .git of its copy (materialize's
// GitAuto) and empties those whose history names a path the policy hides. A
// lazy run scans the work tree's own .git on the host the same way
// (materialize.ScanGitHistory, the one scanner) before the command starts,
// deciding each path of the history as the lazy view (run.ViewPolicy)
// decides a name (the session's policy; Ask counts as hidden): when none is
// hidden, the .git is shown read-only, limited to the objects the scan
// covered (an object the host adds during the run is not shown); else its
// contents stay out of reach. Other .git directories of a lazy run (nested
// repositories) stay hidden: a lazy run walks nothing, so it cannot scan them
// (--no-lazy does).
//
// Both modes keep the paths each history shows in the scan cache (gitScanCache),
// keyed by a fingerprint of its index files and object store, so that a run on
// an unchanged repository decides again (the policy may have changed) without
// reading its history. --git keep scans as auto does and refuses a history
// that names a hidden path; it keeps one the scan cannot finish (past
// --git-scan-budget) or read, which auto leaves out.
//
// Inside, git runs with GIT_OPTIONAL_LOCKS=0 (status does not try to refresh
// the read-only index) and, with the .git shown, compares files with its
// index by size and time only (gitEnv); when a .git at the work root is there
// but not shown,
// GOFLAGS=-buildvcs=false, so that go build does not fail on the repository
// git cannot read. --env overrides both.

// gitRun is what a run decided about the work tree's git directory.
type gitRun struct {
	note   string // the summary's line ("" when the work tree has no .git)
	hidden bool   // the work root has a .git whose contents the sandbox does not see
}

// gitScanCache returns the directory of the history scan cache, "gitscan" in
// the user's capfs cache as the session's environment has it (buildcache.Root;
// not a project cache: capfs cache ls and clean leave it alone); "" (no cache)
// when it cannot be made private.
func (r *runner) gitScanCache() string {
	root, err := buildcache.Root(r.s.env.env)
	if err != nil {
		return ""
	}
	d := filepath.Join(root, "gitscan")
	if buildcache.MkdirPrivate(d) != nil {
		return ""
	}
	return d
}

// lazyGit decides, before a lazy run starts, whether its view shows the work
// root's .git (see the comment at the top of this file), records the
// summary's note in r.git, and says so when it does not.
func (r *runner) lazyGit(ctx context.Context) *run.GitView {
	fi, err := r.workDir.Lstat(ctx, ".git")
	if err != nil {
		return nil // no .git: nothing to show or hide
	}
	where := showGuest(r.workPath, ".git")
	hide := func(why string) *run.GitView {
		r.git = gitRun{hidden: true, note: where + "'s contents are not in the sandbox: " + why + "; go build runs with -buildvcs=false"}
		r.say("capfs: run: not in the sandbox: %s's contents: %s\n", where, why)
		return nil
	}
	if !fi.IsDir() {
		return hide("a .git file (a worktree or submodule) names a git directory elsewhere")
	}
	if r.lim.git == materialize.GitOmit {
		return hide("--git omit")
	}
	host, ok := r.hostPathOfWork()
	if !ok {
		return hide("the work tree is not a host directory a scan can read")
	}
	return r.lazyGitScan(ctx, filepath.Join(host, ".git"), where, hide)
}

// lazyGitScan scans the host's git directory gitdir (the work root's .git,
// shown as where) and decides, for lazyGit, whether the view shows it; hide
// records why not.
func (r *runner) lazyGitScan(ctx context.Context, gitdir, where string, hide func(string) *run.GitView) *run.GitView {
	keep := r.lim.git == materialize.GitKeep
	h, err := materialize.ScanGitHistory(ctx, gitdir, r.lim.gitScanBudget, r.gitScanCache())
	switch {
	case err != nil && keep:
		r.git.note = where + " shown read-only, unchecked (--git keep): its history cannot be read to check it"
		return &run.GitView{Shown: true}
	case err != nil:
		return hide("its history cannot be read to check it")
	}
	v, err := materialize.CheckGitHistory(h, "", r.lazyHidden(ctx))
	if err != nil {
		return hide("its history cannot be checked: " + showError(err))
	}
	how := scanHow(h.Cached)
	why := v.Why()
	switch {
	case v.Hidden > 0 || (why != "" && !keep):
		return hide(show(why) + " (" + how + ")" + keepRefuses(keep, v.Hidden))
	case h.Objects == nil && (!keep || len(h.Unnamed) > 0):
		return hide("its object store cannot be fingerprinted (alternates, a commondir or a symlink in it), so what the view shows of it cannot be limited to what was scanned")
	case why != "":
		r.git.note = fmt.Sprintf("%s shown read-only (--git keep): %s (%s)", where, show(why), how)
	default:
		r.git.note = fmt.Sprintf("%s shown read-only: its history's %d paths name none the policy hides (%s)%s", where, len(h.Paths), how, unnamedNote(len(h.Unnamed)))
	}
	return &run.GitView{Shown: true, Objects: h.Objects}
}

// lazyHidden decides a path of the work root's history as the lazy view
// decides a name: hidden when the session's policy does not allow reading it
// (an Ask counts as hidden: nobody can be asked about a path of the history),
// denies listing it, or when it is not a path the Dir can hold.
func (r *runner) lazyHidden(ctx context.Context) func(p string) (bool, error) {
	inner := r.s.Policy
	view := run.ViewPolicy{Root: r.workPath.String()}
	return func(p string) (bool, error) {
		if vp, err := vfs.ParseGuest(p); err != nil || vp.String() != p || run.InGit(p) {
			return true, nil
		}
		if inner == nil {
			return false, nil
		}
		for _, op := range []policy.Op{policy.OpRead, policy.OpStat} {
			q := policy.Request{Op: op, Path: view.Join(p), GuestPath: p, Size: -1}
			if d := inner.Decide(ctx, &q); d.Effect != policy.Allow {
				return true, nil
			}
		}
		return false, nil
	}
}

// hostPathOfWork returns the host directory of the work tree, when it is
// one: a physical mount's (hostFor), with no other mount beneath the work path.
func (r *runner) hostPathOfWork() (string, bool) {
	if r.rev != "" {
		return "", false
	}
	hp, ok := r.hostFor(r.workPath).(vfs.HostPather)
	if !ok {
		return "", false
	}
	return hp.HostPath()
}

// checkoutGit records, for a checkout run, what the checkout decided about
// the work root's .git.
func (r *runner) checkoutGit(t *materialize.Tree) {
	for _, rep := range t.GitReports() {
		if rep.Path != ".git" {
			continue
		}
		where := showGuest(r.workPath, ".git")
		how := scanHow(rep.Cached)
		switch {
		case !rep.Kept:
			r.git = gitRun{hidden: true, note: fmt.Sprintf("%s emptied: %s (%s)%s; go build runs with -buildvcs=false", where, show(rep.Why), how,
				keepRefuses(r.lim.git == materialize.GitKeep, 1))}
		case rep.Why != "":
			r.git.note = fmt.Sprintf("%s kept read-only (--git keep): %s (%s)", where, show(rep.Why), how)
		default:
			r.git.note = fmt.Sprintf("%s kept read-only: its history's %d paths name none the policy hides (%s)%s", where, rep.Paths, how, unnamedNote(rep.Unnamed))
		}
		return
	}
	for _, sk := range t.Skipped() {
		if sk.Path == ".git" && strings.HasPrefix(sk.Reason, "git directory emptied") {
			r.git = gitRun{hidden: true, note: showGuest(r.workPath, ".git") + " emptied (--git omit); go build runs with -buildvcs=false"}
		}
	}
}

// gitEnv is the environment git and go get in the sandbox (before --env,
// which wins). With the .git shown, git compares only sizes and modification
// times with its index (core.checkStat=minimal, core.trustctime=false): the
// sandbox's files have other inode numbers, devices and change times than the
// host's, which the index records, so git status would otherwise read and
// hash every tracked file at each call (25 times slower on 2000 files).
func (r *runner) gitEnv() []string {
	env := []string{"GIT_OPTIONAL_LOCKS=0"}
	if r.git.hidden {
		return append(env, "GOFLAGS=-buildvcs=false")
	}
	if r.git.note != "" {
		env = append(env, "GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=core.checkStat", "GIT_CONFIG_VALUE_0=minimal",
			"GIT_CONFIG_KEY_1=core.trustctime", "GIT_CONFIG_VALUE_1=false")
	}
	return env
}

// sayGit prints the summary's git line, if the work tree has a .git.
func (r *runner) sayGit() {
	if r.git.note != "" {
		r.say("capfs: run: git: %s\n", r.git.note)
	}
}

// keepRefuses is the note that --git keep refused a history naming hidden
// paths ("" when not --git keep, or the history names none).
func keepRefuses(keep bool, hidden int) string {
	if !keep || hidden == 0 {
		return ""
	}
	return "; --git keep does not show a history that names a hidden path"
}

// unnamedNote says how many loose objects no history names were left out.
func unnamedNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d loose objects no commit, tag or index names left out", n)
}

// scanHow says whether a history's paths were scanned or read from the cache.
func scanHow(cached bool) string {
	if cached {
		return "scan cached"
	}
	return "scanned"
}
