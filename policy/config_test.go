package policy

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadExample(t *testing.T) {
	e, err := Load(filepath.Join("testdata", "example.toml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.Config()
	if cfg.Default != Allow || cfg.MaxFileSize != 16<<20 || cfg.CaseInsensitive || cfg.HideSecrets {
		t.Errorf("scalars: %+v", cfg)
	}
	if !slices.Contains(cfg.SecretPatterns, "**/.envrc") || !slices.Equal(cfg.PersistencePatterns, DefaultPersistencePatterns()) {
		t.Errorf("pattern lists: %q %q", cfg.SecretPatterns, cfg.PersistencePatterns)
	}
	cases := []struct {
		op         Op
		path, rule string
		want       Effect
	}{
		{OpWrite, "vendor/x/y.go", "vendor-is-generated", Deny},
		{OpWrite, "api/v1/api.pb.go", "vendor-is-generated", Deny},
		{OpRead, "vendor/x/y.go", RuleDefault, Allow},
		{OpRemove, "src/a.go", "confirm-deletes", Ask},
		{OpWrite, "go.mod", "ask[@write]:go.mod,go.sum,Makefile", Ask},
		{OpRead, ".envrc", "secret:**/.envrc", Deny},
		{OpRead, "id.p12", "secret:**/*.p12", Deny},
		{OpWrite, ".git/hooks/pre-push", "persistence:**/.git/hooks/**", Deny},
	}
	for _, c := range cases {
		if d := decide(e, c.op, c.path, ""); d.Effect != c.want || d.Rule != c.rule {
			t.Errorf("%s %q: %+v, want %v by %s", c.op, c.path, d, c.want, c.rule)
		}
	}
	if d := decide(e, OpRemove, "a", ""); d.Reason != "deleting files needs the user's approval" {
		t.Errorf("reason %q", d.Reason)
	}
}

const jsonExample = `{
  "default": "deny",
  "max_file_size": 1000,
  "case_insensitive": true,
  "hide_secrets": true,
  "secret_patterns": ["**/secret/**"],
  "rules": [
    {"name": "work", "effect": "allow", "paths": ["work/**"]},
    {"effect": "ask", "ops": ["remove", "@write"], "paths": ["work/keep/**"], "reason": "kept"}
  ]
}`

func TestParseJSON(t *testing.T) {
	e, err := Parse([]byte(jsonExample), JSON)
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.Config()
	if cfg.Default != Deny || cfg.MaxFileSize != 1000 || !cfg.CaseInsensitive || !cfg.HideSecrets {
		t.Errorf("scalars: %+v", cfg)
	}
	cases := []struct {
		op         Op
		path, rule string
		want       Effect
	}{
		{OpRead, "Work/a", "work", Allow},
		{OpRead, "home/a", RuleDefault, Deny},
		{OpRead, "work/Secret/x", "secret:**/secret/**", Deny},
		{OpRead, "work/.ssh/id_rsa", "work", Allow}, // the secret list was replaced
		{OpWrite, "work/keep/a", "ask[remove,@write]:work/keep/**", Ask},
	}
	for _, c := range cases {
		if d := decide(e, c.op, c.path, ""); d.Effect != c.want || d.Rule != c.rule {
			t.Errorf("%s %q: %+v, want %v by %s", c.op, c.path, d, c.want, c.rule)
		}
	}
	// TOML and JSON forms of the same policy decide alike.
	const tomlForm = `
default = "deny"
max_file_size = 1000
case_insensitive = true
hide_secrets = true
secret_patterns = ["**/secret/**"]
[[rules]]
name = "work"
effect = "allow"
paths = ["work/**"]
[[rules]]
effect = "ask"
ops = ["remove", "@write"]
paths = ["work/keep/**"]
reason = "kept"
`
	tc, err := ParseConfig([]byte(tomlForm), TOML)
	if err != nil {
		t.Fatal(err)
	}
	jc, err := ParseConfig([]byte(jsonExample), JSON)
	if err != nil {
		t.Fatal(err)
	}
	if !configEqual(tc, jc) {
		t.Errorf("TOML %+v\nJSON %+v", tc, jc)
	}
}

func configEqual(a, b Config) bool {
	if a.Default != b.Default || a.MaxFileSize != b.MaxFileSize || a.CaseInsensitive != b.CaseInsensitive ||
		a.HideSecrets != b.HideSecrets || !slices.Equal(a.SecretPatterns, b.SecretPatterns) ||
		!slices.Equal(a.PersistencePatterns, b.PersistencePatterns) || len(a.Rules) != len(b.Rules) {
		return false
	}
	for i := range a.Rules {
		x, y := a.Rules[i], b.Rules[i]
		if x.Effect != y.Effect || x.Name != y.Name || x.Reason != y.Reason || !slices.Equal(x.Ops, y.Ops) || !slices.Equal(x.Paths, y.Paths) {
			return false
		}
	}
	return true
}

func TestParsePatternLists(t *testing.T) {
	for _, f := range []struct {
		format       Format
		absent, none string
	}{
		{TOML, `default = "allow"`, "secret_patterns = []\npersistence_patterns = []"},
		{JSON, `{}`, `{"secret_patterns": [], "persistence_patterns": []}`},
	} {
		c, err := ParseConfig([]byte(f.absent), f.format)
		if err != nil {
			t.Fatal(err)
		}
		if c.SecretPatterns != nil || c.PersistencePatterns != nil {
			t.Errorf("%s: absent lists decoded as %q %q, want nil (the defaults)", f.format, c.SecretPatterns, c.PersistencePatterns)
		}
		c, err = ParseConfig([]byte(f.none), f.format)
		if err != nil {
			t.Fatal(err)
		}
		if c.SecretPatterns == nil || len(c.SecretPatterns) != 0 || c.PersistencePatterns == nil || len(c.PersistencePatterns) != 0 {
			t.Errorf("%s: empty lists decoded as %#v %#v, want empty non-nil", f.format, c.SecretPatterns, c.PersistencePatterns)
		}
		e, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		if d := decide(e, OpRead, ".ssh/id_rsa", ""); d.Effect != Allow {
			t.Errorf("%s: no secret patterns, yet %+v", f.format, d)
		}
	}
}

func TestParseRejects(t *testing.T) {
	cases := []struct {
		name   string
		format Format
		data   string
		want   string
	}{
		{"toml unknown top key", TOML, `defualt = "deny"`, "defualt"},
		{"toml unknown rule key", TOML, "[[rules]]\neffect = \"deny\"\npath = [\"a\"]", "rules.path"},
		{"toml bad pattern", TOML, "[[rules]]\neffect = \"deny\"\npaths = [\"a/[b\"]", `"a/[b"`},
		{"toml bad secret pattern", TOML, `secret_patterns = ["{x"]`, `"{x"`},
		{"toml no effect", TOML, "[[rules]]\npaths = [\"a\"]", "no effect"},
		{"toml bad effect", TOML, "[[rules]]\neffect = \"maybe\"", `"maybe"`},
		{"toml bad default", TOML, `default = "Allow!"`, `"Allow!"`},
		{"toml unknown op", TOML, "[[rules]]\neffect = \"deny\"\nops = [\"delete\"]", `"delete"`},
		{"toml wrong type", TOML, `max_file_size = "big"`, "max_file_size"},
		{"toml syntax", TOML, `default = `, ""},
		{"json unknown top key", JSON, `{"defualt": "deny"}`, "defualt"},
		{"json unknown rule key", JSON, `{"rules": [{"effect": "deny", "path": ["a"]}]}`, "path"},
		{"json bad pattern", JSON, `{"rules": [{"effect": "deny", "paths": ["a//b"]}]}`, `"a//b"`},
		{"json no effect", JSON, `{"rules": [{"paths": ["a"]}]}`, "no effect"},
		{"json trailing data", JSON, `{} {}`, "after the JSON object"},
		{"json syntax", JSON, `{"default": }`, ""},
		{"unknown format", Format("yaml"), `default: allow`, "yaml"},
	}
	for _, c := range cases {
		e, err := Parse([]byte(c.data), c.format)
		if err == nil || e != nil {
			t.Errorf("%s: Parse returned %v, %v", c.name, e, err)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want ErrInvalidConfig mentioning %q", c.name, err, c.want)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "policy.yaml")); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("unknown extension: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.toml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"rules": [{"effect": "deny", "paths": ["[x"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("bad file: %v", err)
	}
	good := filepath.Join(dir, "good.JSON")
	if err := os.WriteFile(good, []byte(jsonExample), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if d := decide(e, OpRead, "work/a", ""); d.Effect != Allow || d.Rule != "work" {
		t.Errorf("loaded JSON decides %+v", d)
	}
}

func TestEffectText(t *testing.T) {
	for _, e := range []Effect{Allow, Deny, Ask} {
		b, err := e.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Effect = 9
		if err := back.UnmarshalText(b); err != nil || back != e {
			t.Errorf("%v round-trips to %v, %v", e, back, err)
		}
	}
	if _, err := Effect(5).MarshalText(); err == nil {
		t.Error("Effect(5) encoded")
	}
	var e Effect
	if err := e.UnmarshalText([]byte("permit")); !errors.Is(err, ErrInvalidConfig) || e != Allow {
		t.Errorf("UnmarshalText(permit): %v, left %v", err, e)
	}
}
