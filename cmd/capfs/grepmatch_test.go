package main

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// selectedLines is the reference: the numbers of the lines of data a line-by-line
// search selects (a line is the text between newlines; a last line without a
// newline counts; an empty buffer has none).
func selectedLines(m *lineMatcher, data []byte) []int {
	var out []int
	lines := bytes.Split(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] == '\n' {
		lines = lines[:len(lines)-1]
	}
	if len(data) == 0 {
		lines = nil
	}
	for i, l := range lines {
		if m.selected(l) {
			out = append(out, i+1)
		}
	}
	return out
}

// fastLines is what the whole-buffer search (lineMatcher.next) selects.
func fastLines(m *lineMatcher, data []byte) []int {
	var out []int
	for pos := 0; pos < len(data); {
		ls, le, ok := m.next(data, pos)
		if !ok {
			break
		}
		out = append(out, bytes.Count(data[:ls], []byte("\n"))+1)
		pos = le + 1
	}
	return out
}

var fuzzPatterns = []string{"a", "ab", "a.c", "^a", "b$", "^$", "a|b\nc", `\s`, `[^a]`, `a\nb`, "x*", `\bfoo\b`, "(?s).", "[[:alpha:]]+", `\Aa`, `a\z`, "é",
	"ab+c", "x(ab)+y", "fo+ bar", `a\.c`, `b{2,}ca`, "(?i)ab", `\bab\w*`}

// FuzzGrepMatch checks the whole-buffer search against the line-by-line
// reference for every option combination: the fast paths (literal, whole
// buffer, spanning matches re-checked per line) select exactly the lines a
// line-by-line grep selects.
func FuzzGrepMatch(f *testing.F) {
	for _, s := range []string{"", "a\n", "ab\nc\n", "\n\n", "a b\nfoo bar\nxfoo\n", "a\nb", "é\na\r\n", "abc\n\nb\n"} {
		f.Add([]byte(s), uint8(0), uint8(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, pat, flags uint8) {
		p := fuzzPatterns[int(pat)%len(fuzzPatterns)]
		fixed, fold, word, line, invert := flags&1 != 0, flags&2 != 0, flags&4 != 0, flags&8 != 0, flags&16 != 0
		m, err := compileMatcher([]string{p}, fixed, fold, word, line, invert)
		if err != nil {
			t.Skip()
		}
		want := selectedLines(m, data)
		got := fastLines(m, data)
		if !slices.Equal(got, want) {
			t.Fatalf("pattern %q flags %05b data %q: whole-buffer search selects lines %v, line by line %v", p, flags, data, got, want)
		}
	})
}

// TestGrepMatchWords checks -w as GNU grep defines it: a match counts when
// non-word characters (or the line's ends) surround it, and a shorter match at
// the same start, or a later one, is tried when the first is not.
func TestGrepMatchWords(t *testing.T) {
	for _, tc := range []struct {
		pat, line string
		want      bool
	}{
		{"foo", "foo", true}, {"foo", "a foo.", true}, {"foo", "foobar", false}, {"foo", "foo_x", false},
		{"foo", "xfoo foo", true}, {"fo*", "foooo", true}, {"fo*", "foox fo", true}, {"a.", "ab abc", true},
		{"é", "é", true}, {"é", "éa", false},
	} {
		m, err := compileMatcher([]string{tc.pat}, false, false, true, false, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.matchLine([]byte(tc.line)); got != tc.want {
			t.Errorf("-w %q on %q = %v, want %v", tc.pat, tc.line, got, tc.want)
		}
	}
	if _, err := compileMatcher([]string{"("}, false, false, false, false, false); err == nil {
		t.Error("a bad pattern compiled")
	}
}

// TestGrepMatchRequired runs the whole-buffer search against the line-by-line
// reference on patterns with a required literal (found first, then the line
// checked alone) under every option combination.
func TestGrepMatchRequired(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	alpha := "abcxy. \nfo"
	for range 300 {
		data := make([]byte, rng.IntN(80))
		for i := range data {
			data[i] = alpha[rng.IntN(len(alpha))]
		}
		for _, p := range []string{"ab+c", "x(ab)+y", "fo+ bar", `a\.c`, `b{2,}ca`, `\bab\w*`, "ab.*y$", "^x.?ab"} {
			for flags := range 32 {
				fixed, fold, word, line, invert := flags&1 != 0, flags&2 != 0, flags&4 != 0, flags&8 != 0, flags&16 != 0
				m, err := compileMatcher([]string{p}, fixed, fold, word, line, invert)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := fastLines(m, data), selectedLines(m, data); !slices.Equal(got, want) {
					t.Fatalf("pattern %q flags %05b data %q: whole-buffer search selects lines %v, line by line %v", p, flags, data, got, want)
				}
			}
		}
	}
}
