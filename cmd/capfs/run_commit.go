//go:build linux

package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/internal/mountkind"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/vfs"
)

// commitTarget is where --commit writes: the repository holding the work
// path where it leads, and the revision the branch starts at.
type commitTarget struct {
	at     revPlace // the repository and where its tree stands in the namespace
	rev    string   // REV as given
	branch string
}

// revPlace is the repository of a work path, found where the path leads, and
// where its tree stands in the namespace, so that a Dir over a revision (or an
// overlay) of it decides the same namespace paths as the session's Root.
type revPlace struct {
	repo string   // the repository's host path (a work tree or a git directory)
	at   vfs.Path // the namespace path the tree's directory tree is mounted at
	tree vfs.Path // the directory of the repository's tree shown at at
	work vfs.Path // the work path where it leads (canonical)
	git  *mounted // the git mount serving it (nil: a physical mount)
}

// workRepo finds the repository of the work path where it leads: the session's
// Root resolves the path (decided as a stat of it, like every path a guest
// names), the mount serving the canonical path maps it to a host directory, and
// the repository is the nearest one holding that directory. A path that leaves
// its mount, or is refused, is an error naming the flag.
func (r *runner) workRepo(ctx context.Context, flag, val string) (revPlace, error) {
	loc, err := r.s.Root.Backend().Resolve(ctx, r.workPath, true)
	if err == nil && loc.Found && !loc.Type.IsDir() {
		err = vfs.NewError(vfs.CodeNotDir, "resolve", r.workPath, "")
	}
	if err != nil {
		return revPlace{}, usageErrorf("%s %s: the work path %s: %s", flag, val, displayPath(r.workPath.String()), messageOrCode(err))
	}
	work := loc.Path.Unresolved()
	m, rel, ok := r.s.mountAt(work)
	if !ok || m.HostDir() == "" {
		return revPlace{}, usageErrorf("%s %s: the work path %s is not in a physical or git mount", flag, val, displayPath(r.workPath.String()))
	}
	if m.Revision() {
		pl := revPlace{repo: m.Host, at: m.Path, work: work, git: m}
		if t := m.Opts[mountkind.GitTree]; t != "" {
			if pl.tree, err = vfs.ParseGuest(t); err != nil {
				return revPlace{}, usageErrorf("%s %s: the work path %s: its repository cannot be placed in the namespace (%v)", flag, val, displayPath(r.workPath.String()), vfs.CodeOf(err))
			}
		}
		return pl, nil
	}
	top, _, ok := gitTop(filepath.Join(m.Host, filepath.FromSlash(rel.String())))
	if !ok {
		return revPlace{}, usageErrorf("%s %s: %s is not in a git repository", flag, val, displayPath(r.workPath.String()))
	}
	pl, err := placeRepo(m, top)
	if err != nil {
		return revPlace{}, usageErrorf("%s %s: the work path %s: its repository cannot be placed in the namespace (%v)", flag, val, displayPath(r.workPath.String()), vfs.CodeOf(err))
	}
	pl.work = work
	return pl, nil
}

// placeRepo places repository top, the nearest one holding a directory of
// physical mount m, in the namespace: when it holds the mount, its tree's
// directory the mount shows is mounted at the mount's path; when it lies
// inside the mount, its whole tree at its own namespace path.
func placeRepo(m *mounted, top string) (revPlace, error) {
	pl := revPlace{repo: top, at: m.Path}
	if up, err := filepath.Rel(top, m.Host); err == nil && up != "." && !climbs(up) {
		pl.tree, err = vfs.ParseGuest(filepath.ToSlash(up))
		return pl, err
	}
	if down, err := filepath.Rel(m.Host, top); err == nil && down != "." && !climbs(down) {
		p, err := vfs.ParseGuest(filepath.ToSlash(down))
		pl.at = m.Path.Join(p)
		return pl, err
	}
	return pl, nil
}

