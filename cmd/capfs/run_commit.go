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
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/vfs"
)

// commitTarget is where --commit writes: the repository holding the work
// path, the work path within it, and the revision the branch starts at.
type commitTarget struct {
	repo   string   // the work tree or git directory, for git and OpenOverlay
	sub    vfs.Path // the work path within the repository's tree
	rev    string   // REV as given
	branch string
}

// commitTo writes the checkout's changes as one commit on a new branch
// (c.branch, created at c.rev), through a gitree overlay: the project's work
// tree, index and current branch are not touched. Every change goes through a
// Dir with the session's policy (nothing under .git, no persistence files);
// deletions are applied too. It returns the new commit's id.
func (r *runner) commitTo(ctx context.Context, c commitTarget) (string, *materialize.ExportReport, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", c.repo}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %s: %s", args[0], strings.TrimSpace(string(out)))
		}
		return strings.TrimSpace(string(out)), nil
	}
	base, err := git("rev-parse", "--verify", "--quiet", c.rev+"^{commit}")
	if err != nil {
		return "", nil, fmt.Errorf("--rev %s: not a commit", c.rev)
	}
	if _, err := git("branch", "--no-track", c.branch, base); err != nil {
		return "", nil, fmt.Errorf("--commit %s: %v", c.branch, err)
	}
	ov, err := gitree.OpenOverlay(c.repo, c.branch)
	if err != nil {
		return "", nil, err
	}
	defer ov.Close()
	var b vfs.Backend = ov
	if !c.sub.IsRoot() {
		if b, err = ov.Sub(ctx, c.sub); err != nil {
			return "", nil, err
		}
	}
	d, _ := dir.New(b, dir.WithPolicy(r.s.Policy), dir.WithAudit(r.s.Audit), dir.WithSubject(r.s.Subject))
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

// commitTargetOf finds the repository of the work path for --commit.
func (r *runner) commitTargetOf(m *mounted, rel vfs.Path, branch string) (commitTarget, error) {
	c := commitTarget{rev: r.rev, branch: branch, repo: m.Host, sub: rel}
	if m.Kind == kindGit {
		if c.rev == "" {
			c.rev = m.Rev
		}
		return c, nil
	}
	top, relTop, ok := gitTop(filepath.Join(m.Host, filepath.FromSlash(rel.String())))
	if !ok {
		return c, usageErrorf("--commit %s: %s is not in a git repository", branch, displayPath(r.workPath.String()))
	}
	c.repo, c.sub = top, vfs.Root
	if relTop != "." {
		p, err := vfs.ParseGuest(filepath.ToSlash(relTop))
		if err != nil {
			return c, err
		}
		c.sub = p
	}
	return c, nil
}
