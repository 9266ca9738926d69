package mountkind

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/vfs"
)

// GitTree is the option of a git mount that shows one directory of its
// revision (slash-separated, relative to the repository's top), not the whole
// tree; the default ref/head mount of a subdirectory of a work tree has it.
const GitTree = "tree"

// Git mounts a git revision as a tree, always read-only: git:REPO[@REV], REV
// HEAD by default. It is the one [Traits.Revision] kind.
var Git = Register(&Kind{
	Name:   "git",
	Usage:  "git:REPO[@REV]",
	Help:   "a git revision as a tree, always read-only (REV: HEAD)",
	Traits: Traits{Revision: true},
	Flag:   gitFlag,
	Config: gitConfig,
	Open:   openGit,
})

// gitFlag takes the REPO[@REV] of --mount PATH=git:REPO[@REV].
func gitFlag(spec *Spec, arg, base string) error {
	if arg == "" {
		return errors.New("git needs a repository: PATH=git:REPO[@REV]")
	}
	spec.Source, spec.Rev = splitRepoRev(arg, base)
	spec.ReadOnly = true
	return setHostDir(spec, base)
}

// gitConfig takes a configuration file's git mount: a source, relative to
// base, at rev (HEAD when none).
func gitConfig(spec *Spec, c Config, base string) error {
	if c.Source == "" {
		return errors.New("git needs source")
	}
	if spec.Rev == "" {
		spec.Rev = "HEAD"
	}
	spec.ReadOnly = true
	return setHostDir(spec, base)
}

// splitRepoRev splits REPO[@REV] at the first "@" whose left part is an
// existing directory (relative to base, "" the current directory); with
// none, the whole argument is the repository and the revision is HEAD.
func splitRepoRev(s, base string) (repo, rev string) {
	for i := 0; i < len(s); i++ {
		if s[i] != '@' || i == 0 {
			continue
		}
		dir := s[:i]
		if !filepath.IsAbs(dir) && base != "" {
			dir = filepath.Join(base, dir)
		}
		if st, err := os.Stat(dir); err == nil && st.IsDir() && i+1 < len(s) {
			return s[:i], s[i+1:]
		}
	}
	return s, "HEAD"
}

// openGit opens the revision spec.Rev of the repository at spec.Host, or its
// directory spec.Opts[GitTree].
func openGit(ctx context.Context, spec *Spec, _ Env) (vfs.Backend, error) {
	g, err := gitree.Open(spec.Host, spec.Rev)
	if err != nil {
		return nil, err
	}
	t := spec.Opts[GitTree]
	if t == "" || t == "." {
		return g, nil
	}
	p, err := vfs.ParseGuest(filepath.ToSlash(t))
	if err != nil {
		g.Close()
		return nil, err
	}
	b, err := g.Sub(ctx, p)
	if err != nil {
		g.Close()
		return nil, err
	}
	return &ownedBackend{Backend: b, owner: g}, nil
}

// ownedBackend is a Sub of a gitree FS that closes the repository it came
// from.
type ownedBackend struct {
	vfs.Backend
	owner *gitree.FS
}

// Close closes the repository.
func (o *ownedBackend) Close() error { return o.owner.Close() }
