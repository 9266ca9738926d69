package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/spf13/cobra"

	"github.com/capfs/capfs/vfs"
)

// defaultMaxFilesize is the largest file grep reads when --max-filesize is not
// given; larger files are reported on standard error, never passed over in
// silence.
const defaultMaxFilesize = 256 << 20

const grepLong = `Search the files under each PATH for lines matching PATTERN, like
"grep -rn": PATTERN is a regular expression (Go's RE2 syntax, which is close to
grep -E); a directory PATH is searched recursively (-r is implied); a file PATH
is searched itself. With no PATH, grep searches the working mount ("project" by
default, else the whole namespace). Paths are namespace paths.

Output is grep's: "path:line" for each selected line ("path:number:line" with
-n; the path is left out when a single file is searched, or with -h), context
lines with "-" in place of ":" and "--" between groups, "path:count" with -c,
file names only with -l/-L. No line is printed twice.

What is searched, as ripgrep does by default: ".gitignore" files are honoured
(those of the directories above PATH inside its mount too), and ".git"
directories are skipped; --no-ignore and --dot-git (or -u, both) change that.
Symlinks met while walking are not followed. Binary files (holding a NUL byte)
met while walking are skipped unless -a; one named as a PATH is searched, and a
match is reported as "binary file matches", as grep does. Files larger than --max-filesize (default 256MiB) and
files the policy keeps out of reach (secrets such as .env and *.pem) are not
searched, and a one-line summary on standard error says how many, which, and
how to include them.

Exit status: 0 when a line was selected, 1 when none was, 2 on an error (a
missing PATH, an unreadable file, a bad pattern), as grep; with -q, 0 as soon as
a line is selected, even if an error occurred.`

type grepOptions struct {
	patterns                 []string
	fixed, extended, basic   bool
	ignoreCase, noIgnoreCase bool
	word, line, invert       bool
	count, only              bool
	filesWith, filesWithout  bool
	lineNumber, noLineNumber bool
	withName, noName         bool
	after, before, context   int
	maxCount                 int
	quiet, noMessages        bool
	recursive, deref         bool
	includes, excludes       []string
	excludeDirs              []string
	noIgnore, dotGit         bool
	unrestricted             int
	text                     bool
	maxFilesize              string
	color                    string
	nullSep                  bool
}

