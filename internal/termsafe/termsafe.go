// Package termsafe escapes text a guest controls (file names, symlink targets,
// paths in messages) before it is printed to a terminal or into a line-oriented
// text result, such as an MCP tool's text or a line of `capfs ls`.
//
// # Guarantees
//
// The result of Escape:
//
//   - contains no C0 control (U+0000–U+001F), DEL, C1 control (U+0080–U+009F), no
//     other rune Go's strconv.IsPrint rejects (bidi overrides and isolates such as
//     U+202E, zero-width and other format characters, U+2028 and U+2029, spaces
//     other than U+0020, unassigned and private-use runes) and no invalid UTF-8:
//     it cannot move the cursor, recolour or retitle a terminal, reorder what
//     follows it, or start a new line. It is valid UTF-8.
//   - is reversible: every backslash is doubled, so Unescape(Escape(s)) == s for
//     every s, and two different names never show the same.
//   - is s itself, unallocated, when s needs nothing escaped: printable ASCII
//     without a backslash, and printable non-ASCII text (accents, CJK, emoji).
//
// # Form
//
// The escapes are those of a Go string literal, chosen to be JSON's too where
// JSON has one, so a model can pass a name it read back in a JSON argument:
// \b \t \n \f \r and \\; other runes as \u00XX, \uXXXX or \UXXXXXXXX; bytes
// that are not UTF-8 as \xXX (JSON has no way to write those). Double quotes are
// left as they are. It is Go's %q without the surrounding quotes and without
// escaping '"', \a and \v (written \u0007 and \u000b here).
//
// Structured (JSON) results keep raw names: JSON escapes control characters
// itself, and a client decoding it gets the exact name. JSON cannot carry
// bytes that are not UTF-8, though: a string holding some is written in
// Escape's form ([ForJSON], [ForJSONValue]), never as U+FFFD.
package termsafe

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// Escape returns s with every control character, non-printable rune, invalid
// UTF-8 byte and backslash escaped (see the package documentation).
func Escape(s string) string {
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '\\' {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError && strconv.IsPrint(r) {
				i += n
				continue
			}
		}
		break
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c == '\\':
				b.WriteString(`\\`)
			case c >= 0x20 && c < 0x7f:
				b.WriteByte(c)
			case c == '\b':
				b.WriteString(`\b`)
			case c == '\t':
				b.WriteString(`\t`)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\f':
				b.WriteString(`\f`)
			case c == '\r':
				b.WriteString(`\r`)
			default:
				writeU(&b, rune(c))
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		case strconv.IsPrint(r):
			b.WriteString(s[i : i+n])
		default:
			writeU(&b, r)
		}
		i += n
	}
	return b.String()
}

// writeU writes r as \uXXXX, or \UXXXXXXXX above U+FFFF.
func writeU(b *strings.Builder, r rune) {
	digits := 4
	if r > 0xffff {
		b.WriteString(`\U`)
		digits = 8
	} else {
		b.WriteString(`\u`)
	}
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		b.WriteByte(hex[(r>>uint(shift))&0xf])
	}
}

// Unescape reverses Escape: Unescape(Escape(s)) == s. It accepts any Go string
// literal body in which '"' may appear unescaped, and fails on anything else
// (a lone backslash, an unknown escape).
func Unescape(e string) (string, error) {
	return strconv.Unquote(`"` + strings.ReplaceAll(e, `"`, `\"`) + `"`)
}
