// Package search is the content-search engine behind the MCP grep tool and
// `capfs grep`: a parallel, ordered walk over a *dir.Dir that reads each file
// once into a reused buffer and finds matching lines with literal fast paths.
//
// Every file access is a call on the Dir given to Search, so it is confined,
// policed and audited like any guest call: the engine holds no other handle.
//
// # Guarantees
//
//   - Results are deterministic: files are reported in walk order (depth
//     first, entries of a directory sorted by name, as dir.Dir.ReadDir returns
//     them), whatever the parallelism, and so is the cut at Options.Limit.
//   - Lines are matched one at a time, as grep and rg match them: a line is
//     the text between two \n (a \r before the \n is not part of it), so ^ and
//     $ mean its start and end and no match spans two lines.
//   - A file is never silently passed over: a file larger than
//     Options.MaxFileSize, one the policy refuses and one that cannot be read
//     is listed in Summary.Skipped with the reason; binary files (a NUL byte in
//     the first 8000 bytes, as grep and rg decide) are counted in
//     Summary.Binary. Directories that cannot be listed are listed in Skipped.
//   - By default .git directories and the entries .gitignore files exclude are
//     not searched (like rg); Options.NoIgnore (or DotGit, NoGitignore)
//     searches them. An explicitly named root is always searched.
//   - Once Options.Limit results are reached, the walk and the workers stop
//     (no more files are opened) and Summary.Truncated is set.
//   - Revocation and cancellation end the search with their error; no
//     goroutine of a search outlives the Search call.
//
// # Not guaranteed
//
//   - Symbolic links met during the walk are not followed (as with rg and
//     grep -r); a root that is a symlink is.
//   - .gitignore files are read from the search root down, and from
//     Options.IgnoreAbove down to the root when it is set; .git/info/exclude,
//     the global excludes file and .ignore/.rgignore are not consulted, and
//     they apply whether or not the tree is a git work tree (rg requires one).
//   - A file that changes while it is read is searched as it was read, to the
//     end its reads found (grown or shrunk since its open checked its size);
//     one that grew past Options.MaxFileSize is skipped as too large.
//   - A binary file larger than 64 KiB is read only up to its first 64 KiB
//     (enough to see the NUL byte that makes it binary).
//   - Case-insensitive matching follows Go's regexp (?i), i.e. Unicode simple
//     case folding.
package search

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"regexp"
	"regexp/syntax"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// Mode says what Search reports for each file.
type Mode int

const (
	// FilesWithMatches reports each file with a match, once (grep -l); the file
	// is searched only up to its first match.
	FilesWithMatches Mode = iota
	// Content reports the matching lines, with context lines (grep -n).
	Content
	// Count reports each file with a match and its number of matching lines
	// (grep -c, without the zero counts).
	Count
)

// CodeInvalidArgument is the code of the errors Search returns for bad
// options (a malformed pattern or glob, negative context): an argument error,
// never a path error. It is not a vfs code: no Dir call returns it.
const CodeInvalidArgument vfs.Code = "invalid_argument"

// DefaultMaxFileSize is Options.MaxFileSize when it is zero.
const DefaultMaxFileSize = 64 << 20

// binarySniff is how much of a file is looked at for a NUL byte.
const binarySniff = 8000

