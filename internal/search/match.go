package search

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"

	"github.com/capfs/capfs/vfs"
)

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
