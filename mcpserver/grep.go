package mcpserver

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/internal/search"
)

type grepIn struct {
	Pattern         string   `json:"pattern" jsonschema:"a regular expression (Go RE2 syntax) searched for in every line"`
	Path            string   `json:"path,omitempty" jsonschema:"the file or directory to search (default the root)"`
	Glob            string   `json:"glob,omitempty" jsonschema:"only search files matching this glob, e.g. *.go or src/**/*.ts (a pattern without / matches the file name)"`
	OutputMode      string   `json:"output_mode,omitempty" jsonschema:"content (matching lines), files_with_matches (default) or count"`
	I               bool     `json:"-i,omitempty" jsonschema:"case-insensitive search"`
	CaseInsensitive bool     `json:"case_insensitive,omitempty" jsonschema:"case-insensitive search (same as -i)"`
	N               *bool    `json:"-n,omitempty" jsonschema:"show line numbers in content mode (default true)"`
	After           int      `json:"-A,omitempty" jsonschema:"lines of context after each match (content mode)"`
	Before          int      `json:"-B,omitempty" jsonschema:"lines of context before each match (content mode)"`
	Context         int      `json:"-C,omitempty" jsonschema:"lines of context before and after each match (content mode)"`
	ContextLines    int      `json:"context,omitempty" jsonschema:"same as -C"`
	HeadLimit       int      `json:"head_limit,omitempty" jsonschema:"the most matching lines (content), files or counts to return (default 250); the search stops there"`
	Exclude         []string `json:"exclude,omitempty" jsonschema:"glob patterns of files and directories not to search, e.g. vendor or **/*_test.go"`
	NoIgnore        bool     `json:"no_ignore,omitempty" jsonschema:"also search .git directories and files .gitignore excludes (skipped by default, as rg does)"`
}

// maxContext bounds the context lines grep shows around a match.
const maxContext = 100

// grepOut is grep's structured result.
type grepOut struct {
	Mode      string     `json:"mode" jsonschema:"files_with_matches, content or count"`
	Files     []grepFile `json:"files" jsonschema:"the files with matches, in path order"`
	Truncated bool       `json:"truncated,omitempty" jsonschema:"head_limit was reached: there may be more"`
	Searched  int        `json:"searched" jsonschema:"files searched"`
	Binary    int        `json:"binary,omitempty" jsonschema:"binary files not searched"`
	Denied    int        `json:"denied,omitempty" jsonschema:"files the policy refused (counted, not named)"`
	Skipped   []grepSkip `json:"skipped,omitempty" jsonschema:"other files not searched (too large, unreadable), with the reason"`
	// Unaddressable names the host entries no path can name, with the reason:
	// never searched, never dropped silently.
	Unaddressable []string `json:"unaddressable,omitempty" jsonschema:"entries no path can name (not searched), with the reason"`
}

type grepFile struct {
	Path  string     `json:"path"`
	Count int        `json:"count,omitempty" jsonschema:"matching lines (count and content modes)"`
	Lines []grepLine `json:"lines,omitempty" jsonschema:"content mode: matching lines and context lines"`
}

type grepLine struct {
	Line    int    `json:"line"`
	Text    string `json:"text"`
	Context bool   `json:"context,omitempty" jsonschema:"a context line, not a match"`
}

type grepSkip struct {
	Path   string `json:"path"`
	Reason string `json:"reason" jsonschema:"too_large or unreadable"`
	Size   int64  `json:"size,omitempty"`
}

// maxSkipsShown bounds the skipped files grep names in its text.
const maxSkipsShown = 20

