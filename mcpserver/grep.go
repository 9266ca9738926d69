package mcpserver

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/capfs/capfs/vfs"
)

type grepIn struct {
	Pattern         string `json:"pattern" jsonschema:"a regular expression (Go RE2 syntax) searched for in every line"`
	Path            string `json:"path,omitempty" jsonschema:"the file or directory to search (default the root)"`
	Glob            string `json:"glob,omitempty" jsonschema:"only search files matching this glob, e.g. *.go or src/**/*.ts (a pattern without / matches the file name)"`
	OutputMode      string `json:"output_mode,omitempty" jsonschema:"content (matching lines), files_with_matches (default) or count"`
	I               bool   `json:"-i,omitempty" jsonschema:"case-insensitive search"`
	CaseInsensitive bool   `json:"case_insensitive,omitempty" jsonschema:"case-insensitive search (same as -i)"`
	N               *bool  `json:"-n,omitempty" jsonschema:"show line numbers in content mode (default true)"`
	After           int    `json:"-A,omitempty" jsonschema:"lines of context after each match (content mode)"`
	Before          int    `json:"-B,omitempty" jsonschema:"lines of context before each match (content mode)"`
	Context         int    `json:"-C,omitempty" jsonschema:"lines of context before and after each match (content mode)"`
	ContextLines    int    `json:"context,omitempty" jsonschema:"same as -C"`
	HeadLimit       int    `json:"head_limit,omitempty" jsonschema:"the most output lines (content), files or counts to return (default 250)"`
}

// maxContext bounds the context lines grep shows around a match.
const maxContext = 100

type grepStats struct {
	files, denied, binary, tooLarge, unreadable int
}

