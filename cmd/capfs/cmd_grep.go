package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/bmatcuk/doublestar/v4"
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

func runGrep(ctx context.Context, cmd *cobra.Command, s *session, g *grepOptions, args []string) error {
	// A search allocates per file opened and keeps little: collect as the
	// server does (GOGC 400 unless the environment says otherwise).
	tuneServerGC(s.env)
	patterns := g.patterns
	if len(patterns) == 0 {
		patterns, args = []string{args[0]}, args[1:]
	}
	if err := g.check(); err != nil {
		return err
	}
	m, err := compileMatcher(patterns, g.fixed, g.ignoreCase && !g.noIgnoreCase, g.word, g.line, g.invert)
	if err != nil {
		return usageErrorf("grep: bad regular expression: %v", err)
	}
	r, err := newGrepRun(s, g, m, cmd.OutOrStdout())
	if err != nil {
		return err
	}
	roots := args
	if len(roots) == 0 {
		roots = []string{r.defaultRoot()}
	}
	r.names = r.showNames(ctx, roots)

	stderr := cmd.ErrOrStderr()
	// Names no capfs path can hold are named once, not skipped silently (the
	// walk is parallel: they are reported without their directory).
	var skipped unaddressable
	defer skipped.report(stderr, "grep")
	ctx, cancel := context.WithCancel(skipped.context(ctx, ""))
	defer cancel()

	if g.maxCount == 0 {
		return exitStatus(exitFailed) // grep -m 0 reads nothing
	}
	matched, writeErr := r.searchAll(ctx, roots, cmd.OutOrStdout(), stderr)
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

// check refuses the options grep cannot take (usage errors) and settles
// the ones that imply others.
func (g *grepOptions) check() error {
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
	return nil
}

// newGrepRun sets up a search with matcher m: the size limit, colours (for
// stdout) and the context lines.
func newGrepRun(s *session, g *grepOptions, m *lineMatcher, stdout io.Writer) (*grepRun, error) {
	r := &grepRun{s: s, o: g, m: m, max: defaultMaxFilesize, why: map[string]bool{}}
	if g.maxFilesize != "" {
		q, err := parseQuota(g.maxFilesize)
		if err != nil {
			return nil, usageErrorf("grep: --max-filesize %s: %v", g.maxFilesize, err)
		}
		r.max = q
	}
	useColor, err := colorWanted(s.env, g.color, stdout)
	if err != nil {
		return nil, usageErrorf("grep: --color %s: %v", g.color, err)
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
	return r, nil
}

// showNames reports whether grep prints file names: when searching a
// directory or more than one file, unless -H or -h says otherwise.
func (r *grepRun) showNames(ctx context.Context, roots []string) bool {
	names := len(roots) > 1
	if !names {
		if st, err := r.s.Root.Stat(ctx, roots[0]); err == nil && st.IsDir() {
			names = true
		}
	}
	if r.o.withName {
		names = true
	}
	if r.o.noName {
		names = false
	}
	return names
}

// searchAll searches each root in turn, printing to stdout (buffered) and
// stderr, each file once; it reports whether anything matched, and the
// first error writing the results.
func (r *grepRun) searchAll(ctx context.Context, roots []string, stdout, stderr io.Writer) (matched bool, writeErr error) {
	g := r.o
	w := bufio.NewWriterSize(stdout, 64<<10)
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
	return matched, writeErr
}

// errGrepStop ends a search early (-q satisfied, output closed).
var errGrepStop = errors.New("grep: stop")
