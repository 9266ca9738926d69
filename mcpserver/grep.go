package mcpserver

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"

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
	var b strings.Builder
	var st grepStats
	emitted, cutoff := 0, false
	search := func(p string) error {
		if in.Glob != "" && !globMatch(in.Glob, relTo(root, p), p) {
			return nil
		}
		data, err := s.root.ReadFile(ctx, p)
		if err != nil {
			switch vfs.CodeOf(err) {
			case vfs.CodeRevoked, vfs.CodeCanceled:
				return err
			case vfs.CodePermission:
				st.denied++
			case vfs.CodeTooLarge:
				st.tooLarge++
			default:
				st.unreadable++
			}
			return nil
		}
		if bytes.IndexByte(data[:min(len(data), sniffLen)], 0) >= 0 {
			st.binary++
			return nil
		}
		st.files++
		if pre != nil && bytes.IndexByte(data, '\r') < 0 && !pre.Match(data) {
			return nil
		}
		switch mode {
		case "files_with_matches":
			found := false
			forEachLine(data, func(_ int, line []byte) bool {
				found = re.Match(line)
				return !found
			})
			if !found {
				return nil
			}
			if emitted == limit {
				cutoff = true
				return fs.SkipAll
			}
			b.WriteString(p)
			b.WriteByte('\n')
			emitted++
		case "count":
			n := 0
			forEachLine(data, func(_ int, line []byte) bool {
				if re.Match(line) {
					n++
				}
				return true
			})
			if n == 0 {
				return nil
			}
			if emitted == limit {
				cutoff = true
				return fs.SkipAll
			}
			fmt.Fprintf(&b, "%s:%d\n", p, n)
			emitted++
		case "content":
			if !s.grepContent(&b, p, data, re, before, after, numbers, limit, &emitted) {
				cutoff = true
				return fs.SkipAll
			}
		}
		return ctx.Err()
	}

	info, err := s.root.Stat(ctx, root)
	if err != nil {
		return "", err
	}
	if !info.IsDir() {
		err = search(root)
	} else {
		err = s.root.Walk(ctx, root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if vfs.CodeOf(err) == vfs.CodeRevoked || p == cleanGuest(root) {
					return err
				}
				st.unreadable++
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			return search(p)
		})
	}
	if err != nil && err != fs.SkipAll {
		return "", err
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

// grepContent writes the matching lines of one file with their context, in grep's
// format (path:n:line for matches, path-n-line for context, "--" between groups).
// It returns false when the head limit cut the output.
func (s *server) grepContent(b *strings.Builder, p string, data []byte, re *regexp.Regexp,
	before, after int, numbers bool, limit int, emitted *int) bool {
	var lines [][]byte
	forEachLine(data, func(_ int, line []byte) bool {
		lines = append(lines, line)
		return true
	})
	last := -1 // index of the last line written
	for i := 0; i < len(lines); i++ {
		if !re.Match(lines[i]) {
			continue
		}
		from := max(0, i-before, last+1)
		if last >= 0 && from > last+1 {
			b.WriteString("--\n")
		}
		to := min(len(lines)-1, i+after)
		// Extend the group while more matches fall inside the trailing context.
		for j := from; j <= to; j++ {
			if *emitted == limit {
				return false
			}
			match := j == i || (j > i && re.Match(lines[j]))
			if match && j > i {
				to = min(len(lines)-1, j+after)
			}
			sep := "-"
			if match || j == i {
				sep = ":"
			}
			b.WriteString(p)
			if numbers {
				b.WriteString(sep)
				b.WriteString(strconv.Itoa(j + 1))
			}
			b.WriteString(sep)
			line, cut := lines[j], 0
			if len(line) > s.opts.LineWidth {
				cut = len(line) - s.opts.LineWidth
				line = line[:s.opts.LineWidth]
				line = trimRune(line, &cut)
			}
			b.Write(line)
			if cut > 0 {
				fmt.Fprintf(b, " …[line cut: %d more bytes]", cut)
			}
			b.WriteByte('\n')
			*emitted++
			last = j
		}
		i = last
	}
	return true
}
