package materialize

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// errGitBudget stops a history scan that has read its budget of tree objects.
var errGitBudget = errors.New("history larger than the scan budget")

// errGitFound stops a history scan at the first path the callback flags.
var errGitFound = errors.New("found")

// gitScan lists the paths a git directory can show: every path of every tree
// of every commit in its object store (reachable or not: branches, tags,
// reflogs, stashes and dangling commits alike), of trees that annotated tags
// name, and of its index; then the same for the repositories under its
// modules/ directory (submodules), whose paths are taken to lie under their
// module name. Each tree is read once per path it appears at.
type gitScan struct {
	ctx    context.Context
	budget int                 // tree objects left to read
	found  func(p string) bool // true stops the scan (errGitFound)
	seen   map[string]struct{} // prefix + "\x00" + tree id
	trees  map[plumbing.Hash]*object.Tree
}

// scan scans the git directory gitdir (a host path) whose work tree is prefix
// ("" for the root) and, recursively, its modules.
func (s *gitScan) scan(gitdir, prefix string) error {
	// ExclusiveAccess: the checkout's copy does not change while it is scanned,
	// so go-git may cache its pack indexes and loose object list, and keep its
	// packs open (closed by Close).
	st := filesystem.NewStorageWithOptions(osfs.New(gitdir, osfs.WithBoundOS()), cache.NewObjectLRU(16<<20),
		filesystem.Options{ExclusiveAccess: true, KeepDescriptors: true})
	defer st.Close()
	s.trees = map[plumbing.Hash]*object.Tree{}
	if idx, err := st.Index(); err == nil {
		for _, e := range idx.Entries {
			if s.found(join(prefix, e.Name)) {
				return errGitFound
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	err := s.roots(gitdir, st, func(o plumbing.EncodedObject) error {
		switch o.Type() {
		case plumbing.CommitObject:
			c, err := object.DecodeCommit(st, o)
			if err != nil {
				return err
			}
			return s.tree(st, c.TreeHash, prefix)
		case plumbing.TagObject:
			tag, err := object.DecodeTag(st, o)
			if err != nil {
				return err
			}
			if tag.TargetType == plumbing.TreeObject {
				return s.tree(st, tag.Target, prefix)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.modules(filepath.Join(gitdir, "modules"), "", prefix)
}

// tree visits tree h at prefix.
// roots calls fn with every commit and tag object of the store at gitdir.
// Loose objects are told apart by their header alone (a blob is never
// inflated past it), packed ones by each pack's own iteration by type. A
// store with alternates is read through st's iteration of every object.
func (s *gitScan) roots(gitdir string, st *filesystem.Storage, fn func(o plumbing.EncodedObject) error) error {
	if _, err := os.Lstat(filepath.Join(gitdir, "objects", "info", "alternates")); err == nil {
		all, err := st.IterEncodedObjects(plumbing.AnyObject)
		if err != nil {
			return err
		}
		return all.ForEach(fn)
	}
	fsys := osfs.New(gitdir, osfs.WithBoundOS())
	dg := dotgit.New(fsys)
	loose, err := dg.Objects()
	if err != nil {
		return err
	}
	for _, h := range loose {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		typ, err := looseType(dg, h)
		if err != nil {
			return err
		}
		if typ != plumbing.CommitObject && typ != plumbing.TagObject {
			continue
		}
		o, err := st.EncodedObject(typ, h)
		if err != nil {
			return err
		}
		if err := fn(o); err != nil {
			return err
		}
	}
	packs, err := dg.ObjectPacks()
	if err != nil {
		return err
	}
	for _, p := range packs {
		for _, typ := range []plumbing.ObjectType{plumbing.CommitObject, plumbing.TagObject} {
			pf, err := dg.ObjectPack(p)
			if err != nil {
				return err
			}
			idx, err := dg.ObjectPackIdx(p)
			if err != nil {
				pf.Close()
				return err
			}
			it, err := filesystem.NewPackfileIter(fsys, pf, idx, typ, false, 0)
			if err != nil {
				pf.Close()
				return err
			}
			if err := it.ForEach(fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// looseType reads the type of loose object h from its header.
func looseType(dg *dotgit.DotGit, h plumbing.Hash) (plumbing.ObjectType, error) {
	f, err := dg.Object(h)
	if err != nil {
		return plumbing.InvalidObject, err
	}
	defer f.Close()
	r, err := objfile.NewReader(f)
	if err != nil {
		return plumbing.InvalidObject, err
	}
	defer r.Close()
	typ, _, err := r.Header()
	return typ, err
}

func (s *gitScan) tree(st *filesystem.Storage, h plumbing.Hash, prefix string) error {
	key := prefix + "\x00" + h.String()
	if _, ok := s.seen[key]; ok {
		return nil
	}
	s.seen[key] = struct{}{}
	if err := s.ctx.Err(); err != nil {
		return err
	}
	s.budget--
	if s.budget < 0 {
		return errGitBudget
	}
	t, ok := s.trees[h]
	if !ok {
		var err error
		if t, err = object.GetTree(st, h); err != nil {
			return err
		}
		if len(s.trees) < 4096 {
			s.trees[h] = t
		}
	}
	for _, e := range t.Entries {
		p := join(prefix, e.Name)
		if s.found(p) {
			return errGitFound
		}
		if e.Mode == filemode.Dir {
			if err := s.tree(st, e.Hash, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// modules scans the git directories under dir (a .git/modules directory):
// rel is the module name so far.
func (s *gitScan) modules(dir, rel, prefix string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	isGit := false
	for _, e := range ents {
		if e.Name() == "objects" && e.IsDir() {
			isGit = true
		}
	}
	if isGit && rel != "" {
		return s.scan(dir, join(prefix, rel))
	}
	for _, e := range ents {
		if e.IsDir() && e.Type()&os.ModeSymlink == 0 {
			if err := s.modules(filepath.Join(dir, e.Name()), join(rel, e.Name()), prefix); err != nil {
				return err
			}
		}
	}
	return nil
}

// join appends name to prefix without cleaning: a name git should never hold
// ("..", one with a slash) yields a path the Dir refuses, which counts as hidden.
func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "/" + name
}
