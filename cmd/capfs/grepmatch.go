package main

import (
	"bytes"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/capfs/capfs/internal/search"
)

// lineMatcher selects lines the way GNU grep does: a line is selected when the
// pattern matches somewhere in it (-w: as a whole word, -x: as the whole line),
// or, with -v, when it does not.
type lineMatcher struct {
	re     *regexp.Regexp // matches within one line; with -x anchored at both ends
	buf    *regexp.Regexp // re in multi-line mode, run on a whole buffer to find candidate lines
	word   bool           // -w: a match counts only between non-word characters
	invert bool           // -v
	// literal is set when the pattern set is one fixed string matched
	// case-sensitively (-F without -i, or a regexp without metacharacters):
	// candidate lines are found with bytes.Index.
	literal []byte
	lit     *search.Literal // literal's search
	// req is a literal every match contains (internal/search.Required): lines
	// without it are passed over before the expression runs (nil: none).
	req *search.Literal
	// perLine makes the search run line by line: the pattern uses \A or \z,
	// which mean something else on a whole buffer.
	perLine bool
}

// compileMatcher builds the matcher for patterns (each -e, or the one PATTERN
// argument; a pattern holding newlines is one pattern per line, as in grep).
// fixed quotes them (-F), fold ignores case (-i), word and line are -w and -x.
func compileMatcher(patterns []string, fixed, fold, word, line, invert bool) (*lineMatcher, error) {
	var alts []string
	for _, p := range patterns {
		alts = append(alts, strings.Split(p, "\n")...)
	}
	m := &lineMatcher{word: word, invert: invert}
	if len(alts) == 1 && !fold && !word && !line && !invert {
		if fixed || regexp.QuoteMeta(alts[0]) == alts[0] {
			if alts[0] != "" {
				m.literal = []byte(alts[0])
			}
		}
	}
	parts := make([]string, len(alts))
	for i, a := range alts {
		if fixed {
			a = regexp.QuoteMeta(a)
		} else if _, err := regexp.Compile(a); err != nil {
			return nil, err
		}
		parts[i] = "(?:" + a + ")"
	}
	expr := strings.Join(parts, "|")
	if line {
		expr = "^(?:" + expr + ")$"
	}
	if fold {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	m.re = re
	if m.literal != nil {
		m.lit = search.NewLiteral(m.literal)
	} else if r := search.Required(expr); r != "" {
		m.req = search.NewLiteral([]byte(r))
	}
	if !fixed && (strings.Contains(expr, `\A`) || strings.Contains(expr, `\z`)) {
		m.perLine = true
	} else {
		m.buf = regexp.MustCompile("(?m)" + expr)
	}
	return m, nil
}

// isWordRune reports whether r is a word constituent for -w: a letter, a
// digit or an underscore.
func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// wordOK reports whether line[s:e] stands between non-word characters.
func wordOK(line []byte, s, e int) bool {
	if s > 0 {
		r, _ := utf8.DecodeLastRune(line[:s])
		if isWordRune(r) {
			return false
		}
	}
	if e < len(line) {
		r, _ := utf8.DecodeRune(line[e:])
		if isWordRune(r) {
			return false
		}
	}
	return true
}

// matches reports the [start,end) ranges of the pattern's matches in line
// (for -o and colour), honouring -w. Empty matches are left out.
func (m *lineMatcher) matches(line []byte) [][2]int {
	var out [][2]int
	for pos := 0; pos <= len(line); {
		loc := m.re.FindIndex(line[pos:])
		if loc == nil {
			break
		}
		s, e := pos+loc[0], pos+loc[1]
		if m.word && !wordOK(line, s, e) {
			// Try a shorter match at the same start, then later starts.
			found := false
			for k := e - 1; k > s; k-- {
				if wordOK(line, s, k) && m.re.Match(line[s:k]) {
					if l := m.re.FindIndex(line[s:k]); l != nil && l[0] == 0 && l[1] == k-s {
						e, found = k, true
						break
					}
				}
			}
			if !found {
				pos = s + 1
				continue
			}
		}
		if e > s {
			out = append(out, [2]int{s, e})
			pos = e
		} else {
			pos = s + 1
		}
	}
	return out
}

// matchLine reports whether the pattern matches line (before -v).
func (m *lineMatcher) matchLine(line []byte) bool {
	if !m.word {
		return m.re.Match(line)
	}
	for pos := 0; pos <= len(line); {
		loc := m.re.FindIndex(line[pos:])
		if loc == nil {
			return false
		}
		s, e := pos+loc[0], pos+loc[1]
		if wordOK(line, s, e) {
			return true
		}
		for k := e - 1; k > s; k-- {
			if wordOK(line, s, k) {
				if l := m.re.FindIndex(line[s:k]); l != nil && l[0] == 0 && l[1] == k-s {
					return true
				}
			}
		}
		pos = s + 1
	}
	return false
}

// selected reports whether line is selected (after -v).
func (m *lineMatcher) selected(line []byte) bool { return m.matchLine(line) != m.invert }

// next finds the first selected line starting at or after pos (pos is a line
// start): it returns the line's start and end (the end excludes the newline).
func (m *lineMatcher) next(data []byte, pos int) (ls, le int, ok bool) {
	if m.invert || m.perLine {
		for pos < len(data) {
			le = lineEnd(data, pos)
			if m.selected(data[pos:le]) {
				return pos, le, true
			}
			pos = le + 1
		}
		return 0, 0, false
	}
	for pos < len(data) {
		var s, e int
		if m.literal != nil {
			i := m.lit.Index(data[pos:])
			if i < 0 {
				return 0, 0, false
			}
			s = pos + i
			e = s + len(m.literal)
		} else if m.req != nil {
			// Only a line holding the required literal can match: check it
			// alone.
			i := m.req.Index(data[pos:])
			if i < 0 {
				return 0, 0, false
			}
			ls = pos
			if j := bytes.LastIndexByte(data[pos:pos+i], '\n'); j >= 0 {
				ls = pos + j + 1
			}
			le = lineEnd(data, pos+i)
			if m.matchLine(data[ls:le]) {
				return ls, le, true
			}
			pos = le + 1
			continue
		} else {
			loc := m.buf.FindIndex(data[pos:])
			if loc == nil {
				return 0, 0, false
			}
			s, e = pos+loc[0], pos+loc[1]
		}
		ls = pos
		if i := bytes.LastIndexByte(data[pos:s], '\n'); i >= 0 {
			ls = pos + i + 1
		}
		if ls >= len(data) {
			return 0, 0, false // an empty match after the last newline: no line there
		}
		le = lineEnd(data, s)
		if m.literal != nil || (e <= le && !m.word) {
			return ls, le, true
		}
		// The match spans lines, or must be a whole word: check the line alone.
		if m.matchLine(data[ls:le]) {
			return ls, le, true
		}
		pos = le + 1
	}
	return 0, 0, false
}

// lineEnd is the index of the newline ending the line that holds i, or len(data).
func lineEnd(data []byte, i int) int {
	if j := bytes.IndexByte(data[i:], '\n'); j >= 0 {
		return i + j
	}
	return len(data)
}