// Options configure one search. Pattern is required.
type Options struct {
	// Pattern is a regular expression in Go's RE2 syntax, or a literal string
	// when Fixed is set. A pattern that is a plain literal is searched as one
	// either way.
	Pattern string
	Fixed   bool
	// IgnoreCase matches without regard to case ((?i)).
	IgnoreCase bool
	// Mode is what is reported (FilesWithMatches by default).
	Mode Mode
	// Before and After are the context lines shown around each match in
	// Content mode (grep -B/-A).
	Before, After int
	// Include, if not empty, restricts the search to files matching one of
	// these doublestar globs: a pattern without "/" is matched against the file
	// name, one with "/" against the path from the search root.
	Include []string
	// Exclude skips files and directories (and all beneath them) matching one
	// of these globs, against the name and against the path from the root.
	Exclude []string
	// NoIgnore searches .git directories and what .gitignore files exclude
	// (NoGitignore and DotGit both).
	NoIgnore bool
	// NoGitignore searches what .gitignore files exclude; DotGit searches
	// .git directories.
	NoGitignore, DotGit bool
	// IgnoreAbove, when not empty, is a directory at or above the search root
	// ("." for the Dir's root): the .gitignore files of the directories from it
	// down to the root's parent are honoured too, as git honours those of a
	// work tree's parents.
	IgnoreAbove string
	// ExcludeFiles skips files whose name matches one of these globs, and
	// ExcludeDirs directories whose name does (grep's --exclude and
	// --exclude-dir); an explicitly named root is searched regardless.
	ExcludeFiles, ExcludeDirs []string
	// MaxFileSize: larger files are not read and are reported in
	// Summary.Skipped as SkipTooLarge (DefaultMaxFileSize when zero; no limit
	// when negative).
	MaxFileSize int64
	// Custom, when set, replaces the engine's matching: it is called with each
	// file's path and contents (binary files included: Custom decides what they
	// are) from a worker goroutine, several at once, and data is valid only
	// during the call. A file for which it returns report true is emitted, in
	// walk order, with File.Value set to the value it returns. Pattern may then
	// be empty; Mode, Before, After and Limit do not apply.
	Custom func(path string, data []byte) (value any, report bool)
	// SkipBinary, with Custom, counts binary files (a NUL byte in the first
	// 8000 bytes) in Summary.Binary instead of passing them to Custom, and
	// reads no more of a large one than it takes to tell. (Without Custom,
	// binary files are never searched.)
	SkipBinary bool
	// Limit, when positive, stops the search after Limit results: files in
	// FilesWithMatches and Count mode, matching lines in Content mode (the file
	// that reaches it is cut after that line).
	Limit int
	// Workers is how many files are searched at once (GOMAXPROCS when zero).
	Workers int
}

// Line is one line of a Content result.
type Line struct {
	Num   int    // 1-based line number
	Text  []byte // the line, without its \n or \r\n; a copy owned by the caller
	Match bool   // false for a context line
}

// File is one file with at least one match.
type File struct {
	Path  string // the path as the Dir names it: the root joined with the names walked ("src/a.go")
	Count int    // matching lines found (1 in FilesWithMatches mode: the search stops at the first)
	// Lines are the matching and context lines in Content mode, in order; two
	// consecutive entries whose numbers are not consecutive start a new group
	// (where grep prints "--").
	Lines []Line
	// Value is what Options.Custom returned for the file.
	Value any
}

// SkipReason says why a file or directory was not searched.
type SkipReason string

// The reasons of a Skip.
const (
	SkipTooLarge   SkipReason = "too_large"  // larger than Options.MaxFileSize
	SkipDenied     SkipReason = "denied"     // the policy refused it (fs_permission_denied)
	SkipUnreadable SkipReason = "unreadable" // another error (the error is in Skip.Err)
)

// Skip is one entry that was not searched.
type Skip struct {
	Path   string
	Reason SkipReason
	Size   int64 // the size of a too-large file
	Err    error // the error, for SkipDenied and SkipUnreadable
}

// Summary is what a search did besides the files it reported.
type Summary struct {
	Searched  int    // files read and searched
	Matched   int    // files reported
	Binary    int    // binary files not searched
	Skipped   []Skip // entries not searched, in walk order
	Truncated bool   // the search stopped at Options.Limit
}