// revDir mounts b, a tree (or overlay) of pl's repository Sub'd to pl.tree, at
// pl.at in a namespace of its own and returns the Dir of pl.work in it, with the
// session's policy, audit sink, subject and git guard: every path is decided
// by its namespace path, as a checkout of the work tree decides it.
func (r *runner) revDir(ctx context.Context, b vfs.Backend, pl revPlace, readOnly bool) (*dir.Dir, error) {
	ns := vfs.NewNamespace()
	if err := ns.Mount(pl.at, b, vfs.MountOptions{ReadOnly: readOnly}); err != nil {
		return nil, err
	}
	d, _ := r.s.dirOver(ns, r.s.Audit)
	if readOnly {
		d = d.ReadOnly()
	}
	return d.Sub(ctx, pl.work.String())
}

// checkGitName refuses a revision or branch name git would read as an option.
func checkGitName(flag, name string) error {
	if name == "" || strings.HasPrefix(name, "-") {
		return usageErrorf("%s %s: not a git revision or branch name (it must not start with -)", flag, show(name))
	}
	return nil
}

// commitTo writes the checkout's changes as one commit on a new branch
// (c.branch, created at c.rev), through a gitree overlay: the project's work
// tree, index and current branch are not touched. Every change goes through a
// Dir over the overlay mounted where the work path leads, with the session's
// policy and git guard deciding its namespace paths (nothing under .git, no
// persistence files); deletions are applied too. It returns the new commit's id.
func (r *runner) commitTo(ctx context.Context, c commitTarget) (string, *materialize.ExportReport, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", c.at.repo}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %s: %s", args[0], strings.TrimSpace(string(out)))
		}
		return strings.TrimSpace(string(out)), nil
	}
	base, err := git("rev-parse", "--verify", "--quiet", "--end-of-options", c.rev+"^{commit}")
	if err != nil {
		return "", nil, fmt.Errorf("--rev %s: not a commit", c.rev)
	}
	if _, err := git("branch", "--no-track", "--end-of-options", c.branch, base); err != nil {
		return "", nil, fmt.Errorf("--commit %s: %v", c.branch, err)
	}
	ov, err := gitree.OpenOverlay(c.at.repo, c.branch)
	if err != nil {
		return "", nil, err
	}
	defer ov.Close()
	var b vfs.Backend = ov
	if !c.at.tree.IsRoot() {
		if b, err = ov.Sub(ctx, c.at.tree); err != nil {
			return "", nil, err
		}
	}
	d, err := r.revDir(ctx, b, c.at, false)
	if err != nil {
		return "", nil, err
	}
	rep, err := r.workTree.Export(ctx, d, r.lim.sync)
	if err != nil {
		return "", rep, err
	}
	for _, del := range rep.Deleted {
		if err := d.RemoveAll(ctx, del.Path); err != nil && vfs.CodeOf(err) != vfs.CodeNotFound {
			rep.Refused = append(rep.Refused, materialize.Refusal{Change: del, Code: vfs.CodeOf(err), Reason: messageOrCode(err)})
		}
	}
	msg := fmt.Sprintf("capfs run on %s: %s\n\nThe changes of a sandboxed run (capfs run --rev %s --commit %s) in %s.\n",
		c.rev, strings.Join(r.argv, " "), c.rev, c.branch, r.workPath)
	id, err := ov.Commit(ctx, msg, gitree.Signature{Name: "capfs", Email: "capfs@localhost", When: time.Now()})
	return id, rep, err
}

// commitTargetOf finds the repository of the work path, where it leads, for
// --commit BRANCH.
func (r *runner) commitTargetOf(ctx context.Context, branch string) (commitTarget, error) {
	c := commitTarget{rev: r.rev, branch: branch}
	if err := checkGitName("--commit", branch); err != nil {
		return c, err
	}
	pl, err := r.workRepo(ctx, "--commit", branch)
	if err != nil {
		return c, err
	}
	c.at = pl
	if c.rev == "" && pl.git != nil {
		c.rev = pl.git.Rev
	}
	return c, checkGitName("--rev", c.rev)
}
