package search

import (
	"context"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"github.com/capfs/capfs/vfs"
)

// node is one directory of the walk, with its entries, the .gitignore
// patterns in force in it, and its subdirectories' nodes. Nodes are loaded
// ahead of the walk, in parallel (by a few loader goroutines, at most maxAhead
// ahead), and
// consumed by the walk in depth-first order. Directories and files are named
// by their path from the Dir given to Search: each call on it resolves that
// path afresh, beneath the Dir, and is decided on what it reaches. (A Dir
// pinned to each directory would resolve one name per file but pays a
// location check of the pinned directory on every call, costlier than the
// full path's single openat2.)
type node struct {
	p       string   // the path from the Dir given to Search
	rel     []string // the path from the search root, as names
	inherit []gitignore.Pattern

	done    chan struct{} // closed once loaded (nil: loaded when waited for)
	ents    []fs.DirEntry
	ignores []gitignore.Pattern // inherit and this directory's .gitignore
	kids    []*node             // the subdirectories walked, in order
	err     error
}

// newNode returns the node of directory p, queued to be loaded in the
// background unless too much is loaded ahead already (then the walk loads it
// when it gets there).
func (s *searcher) newNode(p string, rel []string, inherit []gitignore.Pattern) *node {
	n := &node{p: p, rel: rel, inherit: inherit}
	if s.ahead.Add(1) <= maxAhead {
		n.done = make(chan struct{})
		s.loadq <- n // never blocks: it holds maxAhead nodes
	} else {
		s.ahead.Add(-1)
	}
	return n
}

// loader loads the queued nodes until the search ends. Nodes still queued then
// are never loaded (the walk stops waiting for them: see wait).
func (s *searcher) loader(ctx context.Context) {
	defer s.loaders.Done()
	for {
		select {
		case n := <-s.loadq:
			if ctx.Err() == nil {
				n.load(ctx, s)
			} else {
				n.err = ctx.Err()
			}
			close(n.done)
		case <-ctx.Done():
			return
		}
	}
}

// load reads the directory's entries and its .gitignore, and starts its
// subdirectories' nodes.
func (n *node) load(ctx context.Context, s *searcher) {
	if n.ents, n.err = s.d.ReadDir(ctx, n.p); n.err != nil {
		return
	}
	n.ignores = n.inherit
	if !s.opts.NoGitignore {
		for _, e := range n.ents {
			if e.Name() == ".gitignore" && e.Type().IsRegular() {
				if data, err := s.d.ReadFile(ctx, join(n.p, ".gitignore")); err == nil {
					n.ignores = appendPatterns(n.ignores, data, slices.Concat(s.base, n.rel))
				} else if code := vfs.CodeOf(err); code == vfs.CodeRevoked || ctx.Err() != nil {
					n.err = err
					return
				}
				break
			}
		}
	}
	for _, e := range n.ents {
		if e.IsDir() && s.keep(e, n.rel, n.ignores) {
			name := e.Name()
			n.kids = append(n.kids, s.newNode(join(n.p, name), append(n.rel[:len(n.rel):len(n.rel)], name), n.ignores))
		}
	}
}