func (s *server) grep(ctx context.Context, in grepIn) (grepOut, string, error) {
	mode := in.OutputMode
	if mode == "" {
		mode = "files_with_matches"
	}
	out := grepOut{Mode: mode, Files: []grepFile{}}
	opts, err := s.grepOptions(in, mode)
	if err != nil {
		return out, "", err
	}
	root := in.Path
	if root == "" {
		root = "."
	}
	// One audit event for the files and directories the search read (when the
	// host's sink is wrapped by audit.Batching); refusals stay one event each.
	batch := &audit.Batch{Op: "grep", Path: root}
	defer batch.Flush(ctx)
	var unaddressable searchSkips
	pr := &grepPrinter{out: &out, opts: &opts, numbers: in.N == nil || *in.N, width: s.opts.LineWidth}
	sum, err := search.Search(unaddressable.context(audit.WithBatch(ctx, batch)), s.root, root, opts, pr.file)
	if err != nil {
		return out, "", err
	}
	b := &pr.b
	out.Truncated, out.Searched, out.Binary = sum.Truncated, sum.Searched, sum.Binary
	counts := map[search.SkipReason]int{}
	var named []search.Skip // files refused by the policy are counted, not named
	for _, sk := range sum.Skipped {
		counts[sk.Reason]++
		if sk.Reason != search.SkipDenied {
			named = append(named, sk)
			out.Skipped = append(out.Skipped, grepSkip{Path: sk.Path, Reason: string(sk.Reason), Size: sk.Size})
		}
	}
	out.Denied = counts[search.SkipDenied]
	out.Unaddressable = unaddressable.names()
	if len(out.Files) == 0 {
		b.WriteString("(no matches)\n")
	}
	if sum.Truncated {
		fmt.Fprintf(b, "(results cut at head_limit=%d: raise head_limit or narrow pattern, path or glob)\n", opts.Limit)
	}
	writeGrepSkips(b, &sum, counts, named)
	b.WriteString(unaddressable.text())
	return out, b.String(), nil
}

// grepModes maps grep's output_mode to the search's mode.
var grepModes = map[string]search.Mode{
	"files_with_matches": search.FilesWithMatches,
	"content":            search.Content,
	"count":              search.Count,
}

// grepOptions checks grep's arguments and turns them into the search's
// options, for output mode mode.
func (s *server) grepOptions(in grepIn, mode string) (search.Options, error) {
	opts := search.Options{Pattern: in.Pattern, IgnoreCase: in.I || in.CaseInsensitive, MaxFileSize: s.opts.MaxGrepFileBytes}
	m, ok := grepModes[mode]
	if !ok {
		return opts, argErrorf("argument \"output_mode\" must be content, files_with_matches or count, got %q", mode)
	}
	opts.Mode = m
	if in.Pattern == "" {
		return opts, argErrorf("argument \"pattern\" is empty")
	}
	if _, err := regexp.Compile(in.Pattern); err != nil {
		return opts, argErrorf("argument \"pattern\" is not a valid regular expression (Go RE2 syntax): %v", err)
	}
	if in.Glob != "" {
		if !doublestar.ValidatePattern(in.Glob) {
			return opts, argErrorf("argument \"glob\": malformed glob %q", in.Glob)
		}
		opts.Include = []string{in.Glob}
	}
	for _, x := range in.Exclude {
		if !doublestar.ValidatePattern(x) {
			return opts, argErrorf("argument \"exclude\": malformed glob %q", x)
		}
	}
	opts.Exclude = in.Exclude
	opts.NoIgnore = in.NoIgnore
	opts.IgnoreAbove = "." // a search below the root honours the .gitignore files above it
	before, after, err := grepContext(in)
	if err != nil {
		return opts, err
	}
	if in.HeadLimit < 0 {
		return opts, argErrorf("argument \"head_limit\" must not be negative, got %d", in.HeadLimit)
	}
	opts.Before, opts.After = min(before, maxContext), min(after, maxContext)
	opts.Limit = s.headLimit(in.HeadLimit)
	return opts, nil
}

