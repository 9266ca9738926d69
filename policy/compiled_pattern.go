package policy

import (
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// splitSegs splits a normalized pattern into elements, or reports that the
// compiled form cannot take it: escapes, an element that is not a valid
// pattern on its own (a class or "{}" group holding "/"), "**" beside other
// text in an element.
func splitSegs(pat string) ([]seg, bool) {
	if strings.IndexByte(pat, '\\') >= 0 {
		return nil, false
	}
	var out []seg
	for _, el := range strings.Split(pat, "/") {
		if el == "**" {
			if len(out) > 0 && out[len(out)-1].kind == segAny {
				continue
			}
			out = append(out, seg{kind: segAny})
			continue
		}
		if strings.Contains(el, "**") || !doublestar.ValidatePattern(el) || strings.Contains(el, "[]") ||
			strings.Contains(el, "[!]") || strings.Contains(el, "[^]") {
			return nil, false
		}
		if literal(el) {
			out = append(out, seg{kind: segLit, alts: []alt{{lit: el}}})
			continue
		}
		s := seg{kind: segGlob}
		for _, a := range expandBraces(el) {
			if a == "" {
				return nil, false // an empty alternative ("{,x}"): left to doublestar whole
			}
			s.alts = append(s.alts, globAlt(a))
		}
		out = append(out, s)
	}
	return out, true
}

// globAlt makes one alternative of a glob element.
func globAlt(a string) alt {
	if literal(a) {
		return alt{lit: a}
	}
	i := strings.IndexAny(a, `*?[]{}\,!^`)
	j := strings.LastIndexAny(a, `*?[]{}\,!^`)
	return alt{lit: a[:i], glob: a[:], sfx: a[j+1:]}
}

// maxAlts bounds the alternatives one element is spelled out into.
const maxAlts = 64

// expandBraces spells out the "{}" groups of one element (no "/" in it) into
// its alternatives; an element with a class, or with too many alternatives,
// is returned as is (doublestar matches it whole).
func expandBraces(el string) []string {
	if strings.IndexByte(el, '{') < 0 || strings.IndexByte(el, '[') >= 0 {
		return []string{el}
	}
	out := []string{el}
	for {
		var next []string
		changed := false
		for _, s := range out {
			open, close, commas := braceGroup(s)
			if open < 0 {
				next = append(next, s)
				continue
			}
			changed = true
			from := open + 1
			for _, c := range append(commas, close) {
				next = append(next, s[:open]+s[from:c]+s[close+1:])
				from = c + 1
			}
		}
		if len(next) > maxAlts {
			return []string{el}
		}
		out = next
		if !changed {
			return out
		}
	}
}

// braceGroup finds the first top-level "{...}" of s: the offsets of its
// braces and of its top-level commas; open is -1 if there is none.
func braceGroup(s string) (open, close int, commas []int) {
	open = strings.IndexByte(s, '{')
	if open < 0 {
		return -1, -1, nil
	}
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return open, i, commas
			}
		case ',':
			if depth == 1 {
				commas = append(commas, i)
			}
		}
	}
	return -1, -1, nil // unbalanced: ValidatePattern has refused it already
}