// Search searches the files beneath root (a file or a directory of d; "" is
// ".") and calls emit with each file that matches, in walk order, from the
// calling goroutine. An error from emit stops the search and is returned.
// It fails with the error of the root's Stat, with an invalid_argument
// *vfs.Error for a bad pattern or glob, and with revoked or the context's
// error if the search is stopped by them.
func Search(ctx context.Context, d *dir.Dir, root string, opts Options, emit func(*File) error) (Summary, error) {
	var sum Summary
	opts, m, err := prepare(opts, root)
	if err != nil {
		return sum, err
	}
	if root == "" {
		root = "."
	}
	info, err := d.Stat(ctx, root)
	if err != nil {
		return sum, err
	}
	root = cleanRoot(root)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &searcher{d: d, opts: opts, m: m, root: root, base: splitNames(root),
		// At most 64 batches (1,024 files) are read ahead of the results
		// emitted: what a search cut at Options.Limit may open in vain.
		order: make(chan *batch, 64), work: make(chan *batch, 16), loadq: make(chan *node, maxAhead)}
	var wg sync.WaitGroup
	s.start(ctx, &wg, info.IsDir())
	// However the search ends, stop the walk, the workers and the directory
	// loads, and wait for them: no Dir call of this search runs after Search
	// returns.
	defer func() {
		cancel()
		wg.Wait()
		s.loaders.Wait()
	}()

	c := &collector{opts: &opts, emit: emit, sum: &sum}
	for b := range s.order {
		<-b.done
		for i := range b.slots {
			stop, err := c.take(&b.slots[i])
			if err != nil {
				return sum, err
			}
			if stop {
				cancel()
				return sum, nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return sum, err
	}
	return sum, nil
}

// prepare checks opts (the pattern, the globs, the context lines) and fills
// in its defaults; it returns the pattern's matcher, nil for a Custom
// search.
func prepare(opts Options, root string) (Options, *matcher, error) {
	var m *matcher
	if opts.Custom == nil {
		var err error
		if m, err = compile(opts); err != nil {
			return opts, nil, err
		}
	}
	if opts.NoIgnore {
		opts.NoGitignore, opts.DotGit = true, true
	}
	for _, g := range slices.Concat(opts.Include, opts.Exclude, opts.ExcludeFiles, opts.ExcludeDirs) {
		if !doublestar.ValidatePattern(g) {
			return opts, nil, &vfs.Error{Code: CodeInvalidArgument, Op: "search", Path: root, Err: fmt.Errorf("malformed glob %q", g)}
		}
	}
	switch {
	case opts.MaxFileSize == 0:
		opts.MaxFileSize = DefaultMaxFileSize
	case opts.MaxFileSize < 0:
		opts.MaxFileSize = math.MaxInt64
	}
	if opts.Workers <= 0 {
		opts.Workers = max(4, 2*runtime.GOMAXPROCS(0))
	}
	if opts.Before < 0 || opts.After < 0 {
		return opts, nil, &vfs.Error{Code: CodeInvalidArgument, Op: "search", Path: root, Err: errors.New("context lines must not be negative")}
	}
	return opts, m, nil
}

// start runs the directory loaders, the workers, and the walk of the root
// (a directory, or the one file named), which feeds them and closes s.order
// and s.work when it is done; wg counts the workers and the walk.
func (s *searcher) start(ctx context.Context, wg *sync.WaitGroup, isDir bool) {
	for range max(2, runtime.GOMAXPROCS(0)) {
		s.loaders.Add(1)
		go s.loader(ctx)
	}
	for range s.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.runWorker(ctx)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(s.order)
		defer close(s.work)
		if !isDir {
			s.file(ctx, s.root, false)
		} else if !s.walk(ctx, &node{p: s.root, inherit: s.ignoresAbove(ctx)}) {
			return
		}
		s.flush(ctx)
	}()
}

// runWorker searches the files of the batches on s.work, until ctx ends.
func (s *searcher) runWorker(ctx context.Context) {
	w := &worker{s: s, expect: vfs.ExpectRegular(ctx)}
	defer w.release()
	for b := range s.work {
		for i := range b.slots {
			sl := &b.slots[i]
			if ctx.Err() != nil {
				break
			}
			if sl.skip == nil && sl.fatal == nil {
				w.search(ctx, sl)
			}
		}
		close(b.done)
	}
}

// collector takes the searched slots in walk order into the summary and
// emits the files that match, up to Options.Limit.
type collector struct {
	opts    *Options
	emit    func(*File) error
	sum     *Summary
	results int // lines (Content) or files counted against the limit
}

// take records slot sl and emits its file; it reports true when the limit
// is reached (the summary then says Truncated).
func (c *collector) take(sl *slot) (bool, error) {
	switch {
	case sl.fatal != nil:
		return false, sl.fatal
	case sl.skip != nil:
		c.sum.Skipped = append(c.sum.Skipped, *sl.skip)
		return false, nil
	case sl.binary:
		c.sum.Binary++
		return false, nil
	case !sl.searched:
		return false, nil
	}
	c.sum.Searched++
	f := sl.file
	if f == nil {
		return false, nil
	}
	c.count(f)
	c.sum.Matched++
	if err := c.emit(f); err != nil {
		return false, err
	}
	if c.opts.Limit > 0 && c.results >= c.opts.Limit {
		c.sum.Truncated = true
		return true, nil
	}
	return false, nil
}

// count counts f against the limit: its matching lines in Content mode (f
// cut at the limit), else one.
func (c *collector) count(f *File) {
	if c.opts.Limit <= 0 {
		return
	}
	if c.opts.Mode != Content {
		c.results++
		return
	}
	if left := c.opts.Limit - c.results; f.Count > left {
		cutAt(f, left)
	}
	c.results += f.Count
}

// cutAt keeps the lines of f up to its n-th matching line.
func cutAt(f *File, n int) {
	seen := 0
	for i, l := range f.Lines {
		if l.Match {
			seen++
			if seen == n {
				f.Lines = f.Lines[:i+1]
				break
			}
		}
	}
	f.Count = n
}

func cleanRoot(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" {
		return "."
	}
	return p
}