// grepContext is the context lines asked for before and after each match:
// -B and -A, each raised to -C or context.
func grepContext(in grepIn) (before, after int, err error) {
	before, after = in.Before, in.After
	if c := max(in.Context, in.ContextLines); c > 0 {
		before, after = max(before, c), max(after, c)
	}
	if before < 0 || after < 0 || in.Context < 0 || in.ContextLines < 0 {
		return 0, 0, argErrorf("context lines (-A, -B, -C, context) must not be negative")
	}
	return before, after, nil
}

// grepPrinter collects each file the search reports into out and its text
// into b, as rg prints it.
type grepPrinter struct {
	b       strings.Builder
	out     *grepOut
	opts    *search.Options
	numbers bool // line numbers in content mode
	width   int  // longest line shown
}

// file records one file with matches.
func (pr *grepPrinter) file(f *search.File) error {
	gf := grepFile{Path: f.Path}
	p := esc(f.Path)
	switch pr.opts.Mode {
	case search.FilesWithMatches:
		pr.b.WriteString(p)
		pr.b.WriteByte('\n')
	case search.Count:
		gf.Count = f.Count
		fmt.Fprintf(&pr.b, "%s:%d\n", p, f.Count)
	case search.Content:
		gf.Count = f.Count
		gf.Lines = pr.content(p, f)
	}
	pr.out.Files = append(pr.out.Files, gf)
	return nil
}

// content writes a file's matching and context lines (p is its escaped
// path), groups apart marked "--" when context is shown, and returns them.
func (pr *grepPrinter) content(p string, f *search.File) []grepLine {
	ctxShown := pr.opts.Before > 0 || pr.opts.After > 0
	if ctxShown && len(pr.out.Files) > 0 {
		pr.b.WriteString("--\n")
	}
	var lines []grepLine
	for i, l := range f.Lines {
		if i > 0 && l.Num != f.Lines[i-1].Num+1 && ctxShown {
			pr.b.WriteString("--\n")
		}
		lines = append(lines, pr.line(p, l))
	}
	return lines
}

// line writes one line as path:num:text (a match) or path-num-text
// (context), cut at the line width, and returns it.
func (pr *grepPrinter) line(p string, l search.Line) grepLine {
	text, cut := l.Text, 0
	if len(text) > pr.width {
		cut = len(text) - pr.width
		text = trimRune(text[:pr.width], &cut)
	}
	sep := "-"
	if l.Match {
		sep = ":"
	}
	b := &pr.b
	b.WriteString(p)
	if pr.numbers {
		b.WriteString(sep)
		b.WriteString(strconv.Itoa(l.Num))
	}
	b.WriteString(sep)
	b.Write(text)
	if cut > 0 {
		fmt.Fprintf(b, " …[line cut: %d more bytes]", cut)
	}
	b.WriteByte('\n')
	return grepLine{Line: l.Num, Text: strings.ToValidUTF8(string(text), "\uFFFD"), Context: !l.Match}
}

// writeGrepSkips writes how many files the search skipped and why, and
// names the first maxSkipsShown of those not refused by the policy.
func writeGrepSkips(b *strings.Builder, sum *search.Summary, counts map[search.SkipReason]int, named []search.Skip) {
	skipped := sum.Binary + len(sum.Skipped)
	if skipped == 0 {
		return
	}
	fmt.Fprintf(b, "(searched %d files; skipped %d: %d refused by policy, %d binary, %d too large, %d unreadable)\n",
		sum.Searched, skipped, counts[search.SkipDenied], sum.Binary, counts[search.SkipTooLarge], counts[search.SkipUnreadable])
	for i, sk := range named {
		if i == maxSkipsShown {
			fmt.Fprintf(b, "(and %d more skipped)\n", len(named)-i)
			break
		}
		if sk.Reason == search.SkipTooLarge {
			fmt.Fprintf(b, "skipped %s: too large (%d bytes)\n", esc(sk.Path), sk.Size)
		} else {
			fmt.Fprintf(b, "skipped %s: %s\n", esc(sk.Path), sk.Reason)
		}
	}
}
