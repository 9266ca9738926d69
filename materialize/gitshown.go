package materialize

import (
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

// GitShows reports whether a kept .git shows rel, a path inside the git
// directory ("objects/ab/cd", "lfs/objects/..."): whether its first component
// is one git's read commands use. "" (the git directory itself) is shown.
func GitShows(rel string) bool {
	if rel == "" {
		return true
	}
	first, _, _ := strings.Cut(rel, "/")
	// A lock git takes on a shown entry (index.lock, HEAD.lock) is shown
	// too, so that a write git tries there meets the read-only .git.
	return gitShown[first] || gitShown[strings.TrimSuffix(first, ".lock")]
}

// removeUnshown removes from the checkout's git directory rel the entries a
// kept .git does not show (see GitShows), with their manifest entries. The
// checkout is private and nothing has run in it yet.
func (t *Tree) removeUnshown(rel string) error {
	dir := filepath.Join(t.path, filepath.FromSlash(rel))
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if GitShows(e.Name()) {
			continue
		}
		p := rel + "/" + e.Name()
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
		for k := range t.manifest.Entries {
			if k == p || strings.HasPrefix(k, p+"/") {
				delete(t.manifest.Entries, k)
				delete(t.manifest.stat, k)
			}
		}
	}
	return nil
}