func newGrepCmd(o *globalOptions) *cobra.Command {
	g := &grepOptions{}
	cmd := &cobra.Command{
		Use:   "grep [OPTION]... PATTERN [PATH]...",
		Short: "Search file contents with a regular expression (grep -rn, ripgrep's defaults)",
		Long:  grepLong,
		Example: `  capfs grep -n 'func main' project
  capfs grep -rlw TODO --include '*.go' project/src
  capfs grep -C2 -F 'a.b(' -e other project/README.md`,
	}
	f := cmd.Flags()
	f.SortFlags = false
	// -h is grep's --no-filename: help is --help only.
	f.Bool("help", false, "show this help")
	f.StringArrayVarP(&g.patterns, "regexp", "e", nil, "use PATTERN (repeatable; a line is selected when any matches); all arguments are then paths")
	f.BoolVarP(&g.fixed, "fixed-strings", "F", false, "PATTERN is a fixed string, not a regular expression")
	f.BoolVarP(&g.extended, "extended-regexp", "E", false, "PATTERN is an extended regular expression (the default: RE2 syntax)")
	f.BoolVarP(&g.ignoreCase, "ignore-case", "i", false, "ignore case distinctions")
	f.BoolVar(&g.noIgnoreCase, "no-ignore-case", false, "do not ignore case (the default)")
	f.BoolVarP(&g.word, "word-regexp", "w", false, "match only whole words")
	f.BoolVarP(&g.line, "line-regexp", "x", false, "match only whole lines")
	f.BoolVarP(&g.invert, "invert-match", "v", false, "select non-matching lines")
	f.BoolVarP(&g.count, "count", "c", false, "print only a count of selected lines per file")
	f.BoolVarP(&g.only, "only-matching", "o", false, "print only the matched parts of a line, one per line")
	f.BoolVarP(&g.filesWith, "files-with-matches", "l", false, "print only the names of files with a selected line")
	f.BoolVarP(&g.filesWithout, "files-without-match", "L", false, "print only the names of files with no selected line")
	f.BoolVarP(&g.lineNumber, "line-number", "n", false, "prefix each line with its line number")
	f.BoolVar(&g.noLineNumber, "no-line-number", false, "do not print line numbers (the default)")
	f.BoolVarP(&g.withName, "with-filename", "H", false, "print the file name for each match (the default when searching a directory or several files)")
	f.BoolVarP(&g.noName, "no-filename", "h", false, "never print file names")
	f.IntVarP(&g.after, "after-context", "A", -1, "print NUM lines of trailing context")
	f.IntVarP(&g.before, "before-context", "B", -1, "print NUM lines of leading context")
	f.IntVarP(&g.context, "context", "C", -1, "print NUM lines of context on both sides")
	f.IntVar(&g.maxCount, "max-count", -1, "stop reading a file after NUM selected lines (-m NUM: after \"grep\", -m is this flag; give --mount before \"grep\")")
	f.BoolVarP(&g.quiet, "quiet", "q", false, "print nothing; exit 0 at the first selected line")
	f.BoolVar(&g.quiet, "silent", false, "same as --quiet")
	f.BoolVarP(&g.noMessages, "no-messages", "s", false, "suppress messages about missing or unreadable files")
	f.BoolVarP(&g.recursive, "recursive", "r", false, "search directories recursively (always done; accepted for grep compatibility)")
	f.BoolVarP(&g.deref, "dereference-recursive", "R", false, "same as -r (symlinks met while walking are still not followed)")
	f.StringArrayVar(&g.includes, "include", nil, "search only files whose base name matches GLOB (repeatable)")
	f.StringArrayVar(&g.excludes, "exclude", nil, "skip files whose base name matches GLOB (repeatable)")
	f.StringArrayVar(&g.excludeDirs, "exclude-dir", nil, "skip directories whose base name matches GLOB (repeatable)")
	f.BoolVar(&g.noIgnore, "no-ignore", false, "search files that .gitignore files exclude")
	f.BoolVar(&g.dotGit, "dot-git", false, "search inside .git directories")
	f.CountVarP(&g.unrestricted, "unrestricted", "u", "search everything: -u is --no-ignore --dot-git")
	f.BoolVarP(&g.text, "text", "a", false, "search binary files as if they were text")
	f.StringVar(&g.maxFilesize, "max-filesize", "", "skip (and report) files larger than SIZE, e.g. 64MiB; none for no limit (default 256MiB)")
	f.StringVar(&g.color, "color", "auto", "colour matches, names and numbers: auto (on a terminal, unless NO_COLOR is set), always or never")
	f.StringVar(&g.color, "colour", "auto", "same as --color")
	f.BoolVarP(&g.nullSep, "null", "Z", false, "end file names with a NUL byte instead of ':' or a newline")
	for _, n := range []string{"after-context", "before-context", "context", "max-count"} {
		f.Lookup(n).DefValue = "0" // -1 (unset) is not shown as a default
	}
	_ = f.MarkHidden("colour")
	_ = f.MarkHidden("silent")
	_ = f.MarkHidden("no-ignore-case")
	_ = f.MarkHidden("no-line-number")

	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(g.patterns) == 0 && len(args) == 0 {
			return usageErrorf("grep: no PATTERN given (usage: capfs grep [OPTION]... PATTERN [PATH]...)")
		}
		return nil
	}
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		return runGrep(ctx, cmd, s, g, args)
	})
	return cmd
}

// grepRun is one invocation's state.
type grepRun struct {
	s     *session
	o     *grepOptions
	m     *lineMatcher
	max   int64 // file size limit, <0: none
	names bool  // print file names
	ctxB  int
	ctxA  int
	ctxOn bool // context was asked for (even 0 lines): groups are separated by "--"
	col   colors
	// walk state
	seen    map[string]bool
	listSem chan struct{} // bounds the directories listed ahead of the walk
	// results
	mu       sync.Mutex
	denied   []string // paths the policy refused
	why      map[string]bool
	tooLarge []string
	errs     int
}