func (s *server) grep(ctx context.Context, in grepIn) (string, error) {
	mode := in.OutputMode
	if mode == "" {
		mode = "files_with_matches"
	}
	if mode != "content" && mode != "files_with_matches" && mode != "count" {
		return "", toolError(vfs.CodeInvalidPath, "grep", in.Path, "output_mode %q: use content, files_with_matches or count", mode)
	}
	if in.Pattern == "" {
		return "", toolError(vfs.CodeInvalidPath, "grep", in.Path, "pattern is empty")
	}
	expr := in.Pattern
	if in.I || in.CaseInsensitive {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return "", toolError(vfs.CodeInvalidPath, "grep", in.Path, "bad regular expression: %v", err)
	}
	// The prefilter runs the expression over the whole file in multi-line mode: a
	// file it rejects has no matching line, so most files are never split into
	// lines. (\A and \z mean line ends per line but text ends here, so such
	// expressions skip the prefilter, as do files with a CR.)
	var pre *regexp.Regexp
	if !strings.Contains(in.Pattern, `\A`) && !strings.Contains(in.Pattern, `\z`) {
		pre, _ = regexp.Compile("(?m)" + expr)
	}
	if in.Glob != "" && !doublestar.ValidatePattern(in.Glob) {
		return "", toolError(vfs.CodeInvalidPath, "grep", in.Path, "malformed glob %q", in.Glob)
	}
	before, after := in.Before, in.After
	if c := max(in.Context, in.ContextLines); c > 0 {
		before, after = max(before, c), max(after, c)
	}
	if before < 0 || after < 0 {
		return "", toolError(vfs.CodeInvalidPath, "grep", in.Path, "context lines must not be negative")
	}
	before, after = min(before, maxContext), min(after, maxContext)
	numbers := in.N == nil || *in.N
	limit := s.headLimit(in.HeadLimit)

	root := in.Path
	if root == "" {
		root = "."
	}
	g := &grepper{s: s, re: re, pre: pre, mode: mode, before: before, after: after, numbers: numbers}
	info, err := s.root.Stat(ctx, root)
	if err != nil {
		return "", err
	}
	var st grepStats
	var files []string
	if !info.IsDir() {
		files = []string{root}
	} else {
		err = s.root.Walk(ctx, root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if vfs.CodeOf(err) == vfs.CodeRevoked || p == cleanGuest(root) {
					return err
				}
				st.unreadable++
				return nil
			}
			if d.Type().IsRegular() && (in.Glob == "" || globMatch(in.Glob, relTo(root, p), p)) {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}

	// Files are searched in parallel, a batch at a time, and reported in walk order.
	var b strings.Builder
	emitted, cutoff := 0, false
	results := make([]grepResult, grepBatch)
	for start := 0; start < len(files) && !cutoff; start += grepBatch {
		batch := files[start:min(len(files), start+grepBatch)]
		g.searchAll(ctx, batch, results[:len(batch)])
		for i := range batch {
			r := &results[i]
			if r.fatal != nil {
				return "", r.fatal
			}
			st.add(r.status)
			switch {
			case len(r.lines) == 0:
			case mode == "content":
				if (before > 0 || after > 0) && emitted > 0 {
					b.WriteString("--\n")
				}
				for _, l := range r.lines {
					if l.sep {
						b.WriteString("--\n")
						continue
					}
					if emitted == limit {
						cutoff = true
						break
					}
					b.WriteString(l.text)
					emitted++
				}
			default:
				if emitted == limit {
					cutoff = true
					break
				}
				b.WriteString(r.lines[0].text)
				emitted++
			}
			if cutoff {
				break
			}
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
	}
	if emitted == 0 {
		b.WriteString("(no matches)\n")
	}
	if cutoff {
		fmt.Fprintf(&b, "(results cut at head_limit=%d: raise head_limit or narrow pattern, path or glob)\n", limit)
	}
	if skipped := st.denied + st.binary + st.tooLarge + st.unreadable; skipped > 0 {
		fmt.Fprintf(&b, "(searched %d files; skipped %d: %d refused by policy, %d binary, %d too large, %d unreadable)\n",
			st.files, skipped, st.denied, st.binary, st.tooLarge, st.unreadable)
	}
	return b.String(), nil
}

// globMatch applies grep's glob filter: a pattern with a "/" matches the path
// from the search root (or from the capability's root); one without matches
// the file name.
func globMatch(pattern, rel, full string) bool {
	if !strings.Contains(pattern, "/") {
		ok, _ := doublestar.Match(pattern, path.Base(full))
		return ok
	}
	if ok, _ := doublestar.Match(pattern, rel); ok {
		return true
	}
	ok, _ := doublestar.Match(strings.TrimPrefix(pattern, "/"), full)
	return ok
}

// forEachLine calls fn with every line of data (1-based numbers, without the
// newline) until fn returns false.
func forEachLine(data []byte, fn func(n int, line []byte) bool) {
	n := 0
	for len(data) > 0 {
		n++
		i := bytes.IndexByte(data, '\n')
		var line []byte
		if i < 0 {
			line, data = data, nil
		} else {
			line, data = data[:i], data[i+1:]
		}
		if !fn(n, bytes.TrimSuffix(line, []byte("\r"))) {
			return
		}
	}
}

// grepBatch is how many files grep searches in parallel before reporting them.
const grepBatch = 64

// grepStatus is how one file's search went.
type grepStatus int

const (
	grepSearched grepStatus = iota
	grepDenied
	grepBinary
	grepTooLarge
	grepUnreadable
)

func (st *grepStats) add(s grepStatus) {
	switch s {
	case grepSearched:
		st.files++
	case grepDenied:
		st.denied++
	case grepBinary:
		st.binary++
	case grepTooLarge:
		st.tooLarge++
	default:
		st.unreadable++
	}
}

// outLine is one line of grep output (with its newline), or a "--" group separator.
type outLine struct {
	text string
	sep  bool
}

// grepResult is the outcome of searching one file.
type grepResult struct {
	status grepStatus
	lines  []outLine // the file's output: one line (files, count modes) or its matches
	fatal  error     // revoked or canceled: the whole call fails
}

// grepper searches files for one grep call; it is safe for concurrent use.
type grepper struct {
	s             *server
	re, pre       *regexp.Regexp
	mode          string
	before, after int
	numbers       bool
}

// searchAll searches files into results (same indexes), with one goroutine per
// processor.
func (g *grepper) searchAll(ctx context.Context, files []string, results []grepResult) {
	workers := min(runtime.GOMAXPROCS(0), len(files))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(files) {
					return
				}
				results[i] = g.search(ctx, files[i])
			}
		}()
	}
	wg.Wait()
}