func join(dirPath, name string) string {
	if dirPath == "." {
		return name
	}
	return dirPath + "/" + name
}

// batch is a run of consecutive slots of the ordered output, searched by one
// worker: handing files to workers and results back one at a time would cost
// a goroutine switch or two per file. done is closed once every slot is final.
type batch struct {
	slots []slot
	done  chan struct{}
}

// batchSize is how many files the walk hands a worker at once. The walk hands
// over a shorter batch before it waits for a directory listing, so the
// workers never wait on a batch the walk is not filling.
const batchSize = 16

// slot is one entry of the ordered output: a file to search, or a skip found
// by the walk (skip or fatal set).
type slot struct {
	path     string // the path from the Dir given to Search, opened through it
	regular  bool   // the walk listed path as a regular file (opened with vfs.ExpectRegular)
	searched bool
	binary   bool
	file     *File
	skip     *Skip
	fatal    error
}

type searcher struct {
	d       *dir.Dir
	opts    Options
	m       *matcher
	root    string
	base    []string       // root's names from the Dir's root (the domain of .gitignore patterns starts there)
	order   chan *batch    // every batch, in walk order
	work    chan *batch    // the batches to search
	cur     *batch         // the batch the walk is filling
	loadq   chan *node     // the directories to load ahead of the walk
	ahead   atomic.Int64   // nodes queued, loading or loaded and not yet walked
	loaders sync.WaitGroup // the goroutines loading nodes (loader)
}

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

// maxAhead bounds the directories loaded ahead of the walk.
const maxAhead = 4096

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

// worker searches files with buffers of its own.
type worker struct {
	s      *searcher
	expect context.Context // the search's context with vfs.ExpectRegular, for the files the walk listed
	buf    []byte
	lower  []byte
}

// bufs keeps the read buffers of finished searches for the next (a search
// would otherwise grow a buffer per worker from nothing each time).
var bufs sync.Pool

// keepBuf is the largest buffer bufs keeps: one that grew for a larger file is
// left to the garbage collector.
const keepBuf = 4 << 20

// minBuf is the size of a worker's first buffer.
const minBuf = 64 << 10

// release gives the worker's read buffer back to bufs.
func (w *worker) release() {
	if c := cap(w.buf); c >= minBuf && c <= keepBuf {
		b := w.buf[:c]
		bufs.Put(&b)
	}
	w.buf = nil
}

func (w *worker) search(ctx context.Context, sl *slot) {
	s := w.s
	// A file the walk listed as regular is opened with the hint, which lets the
	// physical backend open it in one system call (vfs.ExpectRegular); a root
	// the caller named is opened as any path is.
	octx := ctx
	if sl.regular {
		octx = w.expect
	}
	h, err := s.d.Open(octx, sl.path, os.O_RDONLY, 0)
	if err != nil {
		failSlot(ctx, sl, err)
		return
	}
	defer h.Close()
	// The status the open checked (no fstat), else Stat's.
	info, ok := h.OpenStat()
	if !ok {
		if info, err = h.Stat(); err != nil {
			failSlot(ctx, sl, err)
			return
		}
	}
	if !info.Mode().IsRegular() {
		return
	}
	size := info.Size()
	if size > s.opts.MaxFileSize {
		sl.skip = &Skip{Path: sl.path, Reason: SkipTooLarge, Size: size}
		return
	}
	n, binary, err := w.read(h, size, s.opts.Custom == nil || s.opts.SkipBinary)
	switch {
	case err != nil:
		failSlot(ctx, sl, err)
		return
	case int64(n) > s.opts.MaxFileSize:
		sl.skip = &Skip{Path: sl.path, Reason: SkipTooLarge, Size: int64(n)}
		return
	case binary:
		sl.binary = true
		return
	}
	w.match(sl, w.buf[:n])
}