func runGrep(ctx context.Context, cmd *cobra.Command, s *session, g *grepOptions, args []string) error {
	patterns := g.patterns
	if len(patterns) == 0 {
		patterns, args = []string{args[0]}, args[1:]
	}
	if g.basic {
		return usageErrorf("grep: basic regular expressions are not supported; use RE2 syntax")
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"--after-context", g.after}, {"--before-context", g.before}, {"--context", g.context}} {
		if n.v < -1 {
			return usageErrorf("grep: %s %d: must be 0 or more", n.name, n.v)
		}
	}
	if g.maxCount < -1 {
		g.maxCount = -1 // grep treats a negative count as no limit
	}
	for _, list := range [][]string{g.includes, g.excludes, g.excludeDirs} {
		for _, x := range list {
			if !doublestar.ValidatePattern(x) {
				return usageErrorf("grep: %s: malformed glob", x)
			}
		}
	}
	if g.unrestricted > 0 {
		g.noIgnore, g.dotGit = true, true
	}
	m, err := compileMatcher(patterns, g.fixed, g.ignoreCase && !g.noIgnoreCase, g.word, g.line, g.invert)
	if err != nil {
		return usageErrorf("grep: bad regular expression: %v", err)
	}
	r := &grepRun{s: s, o: g, m: m, max: defaultMaxFilesize, seen: map[string]bool{}, why: map[string]bool{}}
	if g.maxFilesize != "" {
		q, err := parseQuota(g.maxFilesize)
		if err != nil {
			return usageErrorf("grep: --max-filesize %s: %v", g.maxFilesize, err)
		}
		r.max = q
	}
	useColor, err := colorWanted(g.color, cmd.OutOrStdout())
	if err != nil {
		return usageErrorf("grep: --color %s: %v", g.color, err)
	}
	if useColor {
		r.col = grepColors()
	}
	r.ctxA, r.ctxB = max(g.context, 0), max(g.context, 0)
	if g.after >= 0 {
		r.ctxA = g.after
	}
	if g.before >= 0 {
		r.ctxB = g.before
	}
	r.ctxOn = g.after >= 0 || g.before >= 0 || g.context >= 0
	if g.only || g.count || g.filesWith || g.filesWithout || g.quiet {
		r.ctxA, r.ctxB, r.ctxOn = 0, 0, false
	}

	roots := args
	if len(roots) == 0 {
		roots = []string{r.defaultRoot()}
	}
	// File names: shown when searching a directory or more than one file.
	r.names = len(roots) > 1
	if !r.names {
		if st, err := s.Root.Stat(ctx, roots[0]); err == nil && st.IsDir() {
			r.names = true
		}
	}
	if g.withName {
		r.names = true
	}
	if g.noName {
		r.names = false
	}

	stdout := cmd.OutOrStdout()
	stderr := cmd.ErrOrStderr()
	w := bufio.NewWriterSize(stdout, 64<<10)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if g.maxCount == 0 {
		return exitStatus(exitFailed) // grep -m 0 reads nothing
	}

	jobs := make(chan *grepJob, 256)
	order := make(chan *grepJob, 1024)
	var wg sync.WaitGroup
	workers := max(runtime.GOMAXPROCS(0), 1)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for j := range jobs {
				buf = r.searchFile(ctx, j, buf)
				close(j.done)
			}
		}()
	}
	go func() {
		defer close(order)
		defer close(jobs)
		for _, root := range roots {
			if ctx.Err() != nil {
				return
			}
			r.walkRoot(ctx, root, jobs, order)
		}
	}()

	matched := false
	var writeErr error
	for j := range order {
		<-j.done
		if j.msg != "" && !g.noMessages {
			w.Flush()
			fmt.Fprintln(stderr, "capfs: grep: "+j.msg)
		}
		if j.matched {
			matched = true
		}
		if writeErr == nil && j.out.Len() > 0 {
			if _, err := w.Write(j.out.Bytes()); err != nil {
				writeErr = err
				cancel()
			}
		}
		if g.quiet && matched {
			cancel()
		}
	}
	wg.Wait()
	if err := w.Flush(); writeErr == nil {
		writeErr = err
	}
	if writeErr != nil {
		if errors.Is(writeErr, syscallEPIPE()) {
			return exitStatus(exitUsage)
		}
		return failed(fmt.Errorf("grep: writing the results: %v", writeErr))
	}
	if g.quiet && matched {
		return nil
	}
	if err := context.Cause(cmd.Context()); err != nil {
		return failed(vfs.NewError(vfs.CodeCanceled, "grep", vfs.Path{}, "interrupted"))
	}
	r.summarize(stderr)
	if r.errs > 0 {
		return exitStatus(exitUsage)
	}
	if !matched {
		return exitStatus(exitFailed)
	}
	return nil
}

