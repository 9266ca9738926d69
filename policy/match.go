package policy

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

// shape is how a pattern is matched: the common shapes by plain string
// comparisons, any other by doublestar after a literal prefilter.
type shape uint8

const (
	shapeGlob   shape = iota // any other pattern: prefilter, then doublestar
	shapeExact               // "k": the path is k
	shapeBase                // "**/k", k one element: the last element is k
	shapeSuffix              // "**/*k": the last element ends with k
	shapePrefix              // "**/k*": the last element begins with k
	shapeTail                // "**/k", k several elements: the path is k or ends with "/k"
	shapeTree                // "**/k/**": k's elements appear in a row in the path
	shapeUnder               // "k/**": the path is k or begins with "k/"
)

// pattern is one compiled path pattern.
type pattern struct {
	src   string // as configured (names and reasons show it)
	pat   string // normalized (leading "/" removed, case-folded when folding) for doublestar
	shape shape
	k     string // the literal the shape compares with
	// Prefilter: a path the pattern matches ends with suffix and contains lit. Both
	// are "" when the pattern has no usable literal (or uses escapes).
	suffix, lit string
	// tree: the pattern is "**" or ends in "/**": it covers a directory and
	// everything beneath it, so it also matches the directory itself.
	tree bool
	// root: the pattern matches the tree's root "." (only "." and patterns made of
	// "**" elements do).
	root bool
	// lead, when not 0, is a byte that begins an element of every path the
	// pattern matches (the literal first byte after a leading "**/"); a subject
	// whose elements begin with other bytes only cannot match.
	lead byte
}