// failSlot records err, met opening or reading sl's file: a revoked Dir or
// an ended search is fatal; a refusal, a file too large and any other error
// skip the file.
func failSlot(ctx context.Context, sl *slot, err error) {
	code := vfs.CodeOf(err)
	switch {
	case code == vfs.CodeRevoked || code == vfs.CodeCanceled || ctx.Err() != nil:
		sl.fatal = err
	case code == vfs.CodePermission:
		sl.skip = &Skip{Path: sl.path, Reason: SkipDenied, Err: err}
	case code == vfs.CodeTooLarge:
		sl.skip = &Skip{Path: sl.path, Reason: SkipTooLarge, Err: err}
	default:
		sl.skip = &Skip{Path: sl.path, Reason: SkipUnreadable, Err: err}
	}
}

// match searches data, sl's file as read, with Options.Custom or the
// pattern.
func (w *worker) match(sl *slot, data []byte) {
	sl.searched = true
	if custom := w.s.opts.Custom; custom != nil {
		if v, ok := custom(sl.path, data); ok {
			sl.file = &File{Path: sl.path, Value: v}
		}
		return
	}
	sl.file = w.scan(sl.path, data)
}

// firstChunk is how much of a file larger than it is read before the rest,
// when binary files are not searched: a NUL byte in its first binarySniff
// bytes ends the read there.
const firstChunk = 64 << 10

// read reads the file open as h, of the given size at its open, into w.buf and
// returns how many bytes it read: the whole file, or more than MaxFileSize
// bytes of it when it is larger, or, with sniff, the first bytes of a binary
// file (binary true: a NUL byte in its first binarySniff bytes).
//
// It asks for one byte more than size, so a file still of that size is read with
// one read: a read that returns less than asked for, once size bytes are in, is
// taken as the end of the file (for a regular file it is: the kernel fills a read
// up to the end), and one that fills the buffer means the file grew, so it reads
// on to the end. A file that reports size 0 (as special files do) is read until
// a read returns nothing. With sniff, a file larger than firstChunk is read
// first up to firstChunk bytes and looked at for a NUL byte.
func (w *worker) read(h io.Reader, size int64, sniff bool) (n int, binary bool, err error) {
	limit := w.s.opts.MaxFileSize
	if w.buf == nil {
		if b, ok := bufs.Get().(*[]byte); ok {
			w.buf = *b
		}
	}
	sniffAt, want := readPlan(size, sniff)
	w.grow(0, want)
	for {
		if n == len(w.buf) {
			if int64(n) > limit {
				return n, false, nil
			}
			w.grow(n, 2*n)
		}
		end := len(w.buf)
		if sniffAt > n && size > firstChunk {
			end = sniffAt
		}
		asked := end - n
		k, err := h.Read(w.buf[n:end])
		n += k
		if err != nil && err != io.EOF {
			return n, false, err
		}
		eof := readEnded(err, k, asked, size, n)
		if sniffAt >= 0 && (n >= sniffAt || eof) {
			if bytes.IndexByte(w.buf[:min(n, binarySniff)], 0) >= 0 {
				return n, true, nil
			}
			sniffAt = -1
			w.grow(n, int(size)+1) // the rest of a large file
		}
		if eof {
			return n, false, nil
		}
	}
}

// readPlan is where read looks for a NUL byte (-1: nowhere, without sniff)
// and how many bytes it asks for first: one more than size, or with sniff
// firstChunk of a file larger than that.
func readPlan(size int64, sniff bool) (sniffAt, want int) {
	sniffAt, want = -1, int(size)+1
	if !sniff {
		return sniffAt, want
	}
	if size > firstChunk {
		return firstChunk, firstChunk
	}
	return binarySniff, want
}

// readEnded reports whether a read that returned k of the asked bytes (err)
// ends a file of size bytes once n are in: at EOF, an empty read, or a short
// read once size bytes are in.
func readEnded(err error, k, asked int, size int64, n int) bool {
	return err == io.EOF || k == 0 || (k < asked && size > 0 && int64(n) >= size)
}

// grow makes w.buf (its whole capacity, as its length) hold at least want
// bytes, keeping its first n.
func (w *worker) grow(n, want int) {
	if cap(w.buf) >= want {
		w.buf = w.buf[:cap(w.buf)]
		return
	}
	nb := make([]byte, max(want+want/4, minBuf))
	copy(nb, w.buf[:n])
	w.buf = nb
}

