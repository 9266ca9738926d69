package policy

import (
	"strings"
	"testing"
)

// TestRawNamesDecided: a path that is not UTF-8 is decided on its bytes, like
// any other, and the defaults' secrets still hide what they hid. Before, every
// such path was denied as invalid-path.
func TestRawNamesDecided(t *testing.T) {
	for _, fold := range []bool{false, true} {
		e := mustNew(t, Config{CaseInsensitive: fold, HideSecrets: true})
		for _, c := range []struct {
			path string
			rule string // "" for the default's allow
		}{
			{"caf\xe9", ""},
			{"d\xff/caf\xe9", ""},
			{".env\xff", ""},   // not ".env", not ".env.*"
			{"k.pem\xff", ""},  // not "*.pem"
			{".ss\xe8/id", ""}, // not ".ssh"
			{"\xff.env", ""},   // not ".env"
			{"\ufffd.env", ""}, // U+FFFD is a rune like any other
			{"a/\xff/.env", "secret:**/.env"},
			{"\xe9/.env.\xff", "secret:**/.env.*"},
			{"\xff.pem", "secret:**/*.pem"},
			{"x/caf\xe9.key", "secret:**/*.key"},
			{"a\xe9/.ssh/id", "secret:**/.ssh/**"},
			{".ssh/\xff", "secret:**/.ssh/**"},
			{"\xc3/.ssh", "secret:**/.ssh/**"},
		} {
			for _, op := range []Op{OpRead, OpStat, OpWrite} {
				d := decide(e, op, c.path, "")
				if c.rule == "" && (d.Effect != Allow || d.Rule != RuleDefault) {
					t.Errorf("fold %v: %s %q: %+v, want the default's allow", fold, op, c.path, d)
				}
				if c.rule != "" && (d.Effect != Deny || d.Rule != c.rule) {
					t.Errorf("fold %v: %s %q: %+v, want denied by %s", fold, op, c.path, d, c.rule)
				}
			}
			// Both ends of a rename are decided: a raw name can carry a secret out.
			if d := decide(e, OpRename, c.path, "out\xff"); (d.Effect == Deny) != (c.rule != "") {
				t.Errorf("fold %v: rename %q: %+v", fold, c.path, d)
			}
		}
	}
	folding := mustNew(t, Config{CaseInsensitive: true})
	for _, p := range []string{"\xff/.ENV", "A\xe9/.SSH/ID", "X\xff.PEM"} {
		if d := decide(folding, OpRead, p, ""); d.Effect != Deny {
			t.Errorf("folding: read %q: %+v, want denied", p, d)
		}
	}
}

// TestRawNamesGlob: against a byte that is not UTF-8, "?" matches that one
// byte, "*" any run, a class sees U+FFFD, and a literal never matches it.
func TestRawNamesGlob(t *testing.T) {
	for _, c := range []struct {
		pat, path string
		match     bool
	}{
		{"caf?", "caf\xe9", true},
		{"caf??", "caf\xe9", false},
		{"caf??", "caf\xe9\xe9", true},
		{"caf?", "caf\xc3\xa9", true}, // é, one rune
		{"caf*", "caf\xe9\xff", true},
		{"*\u00e9", "caf\xe9", false},
		{"caf\u00e9", "caf\xe9", false},
		{"caf[!a]", "caf\xe9", true},
		{"caf[a-z]", "caf\xe9", false},
		{"caf[\u00e0-\u00ff]", "caf\xe9", false},
		{"**/caf?/x", "d/caf\xe9/x", true},
		{"{caf\u00e9,caf?}", "caf\xe9", true},
	} {
		for _, fold := range []bool{false, true} {
			e := mustNew(t, Config{CaseInsensitive: fold, SecretPatterns: []string{}, PersistencePatterns: []string{},
				Rules: []Rule{{Effect: Deny, Paths: []string{c.pat}}}})
			if got := decide(e, OpRead, c.path, "").Effect == Deny; got != c.match {
				t.Errorf("fold %v: %q on %q: matched %v, want %v", fold, c.pat, c.path, got, c.match)
			}
		}
	}
}

// TestRawPatternRefused: pattern text is UTF-8 without U+FFFD, so that no
// literal of a pattern equals a byte that is not UTF-8.
func TestRawPatternRefused(t *testing.T) {
	for _, p := range []string{"caf\xe9", "**/\xff", "\ufffd", "**/*.\ufffd", "[\ufffd]"} {
		if _, err := New(Config{SecretPatterns: []string{p}}); err == nil {
			t.Errorf("pattern %q accepted", p)
		}
	}
}

// TestFoldKeepsRawBytes: folding case keeps bytes that are not UTF-8 as they
// are, so two names that differ in one stay two.
func TestFoldKeepsRawBytes(t *testing.T) {
	for in, want := range map[string]string{
		"A\xffB":          "a\xffb",
		"CAF\xe9":         "caf\xe9",
		"\xc3":            "\xc3",
		"\u212a\xff.KEY":  "k\xff.key",
		"\xe9\u00c9\xc3X": "\xe9\u00e9\xc3x",
	} {
		if got := foldCase(in); got != want {
			t.Errorf("foldCase(%q) = %q, want %q", in, got, want)
		}
	}
	if foldCase("caf\xe9") == foldCase("caf\xe8") {
		t.Error("two raw names fold into one")
	}
	if strings.Contains(foldCase("\xff\xfe"), "\ufffd") {
		t.Error("folding made U+FFFD of a raw byte")
	}
}