func (g *grepper) search(ctx context.Context, p string) grepResult {
	data, err := g.s.root.ReadFile(ctx, p)
	if err != nil {
		switch vfs.CodeOf(err) {
		case vfs.CodeRevoked, vfs.CodeCanceled:
			return grepResult{fatal: err}
		case vfs.CodePermission:
			return grepResult{status: grepDenied}
		case vfs.CodeTooLarge:
			return grepResult{status: grepTooLarge}
		}
		if ctx.Err() != nil {
			return grepResult{fatal: ctx.Err()}
		}
		return grepResult{status: grepUnreadable}
	}
	if bytes.IndexByte(data[:min(len(data), sniffLen)], 0) >= 0 {
		return grepResult{status: grepBinary}
	}
	if g.pre != nil && bytes.IndexByte(data, '\r') < 0 && !g.pre.Match(data) {
		return grepResult{}
	}
	switch g.mode {
	case "files_with_matches":
		found := false
		forEachLine(data, func(_ int, line []byte) bool {
			found = g.re.Match(line)
			return !found
		})
		if found {
			return grepResult{lines: []outLine{{text: esc(p) + "\n"}}}
		}
	case "count":
		n := 0
		forEachLine(data, func(_ int, line []byte) bool {
			if g.re.Match(line) {
				n++
			}
			return true
		})
		if n > 0 {
			return grepResult{lines: []outLine{{text: esc(p) + ":" + strconv.Itoa(n) + "\n"}}}
		}
	case "content":
		return grepResult{lines: g.content(p, data)}
	}
	return grepResult{}
}

// content returns the matching lines of one file with their context, in grep's
// format: path:n:line for matches, path-n-line for context, and a separator
// between groups that are not contiguous.
func (g *grepper) content(p string, data []byte) []outLine {
	p = esc(p)
	var lines [][]byte
	forEachLine(data, func(_ int, line []byte) bool {
		lines = append(lines, line)
		return true
	})
	var out []outLine
	var b strings.Builder
	width := g.s.opts.LineWidth
	last := -1 // index of the last line written
	for i := 0; i < len(lines); i++ {
		if !g.re.Match(lines[i]) {
			continue
		}
		from := max(0, i-g.before, last+1)
		if last >= 0 && from > last+1 && (g.before > 0 || g.after > 0) {
			out = append(out, outLine{sep: true})
		}
		to := min(len(lines)-1, i+g.after)
		// Extend the group while more matches fall inside the trailing context.
		for j := from; j <= to; j++ {
			match := j == i || (j > i && g.re.Match(lines[j]))
			if match && j > i {
				to = min(len(lines)-1, j+g.after)
			}
			sep := "-"
			if match {
				sep = ":"
			}
			b.Reset()
			b.WriteString(p)
			if g.numbers {
				b.WriteString(sep)
				b.WriteString(strconv.Itoa(j + 1))
			}
			b.WriteString(sep)
			line, cut := lines[j], 0
			if len(line) > width {
				cut = len(line) - width
				line = trimRune(line[:width], &cut)
			}
			b.Write(line)
			if cut > 0 {
				fmt.Fprintf(&b, " …[line cut: %d more bytes]", cut)
			}
			b.WriteByte('\n')
			out = append(out, outLine{text: b.String()})
			last = j
		}
		i = last
	}
	return out
}