// compilePattern validates and compiles src. fold case-folds it.
func compilePattern(src string, fold bool) (pattern, error) {
	p := strings.TrimPrefix(src, "/")
	switch {
	case p == "":
		return pattern{}, fmt.Errorf("empty pattern")
	case strings.IndexByte(p, 0) >= 0:
		return pattern{}, fmt.Errorf("NUL byte in pattern")
	case !utf8.ValidString(p):
		return pattern{}, fmt.Errorf("pattern is not UTF-8")
	case strings.ContainsRune(p, utf8.RuneError):
		// doublestar reads a byte that is not UTF-8 as U+FFFD: such a pattern
		// would match names it does not spell.
		return pattern{}, fmt.Errorf("U+FFFD in pattern (it would match any byte that is not UTF-8)")
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
	c.shape, c.k = classify(p)
	c.suffix, c.lit = prefilter(p)
	if rest := strings.TrimPrefix(p, "**/"); rest != "" && !c.root && !strings.ContainsRune(`*?[]{}\,!^/`, rune(rest[0])) {
		c.lead = rest[0]
	}
	return c, nil
}

// classify recognizes the shapes that plain string comparisons match exactly as
// doublestar does.
func classify(p string) (shape, string) {
	if literal(p) {
		return shapeExact, p
	}
	if rest, ok := strings.CutPrefix(p, "**/"); ok {
		if mid, ok := strings.CutSuffix(rest, "/**"); ok && literal(mid) {
			return shapeTree, mid
		}
		if literal(rest) {
			if strings.IndexByte(rest, '/') >= 0 {
				return shapeTail, rest
			}
			return shapeBase, rest
		}
		if k, ok := strings.CutPrefix(rest, "*"); ok && literal(k) && strings.IndexByte(k, '/') < 0 {
			return shapeSuffix, k
		}
		if k, ok := strings.CutSuffix(rest, "*"); ok && literal(k) && strings.IndexByte(k, '/') < 0 {
			return shapePrefix, k
		}
	}
	if head, ok := strings.CutSuffix(p, "/**"); ok && literal(head) {
		return shapeUnder, head
	}
	return shapeGlob, ""
}

// literal reports whether s is non-empty and has no character doublestar could
// treat specially.
func literal(s string) bool {
	return s != "" && !strings.ContainsAny(s, `*?[]{}\,!^`)
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
	runs, endsLiteral := literalRuns(pat, classFrom, classTo)
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

// literalRuns returns the runs of literal text of pat outside braces and the
// class spanning classFrom to classTo, and whether pat ends in one.
func literalRuns(pat string, classFrom, classTo int) (runs []string, endsLiteral bool) {
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
		if !strings.ContainsRune("*?[]{}", rune(ch)) {
			continue
		}
		if depth == 0 && i > start {
			runs = append(runs, pat[start:i])
		}
		switch {
		case ch == '{':
			depth++
		case ch == '}' && depth > 0:
			depth--
		}
		start = i + 1
	}
	endsLiteral = depth == 0 && start < len(pat)
	if endsLiteral {
		runs = append(runs, pat[start:])
	}
	return runs, endsLiteral
}

// subject is a path being matched, with what every pattern would compute again.
type subject struct {
	path  string    // clean, folded when folding
	base  string    // its last element
	first [2]uint64 // bit b%128 set for the first byte b of each element (hasFirst)
}

func newSubject(path string) subject {
	s := subject{path: path, base: baseOf(path)}
	s.first[path[0]>>6&1] |= 1 << (path[0] & 63)
	for i := 0; i < len(path)-1; i++ {
		if path[i] == '/' {
			b := path[i+1]
			s.first[b>>6&1] |= 1 << (b & 63)
		}
	}
	return s
}

// hasFirst reports whether an element of the subject may begin with b: exactly
// for ASCII, with collisions for other bytes.
func (s *subject) hasFirst(b byte) bool {
	return s.first[b>>6&1]&(1<<(b&63)) != 0
}

// mayMatch is a cheap test: false means the subject cannot match.
func (c *pattern) mayMatch(s *subject) bool {
	return c.lead == 0 || s.hasFirst(c.lead)
}

// match reports whether the subject matches.
func (c *pattern) match(s *subject) bool {
	path := s.path
	if path == "." {
		return c.root
	}
	switch c.shape {
	case shapeExact:
		return path == c.k
	case shapeBase:
		return s.base == c.k
	case shapeSuffix:
		return strings.HasSuffix(s.base, c.k)
	case shapePrefix:
		return strings.HasPrefix(s.base, c.k)
	case shapeTail:
		return strings.HasSuffix(path, c.k) && (len(path) == len(c.k) || path[len(path)-len(c.k)-1] == '/')
	case shapeTree:
		return s.hasFirst(c.k[0]) && hasElements(path, c.k)
	case shapeUnder:
		return strings.HasPrefix(path, c.k) && (len(path) == len(c.k) || path[len(c.k)] == '/')
	}
	if !strings.HasSuffix(path, c.suffix) || !strings.Contains(path, c.lit) {
		return false
	}
	return doublestar.MatchUnvalidated(c.pat, path)
}

// hasElements reports whether k, one or more whole path elements, occurs in path.
func hasElements(path, k string) bool {
	for i := 0; i+len(k) <= len(path); {
		j := strings.Index(path[i:], k)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(k)
		if (j == 0 || path[j-1] == '/') && (end == len(path) || path[end] == '/') {
			return true
		}
		i = j + 1
	}
	return false
}

// baseOf returns the last element of a clean path.
func baseOf(path string) string {
	return path[strings.LastIndexByte(path, '/')+1:]
}

// foldCase folds s for case-insensitive matching: lower case after upper case, so
// that letters with several lower forms (the long s, the Kelvin sign) meet their
// ASCII counterparts. An all-lower-case ASCII string is returned as is. Bytes
// that are not UTF-8 are kept as they are (strings.ToLower would make each
// U+FFFD, and two names one).
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
	case wide && !utf8.ValidString(s):
		return foldRaw(s)
	case wide:
		return strings.ToLower(strings.ToUpper(s))
	case upper:
		return strings.ToLower(s)
	}
	return s
}

// foldRaw is foldCase on a string that is not UTF-8: each run of valid text
// folded, each invalid byte kept.
func foldRaw(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for start, i := 0, 0; i <= len(s); {
		if i < len(s) {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || n != 1 {
				i += n
				continue
			}
		}
		b.WriteString(strings.ToLower(strings.ToUpper(s[start:i])))
		if i == len(s) {
			break
		}
		b.WriteByte(s[i])
		i++
		start = i
	}
	return b.String()
}