// scan finds the matching lines of data.
func (w *worker) scan(p string, data []byte) *File {
	m := w.s.m
	hay := data
	if m.fold {
		if cap(w.lower) < len(data) {
			w.lower = make([]byte, len(data)+len(data)/4)
		}
		hay = asciiLower(w.lower[:len(data)], data)
	}
	perLine := m.re != nil && (m.bufRe == nil || bytes.IndexByte(data, '\r') >= 0)
	sc := lineScan{m: m, opts: &w.s.opts, data: data, hay: hay, lineNo: 1}
	pos := 0
	for pos < len(data) {
		ls, le := m.next(data, hay, pos, perLine)
		if ls < 0 {
			break
		}
		sc.lineNo += bytes.Count(data[sc.counted:ls], nl)
		sc.counted = ls
		if sc.f == nil {
			sc.f = &File{Path: p}
		}
		sc.f.Count++
		switch sc.opts.Mode {
		case FilesWithMatches:
			return sc.f
		case Content:
			var done bool
			if pos, done = sc.content(ls, le); done {
				return sc.f
			}
		default:
			pos = le + 1
		}
	}
	return sc.f
}

// lineScan is scan's state in Content mode: the file so far and where the
// lines reported end.
type lineScan struct {
	m         *matcher
	opts      *Options
	data, hay []byte
	f         *File
	lineNo    int // the number of the line starting at counted
	counted   int
	lastEnd   int // offset past the last line reported (context included)
	lastNum   int // the number of the last line reported
}

// content reports the matching line [ls, le) with its context, and returns
// the offset to search on from; done when the file reached the limit.
func (sc *lineScan) content(ls, le int) (next int, done bool) {
	if sc.opts.Before > 0 {
		sc.before(ls)
	}
	sc.f.Lines = append(sc.f.Lines, Line{Num: sc.lineNo, Text: clone(trimCR(sc.data[ls:le])), Match: true})
	sc.lastNum = sc.lineNo
	if sc.atLimit() {
		return 0, true
	}
	if next, done = sc.after(le); done {
		return 0, true
	}
	sc.lastEnd = min(next, len(sc.data))
	return next, false
}

// atLimit reports whether the file has Options.Limit matching lines.
func (sc *lineScan) atLimit() bool {
	return sc.opts.Limit > 0 && sc.f.Count >= sc.opts.Limit
}

// before reports the context lines before the match starting at ls, not
// overlapping what was shown.
func (sc *lineScan) before(ls int) {
	data := sc.data
	var pre []Line
	start, num := ls, sc.lineNo
	for k := 0; k < sc.opts.Before && start > sc.lastEnd && start > 0; k++ {
		prevEnd := start - 1
		prevStart := bytes.LastIndexByte(data[:prevEnd], '\n') + 1
		if prevStart < sc.lastEnd {
			break
		}
		num--
		pre = append(pre, Line{Num: num, Text: clone(trimCR(data[prevStart:prevEnd]))})
		start = prevStart
	}
	for k := len(pre) - 1; k >= 0; k-- {
		if pre[k].Num > sc.lastNum {
			sc.f.Lines = append(sc.f.Lines, pre[k])
		}
	}
}

// after reports the context lines after the match ending at le, any of
// which may match (and extend the context), and returns the offset past
// them; done when the file reached the limit.
func (sc *lineScan) after(le int) (next int, done bool) {
	data := sc.data
	next = le + 1
	left := sc.opts.After
	for left > 0 && next < len(data) {
		e := bytes.IndexByte(data[next:], '\n')
		end := len(data)
		if e >= 0 {
			end = next + e
		}
		sc.lineNo++
		sc.counted = next
		line := data[next:end]
		if sc.m.lineMatch(trimCR(line), sc.hay[next:end]) {
			sc.f.Count++
			sc.f.Lines = append(sc.f.Lines, Line{Num: sc.lineNo, Text: clone(trimCR(line)), Match: true})
			left = sc.opts.After
			if sc.atLimit() {
				return next, true
			}
		} else {
			sc.f.Lines = append(sc.f.Lines, Line{Num: sc.lineNo, Text: clone(trimCR(line))})
			left--
		}
		sc.lastNum = sc.lineNo
		next = end + 1
	}
	return next, false
}

var nl = []byte{'\n'}

func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

func asciiLower(dst, src []byte) []byte {
	for i, c := range src {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst[i] = c
	}
	return dst
}