// defaultRoot is what grep searches without a PATH: the working mount when it is
// mounted, else the whole namespace.
func (r *grepRun) defaultRoot() string {
	work := r.s.Work
	if work == "" {
		work = defaultWork
	}
	if p, err := vfs.ParseGuest(work); err == nil {
		for _, m := range r.s.Mounts {
			if m.Path.String() == p.String() {
				return work
			}
		}
	}
	return "/"
}

// grepJob is one file to search; the printer writes jobs in the order the walk
// produced them, so the output is deterministic.
type grepJob struct {
	path    string // namespace path, cleaned
	display string // the path as printed (escaped)
	done    chan struct{}
	out     bytes.Buffer
	msg     string // an error for standard error (escaped)
	matched bool
	// explicit: named as a PATH (not met while walking); a binary file named
	// so is searched, as grep does, where one met while walking is skipped.
	explicit bool
}

// walkRoot queues the files under root: the file itself, or the files of the tree
// under a directory in name order, skipping what .gitignore, --exclude and .git
// rules leave out.
func (r *grepRun) walkRoot(ctx context.Context, root string, jobs, order chan<- *grepJob) {
	emitErr := func(msg string) {
		j := &grepJob{msg: msg, done: make(chan struct{})}
		close(j.done)
		r.mu.Lock()
		r.errs++
		r.mu.Unlock()
		order <- j
	}
	vp, err := vfs.ParseGuest(root)
	if err != nil {
		emitErr(show(root) + ": " + show(errMessage(err)))
		return
	}
	st, err := r.s.Root.Stat(ctx, root)
	if err != nil {
		if vfs.CodeOf(err) == vfs.CodePermission {
			r.deny(vp.String(), err)
			return
		}
		emitErr(show(root) + ": " + show(errMessage(err)))
		return
	}
	// The printed prefix: the argument as written, without a trailing slash.
	prefix := strings.TrimSuffix(root, "/")
	if root == "/" {
		prefix = ""
	} else if prefix == "" {
		prefix = root
	}
	if !st.IsDir() {
		if !st.Mode().IsRegular() {
			emitErr(show(root) + ": not a regular file")
			return
		}
		if !r.fileWanted(path.Base(vp.String())) {
			return
		}
		r.queue(vp.String(), root, true, jobs, order)
		return
	}
	var ign []gitignore.Pattern
	if !r.o.noIgnore {
		ign = r.parentIgnores(ctx, vp)
	}
	r.listSem = make(chan struct{}, 8)
	r.walkDir(ctx, vp.String(), prefix, ign, nil, jobs, order, emitErr)
}

func (r *grepRun) queue(p, display string, explicit bool, jobs, order chan<- *grepJob) {
	if r.seen[p] {
		return // an overlapping PATH: each file is searched once
	}
	r.seen[p] = true
	j := &grepJob{path: p, display: show(display), explicit: explicit, done: make(chan struct{})}
	order <- j
	jobs <- j
}

