package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/spf13/cobra"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/internal/search"
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
how to include them. The audit log gets one event per PATH for the files and
directories read (op "grep", with their count) and one per refusal.

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
	// results
	mu       sync.Mutex
	denied   []string // paths the policy refused
	why      map[string]bool
	tooLarge []string
	errs     int
}

func runGrep(ctx context.Context, cmd *cobra.Command, s *session, g *grepOptions, args []string) error {
	// A search allocates per file opened and keeps little: collect as the
	// server does (GOGC 400 unless the environment says otherwise).
	tuneServerGC()
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
	r := &grepRun{s: s, o: g, m: m, max: defaultMaxFilesize, why: map[string]bool{}}
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
	// Names no capfs path can hold are named once, not skipped silently (the
	// walk is parallel: they are reported without their directory).
	var skipped unaddressable
	defer skipped.report(stderr, "grep")
	ctx, cancel := context.WithCancel(skipped.context(ctx, ""))
	defer cancel()

	if g.maxCount == 0 {
		return exitStatus(exitFailed) // grep -m 0 reads nothing
	}

	matched := false
	var writeErr error
	seen := map[string]bool{} // overlapping PATHs: each file is printed once
	for _, root := range roots {
		if ctx.Err() != nil || (g.quiet && matched) {
			break
		}
		res := r.searchRoot(ctx, root, seen, func(j *grepJob) error {
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
					return errGrepStop
				}
			}
			if g.quiet && matched {
				return errGrepStop
			}
			return nil
		})
		if res != nil {
			break
		}
	}
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

// grepJob is one file searched: its output, in the order of the walk.
type grepJob struct {
	path    string // namespace path, cleaned
	display string // the path as printed (escaped)
	out     bytes.Buffer
	msg     string // an error for standard error (escaped)
	matched bool
	// explicit: named as a PATH (not met while walking); a binary file named
	// so is searched, as grep does, where one met while walking is skipped.
	explicit bool
}

// errGrepStop ends a search early (-q satisfied, output closed).
var errGrepStop = errors.New("grep: stop")

// searchRoot searches one PATH with the engine the MCP grep uses
// (internal/search: a parallel walk in name order honouring .gitignore files,
// from the PATH's mount root down, and skipping .git), calling emit with each
// file that printed something or matched, in walk order, and with each error
// met. It returns errGrepStop when emit asked to stop, or the context's error.
func (r *grepRun) searchRoot(ctx context.Context, root string, seen map[string]bool, emit func(*grepJob) error) error {
	emitErr := func(msg string) error {
		r.mu.Lock()
		r.errs++
		r.mu.Unlock()
		return emit(&grepJob{msg: msg})
	}
	vp, err := vfs.ParseGuest(root)
	if err != nil {
		return emitErr(show(root) + ": " + show(errMessage(err)))
	}
	st, err := r.s.Root.Stat(ctx, root)
	if err != nil {
		if vfs.CodeOf(err) == vfs.CodePermission {
			r.deny(vp.String(), err)
			return nil
		}
		return emitErr(show(root) + ": " + show(errMessage(err)))
	}
	// The printed prefix: the argument as written, without a trailing slash.
	prefix := strings.TrimSuffix(root, "/")
	if root == "/" {
		prefix = ""
	} else if prefix == "" {
		prefix = root
	}
	clean := vp.String()
	if !st.IsDir() {
		if !st.Mode().IsRegular() {
			return emitErr(show(root) + ": not a regular file")
		}
		if !r.fileWanted(path.Base(clean)) {
			return nil
		}
	}
	display := func(p string) string {
		if !st.IsDir() {
			return root
		}
		rel := p
		if clean != "." {
			rel = strings.TrimPrefix(strings.TrimPrefix(p, clean), "/")
		}
		return prefixJoin(prefix, rel)
	}
	opts := search.Options{
		NoGitignore:  r.o.noIgnore,
		DotGit:       r.o.dotGit,
		Include:      r.o.includes,
		ExcludeFiles: r.o.excludes,
		ExcludeDirs:  r.o.excludeDirs,
		MaxFileSize:  r.max,
		// A binary file met by the walk is skipped (as rg does): the engine
		// tells it from its first bytes without reading the rest. One named
		// on the command line is searched (it may say "binary file matches").
		SkipBinary: st.IsDir() && !r.o.text,
		Custom: func(p string, data []byte) (any, bool) {
			j := &grepJob{path: p, display: show(display(p)), explicit: !st.IsDir()}
			if r.max == 0 && len(data) > 0 {
				r.mu.Lock()
				r.tooLarge = append(r.tooLarge, p)
				r.mu.Unlock()
				return nil, false
			}
			r.searchFile(j, data)
			return j, j.matched || j.out.Len() > 0
		},
	}
	if r.max <= 0 {
		opts.MaxFileSize = -1 // none (0: every non-empty file is too large, above)
	}
	if m, _, ok := r.s.mountAt(vp); ok {
		opts.IgnoreAbove = m.Path.String() // the .gitignore files from the mount's root down
	}
	// The files and directories read are logged as one audit event (the
	// session's sink batches them); refusals stay one event each.
	batch := &audit.Batch{Op: "grep", Path: clean}
	defer batch.Flush(ctx)
	sum, err := search.Search(audit.WithBatch(ctx, batch), r.s.Root, clean, opts, func(f *search.File) error {
		if seen[f.Path] {
			return nil
		}
		seen[f.Path] = true
		return emit(f.Value.(*grepJob))
	})
	if err != nil {
		if errors.Is(err, errGrepStop) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return emitErr(show(root) + ": " + show(errMessage(err)))
	}
	for _, sk := range sum.Skipped {
		switch sk.Reason {
		case search.SkipDenied:
			r.deny(sk.Path, sk.Err)
		case search.SkipTooLarge:
			r.mu.Lock()
			r.tooLarge = append(r.tooLarge, sk.Path)
			r.mu.Unlock()
		default:
			if err := emitErr(show(display(sk.Path)) + ": " + show(errMessage(sk.Err))); err != nil {
				return err
			}
		}
	}
	return nil
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

// searchFile searches one file's contents, filling j. It runs on the
// engine's workers, several at once.
func (r *grepRun) searchFile(j *grepJob, data []byte) {
	if !r.o.text && bytes.IndexByte(data, 0) >= 0 {
		if !j.explicit {
			return // binary, met while walking: skipped, as rg does
		}
		o := r.o
		if o.count || o.filesWith || o.filesWithout || o.quiet {
			r.searchData(j, data)
			return
		}
		// As grep: one line saying so instead of the matching lines.
		if _, _, ok := r.m.next(data, 0); ok {
			j.matched = true
			j.out.WriteString("capfs: grep: " + j.display + ": binary file matches (-a searches it as text)\n")
		}
		return
	}
	r.searchData(j, data)
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