// matcher finds matching lines.
type matcher struct {
	lit   finder         // literal search (lower-case if fold)
	fold  bool           // lit is searched in the ASCII-lowered text
	re    *regexp.Regexp // the line expression (nil for a literal)
	req   finder         // a literal every match contains (re set; none when req.lit is nil)
	bufRe *regexp.Regexp // re in multi-line mode over the whole buffer (nil: line by line)
}

// compile builds the matcher of opts.Pattern, choosing a fast path: a literal
// (searched over the whole file, after ASCII lowering for IgnoreCase), a
// literal every match must contain (searched for candidates, the expression
// run on their line only) or the expression over the whole file in
// multi-line mode (then verified on the line).
func compile(opts Options) (*matcher, error) {
	if opts.Pattern == "" {
		return nil, badPattern(errors.New("pattern is empty"))
	}
	lit, isLit, err := literalOf(opts)
	if err != nil {
		return nil, err
	}
	if isLit && !strings.ContainsAny(lit, "\r\n") {
		switch {
		case !opts.IgnoreCase:
			return &matcher{lit: newFinder([]byte(lit))}, nil
		case isASCII(lit) && !strings.ContainsAny(lit, "kKsS"):
			// ASCII folding is exact for these letters; k and s also fold to
			// U+212A and U+017F in Go's (?i), so they take the expression path.
			return &matcher{lit: newFinder([]byte(strings.ToLower(lit))), fold: true}, nil
		}
	}
	expr := opts.Pattern
	if isLit {
		expr = regexp.QuoteMeta(lit)
	}
	if opts.IgnoreCase {
		expr = "(?i)" + expr
	}
	return exprMatcher(expr)
}

// badPattern is compile's error for a pattern err says is bad.
func badPattern(err error) error {
	return &vfs.Error{Code: CodeInvalidArgument, Op: "search", Err: err}
}

// literalOf is opts.Pattern as a literal, when it is one: Fixed, or an
// expression that is a case-sensitive literal.
func literalOf(opts Options) (string, bool, error) {
	if opts.Fixed {
		return opts.Pattern, true, nil
	}
	re, err := syntax.Parse(opts.Pattern, syntax.Perl)
	if err != nil {
		return "", false, badPattern(fmt.Errorf("bad regular expression: %v", err))
	}
	re = re.Simplify()
	if re.Op == syntax.OpLiteral && re.Flags&syntax.FoldCase == 0 {
		return string(re.Rune), true, nil
	}
	return opts.Pattern, false, nil
}

// exprMatcher is the matcher of regular expression expr: with the literal
// every match contains, when there is one, and expr in multi-line mode over
// the whole buffer unless it anchors at the text's ends.
func exprMatcher(expr string) (*matcher, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, badPattern(fmt.Errorf("bad regular expression: %v", err))
	}
	m := &matcher{re: re}
	if tree, err := syntax.Parse(expr, syntax.Perl); err == nil {
		if r := required(tree.Simplify()); len(r) > 0 && !strings.ContainsAny(r, "\r\n") {
			m.req = newFinder([]byte(r))
		}
	}
	if !strings.Contains(expr, `\A`) && !strings.Contains(expr, `\z`) {
		m.bufRe, _ = regexp.Compile("(?m)" + expr)
	}
	return m, nil
}

// required returns the longest literal that every match of re contains (""
// when there is none that is certain): a case-sensitive literal, or the
// longest required literal of a concatenation's parts, a capture's or a
// repetition's (of at least one) body. Alternations and optional parts
// contribute nothing.
func required(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return ""
		}
		return string(re.Rune)
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		// Adjacent literals join into one run; the longest run, or the longest
		// required literal inside a part, wins.
		best, run := "", ""
		for _, sub := range re.Sub {
			if sub.Op == syntax.OpLiteral && sub.Flags&syntax.FoldCase == 0 {
				run += string(sub.Rune)
				if len(run) > len(best) {
					best = run
				}
				continue
			}
			run = ""
			if r := required(sub); len(r) > len(best) {
				best = r
			}
		}
		return best
	}
	return ""
}

// finder searches for one literal, looking first for its rarest byte (by a
// table of how common bytes are in source code and text), as ripgrep does:
// bytes.Index scans for the literal's first byte, which in "func New" is
// among the commonest.
type finder struct {
	lit  []byte
	rare int // the index in lit of the byte scanned for
}