// walkDir walks directory p (a cleaned namespace path) printed as prefix.
func (r *grepRun) walkDir(ctx context.Context, p, prefix string, ign []gitignore.Pattern, l *listing, jobs, order chan<- *grepJob, emitErr func(string)) {
	if ctx.Err() != nil {
		return
	}
	var entries []fs.DirEntry
	var err error
	if l != nil {
		<-l.done
		entries, err = l.entries, l.err
	} else {
		entries, err = r.s.Root.ReadDir(ctx, p)
	}
	if err != nil {
		if vfs.CodeOf(err) == vfs.CodePermission {
			r.deny(p, err)
			return
		}
		emitErr(show(prefixJoin(prefix, "")) + ": " + show(errMessage(err)))
		return
	}
	comps := splitPath(p)
	if !r.o.noIgnore {
		for _, e := range entries {
			if e.Name() == ".gitignore" && e.Type().IsRegular() {
				ign = append(ign[:len(ign):len(ign)], r.readIgnore(ctx, path.Join(p, ".gitignore"), comps)...)
				break
			}
		}
	}
	var matcher gitignore.Matcher
	if len(ign) > 0 {
		matcher = gitignore.NewMatcher(ign)
	}
	// Keep what is searched, and start listing its directories ahead of the
	// walk (at most cap(r.listSem) at once): the walk then rarely waits.
	kept := entries[:0:0]
	lists := map[string]*listing{}
	for _, e := range entries {
		name := e.Name()
		isDir := e.IsDir()
		if name == ".git" && !r.o.dotGit {
			continue
		}
		if matcher != nil && matcher.Match(append(comps[:len(comps):len(comps)], name), isDir) {
			continue
		}
		if isDir && matchAny(r.o.excludeDirs, name) {
			continue
		}
		kept = append(kept, e)
		if isDir {
			lists[name] = r.prefetch(ctx, path.Join(p, name))
		}
	}
	for _, e := range kept {
		name := e.Name()
		full := name
		if p != "." {
			full = p + "/" + name
		}
		isDir := e.IsDir()
		display := prefixJoin(prefix, name)
		switch t := e.Type(); {
		case isDir:
			r.walkDir(ctx, full, display, ign, lists[name], jobs, order, emitErr)
		case t.IsRegular():
			if r.fileWanted(name) {
				r.queue(full, display, false, jobs, order)
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// listing is a directory listed ahead of the walk.
type listing struct {
	done    chan struct{}
	entries []fs.DirEntry
	err     error
}

// prefetch starts listing directory p when a listing slot is free; it returns
// nil otherwise (the walk then lists p itself when it gets there).
func (r *grepRun) prefetch(ctx context.Context, p string) *listing {
	select {
	case r.listSem <- struct{}{}:
	default:
		return nil
	}
	l := &listing{done: make(chan struct{})}
	go func() {
		defer func() { <-r.listSem }()
		l.entries, l.err = r.s.Root.ReadDir(ctx, p)
		close(l.done)
	}()
	return l
}

func prefixJoin(prefix, name string) string {
	switch {
	case prefix == "":
		return name
	case name == "":
		return prefix
	case strings.HasSuffix(prefix, "/"):
		return prefix + name
	}
	return prefix + "/" + name
}

func splitPath(p string) []string {
	if p == "." || p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := doublestar.Match(g, name); ok {
			return true
		}
	}
	return false
}

// fileWanted applies --include and --exclude to a file's base name.
func (r *grepRun) fileWanted(name string) bool {
	if len(r.o.includes) > 0 && !matchAny(r.o.includes, name) {
		return false
	}
	return !matchAny(r.o.excludes, name)
}

// parentIgnores reads the .gitignore files of the directories from vp's mount
// root down to vp's parent (vp's own is read by the walk).
func (r *grepRun) parentIgnores(ctx context.Context, vp vfs.Path) []gitignore.Pattern {
	m, _, ok := r.s.mountAt(vp)
	if !ok {
		return nil
	}
	var out []gitignore.Pattern
	comps := splitPath(vp.String())
	for i := len(splitPath(m.Path.String())); i < len(comps); i++ {
		d := strings.Join(comps[:i], "/")
		if d == "" {
			d = "."
		}
		out = append(out, r.readIgnore(ctx, path.Join(d, ".gitignore"), comps[:i])...)
	}
	return out
}

// readIgnore parses the .gitignore file p whose directory has components domain.
func (r *grepRun) readIgnore(ctx context.Context, p string, domain []string) []gitignore.Pattern {
	data, err := r.s.Root.ReadFile(ctx, p)
	if err != nil {
		return nil
	}
	var out []gitignore.Pattern
	dom := append([]string(nil), domain...)
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSuffix(l, "\r")
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		out = append(out, gitignore.ParsePattern(l, dom))
	}
	return out
}

func (r *grepRun) deny(p string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.denied = append(r.denied, p)
	var ve *vfs.Error
	if errors.As(err, &ve) {
		// "the path matches a protected secret pattern (**/.env)": keep "secret **/.env".
		msg := messageOf(ve)
		if i := strings.LastIndex(msg, " ("); i >= 0 && strings.HasSuffix(msg, ")") && strings.Contains(msg, "secret") {
			msg = "secret " + msg[i+2:len(msg)-1]
		}
		r.why[msg] = true
	}
}

// summarize writes, once, what was not searched and how to search it.
func (r *grepRun) summarize(w io.Writer) {
	if r.o.noMessages {
		return
	}
	list := func(ps []string) string {
		sort.Strings(ps)
		shown := make([]string, 0, 3)
		for i, p := range ps {
			if i == 3 {
				break
			}
			shown = append(shown, showPath(p))
		}
		s := strings.Join(shown, ", ")
		if len(ps) > 3 {
			s += fmt.Sprintf(" and %d more", len(ps)-3)
		}
		return s
	}
	if n := len(r.denied); n > 0 {
		why := make([]string, 0, len(r.why))
		for k := range r.why {
			why = append(why, k)
		}
		sort.Strings(why)
		fmt.Fprintf(w, "capfs: grep: %d %s not searched, refused by the policy (%s): %s; pass --allow-secret GLOB to search one, or --allow-test-fixtures for test data directories\n",
			n, plural(n, "path", "paths"), show(strings.Join(why, ", ")), list(r.denied))
	}
	if n := len(r.tooLarge); n > 0 {
		fmt.Fprintf(w, "capfs: grep: %d %s larger than --max-filesize %s not searched: %s; raise it with --max-filesize SIZE (or none)\n",
			n, plural(n, "file", "files"), formatQuota(r.max), list(r.tooLarge))
	}
}

// searchFile reads and searches one file, filling j; buf is reused between files.
func (r *grepRun) searchFile(ctx context.Context, j *grepJob, buf []byte) []byte {
	if ctx.Err() != nil {
		return buf
	}
	fail := func(err error) {
		if vfs.CodeOf(err) == vfs.CodePermission {
			r.deny(j.path, err)
			return
		}
		r.mu.Lock()
		r.errs++
		r.mu.Unlock()
		j.msg = j.display + ": " + show(errMessage(err))
	}
	h, err := r.s.Root.Open(ctx, j.path, os.O_RDONLY, 0)
	if err != nil {
		fail(err)
		return buf
	}
	defer h.Close()
	st, err := h.Stat()
	if err != nil {
		fail(err)
		return buf
	}
	size := st.Size()
	if r.max >= 0 && size > r.max {
		r.mu.Lock()
		r.tooLarge = append(r.tooLarge, j.path)
		r.mu.Unlock()
		return buf
	}
	// The file is searched as it was at the Stat: its first size bytes, read
	// without the extra read that would report EOF. A file that reports no size
	// (size 0: empty, or generated on reading) is read to EOF.
	want := max(int(size), 4096)
	if cap(buf) < want {
		buf = make([]byte, want)
	}
	buf = buf[:cap(buf)]
	n := 0
	for size == 0 || int64(n) < size {
		k, err := h.Read(buf[n:])
		n += k
		if err == io.EOF {
			break
		}
		if err != nil {
			fail(err)
			return buf
		}
		if n == len(buf) {
			if r.max >= 0 && int64(n) > r.max {
				r.mu.Lock()
				r.tooLarge = append(r.tooLarge, j.path)
				r.mu.Unlock()
				return buf
			}
			buf = append(buf, 0)[:n] // grow
			buf = buf[:cap(buf)]
		}
	}
	data := buf[:n]
	if !r.o.text && bytes.IndexByte(data, 0) >= 0 {
		if !j.explicit {
			return buf // binary, met while walking: skipped, as rg does
		}
		o := r.o
		if o.count || o.filesWith || o.filesWithout || o.quiet {
			r.searchData(j, data)
			return buf
		}
		// As grep: one line saying so instead of the matching lines.
		if _, _, ok := r.m.next(data, 0); ok {
			j.matched = true
			j.out.WriteString("capfs: grep: " + j.display + ": binary file matches (-a searches it as text)\n")
		}
		return buf
	}
	r.searchData(j, data)
	return buf
}

// searchData finds the selected lines of data and writes j's output.
func (r *grepRun) searchData(j *grepJob, data []byte) {
	o := r.o
	out := &j.out
	m := r.m
	col := r.col
	nameSep := func(sep byte) {
		if !r.names {
			return
		}
		out.WriteString(col.name(j.display))
		if o.nullSep {
			out.WriteByte(0)
		} else {
			out.WriteString(col.sep(string(sep)))
		}
	}
	// Line bookkeeping: lnum is the number of the line starting at lpos.
	lpos, lnum := 0, 1
	lineNo := func(at int) int {
		lnum += bytes.Count(data[lpos:at], []byte{'\n'})
		lpos = at
		return lnum
	}
	printed := -1 // end (exclusive, past the newline) of the last line printed
	anyPrinted := false
	writeLine := func(ls, le int, sep byte, selected bool) {
		nameSep(sep)
		if o.lineNumber {
			out.WriteString(col.num(strconv.Itoa(lineNo(ls))))
			out.WriteString(col.sep(string(sep)))
		}
		line := data[ls:le]
		if selected && !o.invert && col.on {
			last := 0
			for _, mm := range m.matches(line) {
				out.Write(line[last:mm[0]])
				out.WriteString(col.match(string(line[mm[0]:mm[1]])))
				last = mm[1]
			}
			out.Write(line[last:])
		} else {
			out.Write(line)
		}
		out.WriteByte('\n')
		printed = min(le+1, len(data)+1)
		anyPrinted = true
	}
	// afterCtx prints up to r.ctxA lines after the last printed one, stopping
	// before limit.
	afterLeft := 0
	afterCtx := func(limit int) {
		for afterLeft > 0 && printed >= 0 && printed < limit && printed < len(data) {
			le := lineEnd(data, printed)
			writeLine(printed, le, '-', false)
			afterLeft--
		}
	}
	count := 0
	for pos := 0; pos < len(data); {
		ls, le, ok := m.next(data, pos)
		if !ok {
			break
		}
		count++
		j.matched = true
		if o.quiet || o.filesWith || o.filesWithout {
			break
		}
		switch {
		case o.count:
		case o.only:
			if !o.invert {
				for _, mm := range m.matches(data[ls:le]) {
					nameSep(':')
					if o.lineNumber {
						out.WriteString(col.num(strconv.Itoa(lineNo(ls))))
						out.WriteString(col.sep(":"))
					}
					out.WriteString(col.match(string(data[ls+mm[0] : ls+mm[1]])))
					out.WriteByte('\n')
				}
			}
		default:
			afterCtx(ls)
			// Leading context: up to ctxB lines before ls, after what was printed.
			start := ls
			for k := 0; k < r.ctxB && start > 0; k++ {
				prev := bytes.LastIndexByte(data[:start-1], '\n') + 1
				if prev < printed {
					break
				}
				start = prev
			}
			if r.ctxOn && anyPrinted && start > printed {
				out.WriteString(col.sep("--"))
				out.WriteByte('\n')
			}
			for start < ls {
				e := lineEnd(data, start)
				writeLine(start, e, '-', false)
				start = e + 1
			}
			writeLine(ls, le, ':', true)
			afterLeft = r.ctxA
		}
		pos = le + 1
		if o.maxCount > 0 && count >= o.maxCount {
			break
		}
	}
	afterCtx(len(data) + 1)
	switch {
	case o.quiet:
	case o.filesWith:
		if j.matched {
			r.writeName(out, j.display)
		}
	case o.filesWithout:
		if !j.matched {
			r.writeName(out, j.display)
		}
	case o.count:
		nameSep(':')
		out.WriteString(strconv.Itoa(count))
		out.WriteByte('\n')
	}
}

func (r *grepRun) writeName(out *bytes.Buffer, name string) {
	out.WriteString(r.col.name(name))
	if r.o.nullSep {
		out.WriteByte(0)
	} else {
		out.WriteByte('\n')
	}
}

// errMessage is an error's message and code without the operation (the path is
// printed by the caller): "no such file or directory (not_found)".
func errMessage(err error) string {
	var ve *vfs.Error
	if errors.As(err, &ve) {
		return messageOf(ve) + " (" + string(ve.Code) + ")"
	}
	return err.Error()
}
