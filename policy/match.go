package policy

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

// pattern is one compiled path pattern.
type pattern struct {
	src string // as configured (names and reasons show it)
	pat string // normalized (leading "/" removed, case-folded when folding) for doublestar
	// Prefilter: a path the pattern matches ends with suffix and contains lit. Both
	// are "" when the pattern has no usable literal (or uses escapes).
	suffix, lit string
	// literal: pat has no meta characters at all; it matches exactly the path pat.
	literal bool
	// tree: the pattern is "**" or ends in "/**": it covers a directory and
	// everything beneath it, so it also matches the directory itself.
	tree bool
	// root: the pattern matches the tree's root "." (only "." and patterns made of
	// "**" elements do).
	root bool
}

// compilePattern validates and compiles src. fold case-folds it.
func compilePattern(src string, fold bool) (pattern, error) {
	p := strings.TrimPrefix(src, "/")
	switch {
	case p == "":
		return pattern{}, fmt.Errorf("empty pattern")
	case strings.IndexByte(p, 0) >= 0:
		return pattern{}, fmt.Errorf("NUL byte in pattern")
	case strings.HasSuffix(p, "/"):
		return pattern{}, fmt.Errorf("trailing \"/\" in pattern (write \"dir/**\" for a directory and its contents)")
	case !doublestar.ValidatePattern(p):
		return pattern{}, fmt.Errorf("malformed pattern")
	}
	if p != "." {
		for _, el := range strings.Split(p, "/") {
			switch el {
			case "":
				return pattern{}, fmt.Errorf("empty path element in pattern")
			case ".", "..":
				return pattern{}, fmt.Errorf("%q element in pattern (patterns match clean paths)", el)
			}
		}
	}
	if fold {
		p = foldCase(p)
		if !doublestar.ValidatePattern(p) {
			return pattern{}, fmt.Errorf("malformed pattern once case-folded")
		}
	}
	c := pattern{src: src, pat: p}
	c.tree = p == "**" || strings.HasSuffix(p, "/**")
	c.root = p == "."
	if !c.root {
		c.root = true
		for _, el := range strings.Split(p, "/") {
			if el != "**" {
				c.root = false
				break
			}
		}
	}
	c.literal = !strings.ContainsAny(p, `*?[]{}\`)
	c.suffix, c.lit = prefilter(p)
	return c, nil
}

// prefilter returns the literal text every path matching pat must end with, and the
// longest literal text it must contain. Character classes and "{}" groups are not
// literal; a pattern with escapes gets no prefilter. "/" at the edge of a literal
// run is dropped: a "**/" beside it may match nothing, and the "/" with it.
func prefilter(pat string) (suffix, lit string) {
	if strings.IndexByte(pat, '\\') >= 0 {
		return "", ""
	}
	// A character class's contents are not literal; the exact class syntax does not
	// matter here: everything from the first "[" to the last "]" is skipped, which
	// can only drop requirements, never add a wrong one.
	classFrom, classTo := strings.IndexByte(pat, '['), strings.LastIndexByte(pat, ']')
	if classFrom > classTo {
		return "", ""
	}
	var runs []string
	depth, start := 0, 0
	for i := 0; i < len(pat); i++ {
		ch := pat[i]
		if classFrom >= 0 && i == classFrom && classTo > i {
			if depth == 0 && i > start {
				runs = append(runs, pat[start:i])
			}
			i = classTo
			start = i + 1
			continue
		}
		switch ch {
		case '*', '?', '[', ']', '{', '}':
		default:
			continue
		}
		if depth == 0 && i > start {
			runs = append(runs, pat[start:i])
		}
		switch ch {
		case '{':
			depth++
		case '}':
			if depth > 0 {
				depth--
			}
		}
		start = i + 1
	}
	endsLiteral := depth == 0 && start < len(pat)
	if endsLiteral {
		runs = append(runs, pat[start:])
	}
	for _, r := range runs {
		r = strings.Trim(r, "/")
		if len(r) > len(lit) {
			lit = r
		}
	}
	if endsLiteral {
		suffix = strings.TrimLeft(runs[len(runs)-1], "/")
	}
	return suffix, lit
}

// match reports whether the (clean, already folded) path matches.
func (c *pattern) match(path string) bool {
	if path == "." {
		return c.root
	}
	if c.literal {
		return path == c.pat
	}
	if !strings.HasSuffix(path, c.suffix) || !strings.Contains(path, c.lit) {
		return false
	}
	return doublestar.MatchUnvalidated(c.pat, path)
}

// foldCase folds s for case-insensitive matching: lower case after upper case, so
// that letters with several lower forms (the long s, the Kelvin sign) meet their
// ASCII counterparts. An all-lower-case ASCII string is returned as is.
func foldCase(s string) string {
	upper, wide := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			wide = true
			break
		}
		if 'A' <= c && c <= 'Z' {
			upper = true
		}
	}
	switch {
	case wide:
		return strings.ToLower(strings.ToUpper(s))
	case upper:
		return strings.ToLower(s)
	}
	return s
}