func newFinder(lit []byte) finder {
	f := finder{lit: lit}
	for i, c := range lit {
		if byteRank(c) > byteRank(lit[f.rare]) {
			f.rare = i
		}
	}
	return f
}

// commonBytes are the bytes of source code and prose, commonest first; a byte
// not listed ranks as rare.
const commonBytes = " e\tt\nrsnaiolcd.u(p)mf,\"_=h:gb/*;-0y1{}w2v[]kxESRT&ACNI<>'F#DPLM3O54B"

// byteRank is c's rank in commonBytes (lower is commoner), 255 if not listed.
func byteRank(c byte) int {
	if i := strings.IndexByte(commonBytes, c); i >= 0 {
		return i
	}
	return 255
}

// index returns the offset of the first occurrence of the literal in h, or -1.
func (f *finder) index(h []byte) int {
	n := len(f.lit)
	if n < 2 || f.rare == 0 {
		return bytes.Index(h, f.lit)
	}
	c := f.lit[f.rare]
	for i := f.rare; i < len(h); {
		j := bytes.IndexByte(h[i:], c)
		if j < 0 {
			return -1
		}
		start := i + j - f.rare
		if start+n > len(h) {
			return -1
		}
		if bytes.Equal(h[start:start+n], f.lit) {
			return start
		}
		i += j + 1
	}
	return -1
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// lineBounds returns the line of data holding offset i: [start, end), end at
// the \n or the end of data.
func lineBounds(data []byte, i int) (int, int) {
	start := bytes.LastIndexByte(data[:i], '\n') + 1
	end := bytes.IndexByte(data[i:], '\n')
	if end < 0 {
		return start, len(data)
	}
	return start, i + end
}

// next returns the first matching line starting at or after pos (a line
// start), or -1.
func (m *matcher) next(data, hay []byte, pos int, perLine bool) (int, int) {
	// pos == len(data) is past the last line: a final \n ends a line, it
	// does not start an empty one (and an empty file has no line).
	for pos < len(data) {
		switch {
		case m.re == nil:
			i := m.lit.index(hay[pos:])
			if i < 0 {
				return -1, -1
			}
			s, e := lineBounds(data, pos+i)
			return s, e
		case m.req.lit != nil:
			// Only lines holding the required literal can match.
			i := m.req.index(data[pos:])
			if i < 0 {
				return -1, -1
			}
			s, e := lineBounds(data, pos+i)
			if m.re.Match(trimCR(data[s:e])) {
				return s, e
			}
			if e >= len(data) {
				return -1, -1
			}
			pos = e + 1
		case perLine:
			s, e := lineBounds(data, pos)
			if m.re.Match(trimCR(data[s:e])) {
				return s, e
			}
			if e >= len(data) {
				return -1, -1
			}
			pos = e + 1
		default:
			loc := m.bufRe.FindIndex(data[pos:])
			if loc == nil || pos+loc[0] >= len(data) {
				return -1, -1
			}
			s, e := lineBounds(data, pos+loc[0])
			if m.re.Match(data[s:e]) {
				return s, e
			}
			if e >= len(data) {
				return -1, -1
			}
			pos = e + 1
		}
	}
	return -1, -1
}

// lineMatch reports whether one line matches (line without its end; low the
// same bytes lowered when folding).
func (m *matcher) lineMatch(line, low []byte) bool {
	switch {
	case m.re == nil && m.fold:
		return m.lit.index(low) >= 0
	case m.re == nil:
		return m.lit.index(line) >= 0
	default:
		return m.re.Match(line)
	}
}

// Literal is a compiled substring search, the engine's own: it scans for the
// literal's rarest byte (see finder) and checks the literal around it.
type Literal struct{ f finder }

// NewLiteral compiles a search for lit (not empty).
func NewLiteral(lit []byte) *Literal { return &Literal{newFinder(lit)} }

// Index returns the offset of the first occurrence of the literal in h, or -1.
func (l *Literal) Index(h []byte) int { return l.f.index(h) }

// Required returns a literal that every match of the RE2 expression expr
// contains, case-sensitively and without a line break, or "" when none is
// certain (an alternation, case folding, a malformed expression): a line
// without it cannot match, so a search can look for it before running the
// expression on the lines that hold it.
func Required(expr string) string {
	tree, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return ""
	}
	r := required(tree.Simplify())
	if strings.ContainsAny(r, "\r\n") {
		return ""
	}
	return r
}
