package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigTooLarge: a configuration over MaxConfigBytes is refused, by
// ParseConfig and by Load (which reads no more than the bound plus one).
// Both accepted it before (8a35f16).
func TestConfigTooLarge(t *testing.T) {
	big := "default = \"allow\"\n" + strings.Repeat("# padding\n", MaxConfigBytes/10+1)
	if _, err := ParseConfig([]byte(big), TOML); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("ParseConfig of %d bytes: %v", len(big), err)
	}
	p := filepath.Join(t.TempDir(), "big.toml")
	if err := os.WriteFile(p, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Load of %d bytes: %v", len(big), err)
	}
}

// FuzzParseConfig parses arbitrary TOML and JSON: a configuration is
// accepted or refused with ErrInvalidConfig, never a panic, and what is
// accepted compiles with New or is refused by it with ErrInvalidConfig.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"default = \"ask\"\n[[rules]]\neffect = \"deny\"\npaths = [\"**/.env\"]\n",
		"max_file_size = 1024\nhide_secrets = true\nsecret_patterns = []\n",
		"[[rules]]\npaths = [\"a\"]\n", "a = [[[[[[[[[[1]]]]]]]]]]\n", "default = \"allow\"\ndefault = \"deny\"\n",
		`{"default":"deny","rules":[{"effect":"allow","ops":["read"],"paths":["src/**"]}]}`,
		`{"default":"deny"}}`, `{"rules":[{"effect":"allow","paths":["{a,b"]}]}`,
	} {
		f.Add([]byte(s), s[0] == '{')
	}
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		format := TOML
		if isJSON {
			format = JSON
		}
		cfg, err := ParseConfig(data, format)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("refused without ErrInvalidConfig: %v", err)
			}
			return
		}
		if len(data) > MaxConfigBytes {
			t.Fatalf("accepted %d bytes", len(data))
		}
		for _, r := range cfg.Rules {
			for _, p := range r.Paths {
				if len(p) > 128 {
					return // New's pattern matching is fuzzed by FuzzRules, bounded
				}
			}
		}
		if _, err := New(cfg); err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("accepted configuration fails New without ErrInvalidConfig: %v", err)
		}
	})
}
