//go:build linux

package materialize

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// gitShown are the entries of a git directory that a kept .git shows (in a
// checkout and in a lazy run's view): what git's read commands (status, log,
// diff, blame, show, go build's VCS stamp) use. The history scan decides their
// contents. Everything else a git directory may hold is left out: stores whose
// contents no history path names, which the scan therefore cannot decide
// (lfs/objects and annex/objects hold the contents of files added and then
// dropped; rr-cache, rebase-apply, rebase-merge and sequencer hold pre-images and
// patches of files; MERGE_MSG and the like hold text).
var gitShown = map[string]bool{
	"HEAD": true, "config": true, "description": true, "index": true, "packed-refs": true,
	"shallow": true, "FETCH_HEAD": true, "ORIG_HEAD": true, "MERGE_HEAD": true,
	"CHERRY_PICK_HEAD": true, "REVERT_HEAD": true, "refs": true, "objects": true,
	"logs": true, "info": true, "hooks": true, "modules": true, "worktrees": true,
	"commondir": true, "branches": true,
}

// gitStores are the entries of those stores by name, left out wherever they
// sit in the git directories a kept .git nests (a submodule's under
// modules/NAME, a linked worktree's under worktrees/NAME), whose names
// (a submodule's may hold slashes) leave no fixed place to allow by.
var gitStores = map[string]bool{
	"lfs": true, "annex": true, "rr-cache": true, "rebase-apply": true, "rebase-merge": true,
	"sequencer": true, "MERGE_MSG": true, "SQUASH_MSG": true, "COMMIT_EDITMSG": true,
	"TAG_EDITMSG": true, "MERGE_RR": true, "BISECT_LOG": true,
}

// GitShows reports whether a kept .git shows rel, a path inside the git
// directory ("objects/ab/cd", "lfs/objects/..."): whether its first component
// is one git's read commands use and, beneath modules/ and worktrees/, none
// of its components names a store no history path names (gitStores). ""
// (the git directory itself) is shown.
func GitShows(rel string) bool {
	if rel == "" {
		return true
	}
	first, rest, _ := strings.Cut(rel, "/")
	// A lock git takes on a shown entry (index.lock, HEAD.lock) is shown
	// too, so that a write git tries there meets the read-only .git.
	if !gitShown[first] && !gitShown[strings.TrimSuffix(first, ".lock")] {
		return false
	}
	if first != "modules" && first != "worktrees" {
		return true
	}
	for c := range strings.SplitSeq(rest, "/") {
		if gitStores[c] {
			return false
		}
	}
	return true
}

// removeUnshown removes from the checkout's git directory rel the entries a
// kept .git does not show (see GitShows), with their manifest entries: at its
// top, and anywhere beneath its modules/ and worktrees/. The checkout is
// private and nothing has run in it yet.
func (t *Tree) removeUnshown(rel string) error {
	root := filepath.Join(t.path, filepath.FromSlash(rel))
	var drop []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(root, p)
		r = filepath.ToSlash(r)
		switch {
		case r == ".":
			return nil
		case !GitShows(r):
			drop = append(drop, r)
		case d.IsDir() && !strings.HasPrefix(r, "modules") && !strings.HasPrefix(r, "worktrees"):
			return fs.SkipDir // nothing beneath another shown entry is left out
		default:
			return nil
		}
		if d.IsDir() {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range drop {
		if err := os.RemoveAll(filepath.Join(root, filepath.FromSlash(r))); err != nil {
			return err
		}
		p := rel + "/" + r
		for k := range t.manifest.Entries {
			if k == p || strings.HasPrefix(k, p+"/") {
				delete(t.manifest.Entries, k)
				delete(t.manifest.stat, k)
			}
		}
	}
	return nil
}
