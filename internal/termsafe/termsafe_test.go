package termsafe

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain.go":               "plain.go",
		"with space & \"quote\"": "with space & \"quote\"",
		"héllo 日本 🙂":             "héllo 日本 🙂",
		"a\nb":                   `a\nb`,
		"a\r\nb":                 `a\r\nb`,
		"tab\there":              `tab\there`,
		"\x1b[31mred\x1b[0m":     `\u001b[31mred\u001b[0m`,
		"\x1b]0;title\x07":       `\u001b]0;title\u0007`,
		"evil\u202egnp.exe":      `evil\u202egnp.exe`,
		"iso\u2066x\u2069":       `iso\u2066x\u2069`,
		"lrm\u200e":              `lrm\u200e`,
		"zw\u200bj":              `zw\u200bj`,
		"line\u2028sep":          `line\u2028sep`,
		"nel\u0085c1\u009b":      `nel\u0085c1\u009b`,
		"del\x7f":                `del\u007f`,
		"nul\x00":                `nul\u0000`,
		"back\\slash":            `back\\slash`,
		"bad\xff\xfeutf8":        `bad\xff\xfeutf8`,
		"cut\xe6\x97":            `cut\xe6\x97`,
		"bom\ufeff":              `bom\ufeff`,
		"tag\U000E0041":          `tag\U000e0041`,
		"nbsp\u00a0":             `nbsp\u00a0`,
		"":                       "",
	} {
		got := Escape(in)
		if got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
		back, err := Unescape(got)
		if err != nil || back != in {
			t.Errorf("Unescape(%q) = %q, %v; want %q", got, back, err, in)
		}
	}
}

func TestEscapeNoAlloc(t *testing.T) {
	s := "src/main.go héllo"
	if n := testing.AllocsPerRun(100, func() { _ = Escape(s) }); n != 0 {
		t.Fatalf("%v allocations for a string needing no escape", n)
	}
}

func TestUnescapeRefuses(t *testing.T) {
	for _, e := range []string{`a\`, `\q`, `\x1`, `\u12`} {
		if got, err := Unescape(e); err == nil {
			t.Errorf("Unescape(%q) = %q, want an error", e, got)
		}
	}
}

// FuzzEscape: the result is valid UTF-8 with nothing a terminal interprets,
// and it round-trips.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"a\nb", "\x1b[2J", "\u202e", "\xff", `\`, "日本", "\u0085", "\"", "\U0010ffff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		if !utf8.ValidString(e) {
			t.Fatalf("Escape(%q) = %q: invalid UTF-8", s, e)
		}
		for _, r := range e {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || (r >= 0x2000 && r <= 0x206f && !strings.ContainsRune("‐‑‒–—―‖‗‘’‚‛“”„‟†‡•‣․‥…‧‰‱′″‴‵‶‷‸‹›※‼‽‾‿⁀⁁⁂⁃⁄⁅⁆⁇⁈⁉⁊⁋⁌⁍⁎⁏⁐⁑⁒⁓⁔⁕⁖⁗⁘⁙⁚⁛⁜⁝⁞", r)) {
				t.Fatalf("Escape(%q) = %q holds %U", s, e, r)
			}
		}
		back, err := Unescape(e)
		if err != nil || back != s {
			t.Fatalf("Unescape(Escape(%q)) = %q, %v", s, back, err)
		}
		if e == s && strings.ContainsAny(s, "\\\n\r\x1b") {
			t.Fatalf("Escape(%q) left it unchanged", s)
		}
	})
}
