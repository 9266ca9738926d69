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
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"regexp/syntax"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bmatcuk/doublestar/v4"

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

// maxAhead bounds the directories loaded ahead of the walk.
const maxAhead = 4096

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