// ready reports whether n is loaded (without waiting).
func (n *node) ready() bool {
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// wait returns once n is loaded (loading it now if it was not queued), with
// the error of its load, or that of the search once it is over.
func (n *node) wait(ctx context.Context, s *searcher) error {
	if n.done == nil {
		n.load(ctx, s)
		return n.err
	}
	select {
	case <-n.done:
		s.ahead.Add(-1)
		return n.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// add appends a slot to the batch being filled, handing the batch over when
// it is full; false if the search is over.
func (s *searcher) add(ctx context.Context, sl slot) bool {
	if s.cur == nil {
		s.cur = &batch{slots: make([]slot, 0, batchSize), done: make(chan struct{})}
	}
	s.cur.slots = append(s.cur.slots, sl)
	if len(s.cur.slots) == batchSize {
		return s.flush(ctx)
	}
	return true
}

// flush hands the batch being filled, if any, to the output and the workers;
// false if the search is over.
func (s *searcher) flush(ctx context.Context) bool {
	b := s.cur
	if b == nil {
		return ctx.Err() == nil
	}
	s.cur = nil
	select {
	case s.order <- b:
	case <-ctx.Done():
		return false
	}
	select {
	case s.work <- b:
		return true
	case <-ctx.Done():
		close(b.done)
		return false
	}
}

// file queues p for a worker to search; regular says the walk listed it as a
// regular file (not so for a root the caller named).
func (s *searcher) file(ctx context.Context, p string, regular bool) bool {
	return s.add(ctx, slot{path: p, regular: regular})
}

func (s *searcher) skip(ctx context.Context, p string, err error) bool {
	code := vfs.CodeOf(err)
	if ctx.Err() != nil {
		return false
	}
	if code == vfs.CodeRevoked || code == vfs.CodeCanceled {
		if s.add(ctx, slot{path: p, fatal: err}) {
			s.flush(ctx)
		}
		return false
	}
	reason := SkipUnreadable
	if code == vfs.CodePermission {
		reason = SkipDenied
	}
	return s.add(ctx, slot{path: p, skip: &Skip{Path: p, Reason: reason, Err: err}})
}

// walk walks the directory of node n, depth first, queueing its files.
func (s *searcher) walk(ctx context.Context, n *node) bool {
	if !n.ready() && !s.flush(ctx) {
		return false
	}
	if err := n.wait(ctx, s); err != nil {
		return s.skip(ctx, n.p, err)
	}
	next := 0
	for _, e := range n.ents {
		if ctx.Err() != nil {
			return false
		}
		name := e.Name()
		switch t := e.Type(); {
		case t.IsDir():
			if next < len(n.kids) && path.Base(n.kids[next].p) == name {
				kid := n.kids[next]
				next++
				if !s.walk(ctx, kid) {
					return false
				}
			}
		case t.IsRegular():
			if !s.keep(e, n.rel, n.ignores) || !s.included(n.rel, name) || matchName(s.opts.ExcludeFiles, name) {
				continue
			}
			if !s.file(ctx, join(n.p, name), true) {
				return false
			}
		}
	}
	return true
}

// keep reports whether entry e of the directory at rel is walked: not .git,
// not ignored, not excluded.
func (s *searcher) keep(e fs.DirEntry, rel []string, ignores []gitignore.Pattern) bool {
	name := e.Name()
	isDir := e.IsDir()
	if isDir && name == ".git" && !s.opts.DotGit {
		return false
	}
	if isDir && matchName(s.opts.ExcludeDirs, name) {
		return false
	}
	if !s.opts.NoGitignore {
		if len(ignores) > 0 {
			full := slices.Concat(s.base, rel, []string{name})
			for i := len(ignores) - 1; i >= 0; i-- {
				if r := ignores[i].Match(full, isDir); r != gitignore.NoMatch {
					if r == gitignore.Exclude {
						return false
					}
					break
				}
			}
		}
	}
	if len(s.opts.Exclude) > 0 {
		relPath := strings.Join(append(rel[:len(rel):len(rel)], name), "/")
		for _, x := range s.opts.Exclude {
			if ok, _ := doublestar.Match(x, name); ok {
				return false
			}
			if ok, _ := doublestar.Match(x, relPath); ok {
				return false
			}
		}
	}
	return true
}

func (s *searcher) included(rel []string, name string) bool {
	if len(s.opts.Include) == 0 {
		return true
	}
	relPath := ""
	for _, g := range s.opts.Include {
		if !strings.Contains(g, "/") {
			if ok, _ := doublestar.Match(g, name); ok {
				return true
			}
			continue
		}
		if relPath == "" {
			relPath = strings.Join(append(rel[:len(rel):len(rel)], name), "/")
		}
		if ok, _ := doublestar.Match(strings.TrimPrefix(g, "/"), relPath); ok {
			return true
		}
	}
	return false
}

// matchName reports whether name matches one of globs.
func matchName(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := doublestar.Match(g, name); ok {
			return true
		}
	}
	return false
}

func splitNames(p string) []string {
	if p == "." || p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// ignoresAbove reads the .gitignore files from Options.IgnoreAbove down to
// the root's parent (none when IgnoreAbove is empty or not above the root).
func (s *searcher) ignoresAbove(ctx context.Context) []gitignore.Pattern {
	if s.opts.IgnoreAbove == "" || s.opts.NoGitignore {
		return nil
	}
	top := splitNames(cleanRoot(s.opts.IgnoreAbove))
	if len(top) > len(s.base) || !slices.Equal(top, s.base[:len(top)]) {
		return nil
	}
	var ps []gitignore.Pattern
	for i := len(top); i < len(s.base); i++ {
		d := strings.Join(s.base[:i], "/")
		if d == "" {
			d = "."
		}
		if data, err := s.d.ReadFile(ctx, join(d, ".gitignore")); err == nil {
			ps = appendPatterns(ps, data, s.base[:i])
		}
	}
	return ps
}

func appendPatterns(ps []gitignore.Pattern, data []byte, domain []string) []gitignore.Pattern {
	ps = ps[:len(ps):len(ps)] // a sibling's patterns never land in ours
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(line, domain))
	}
	return ps
}
