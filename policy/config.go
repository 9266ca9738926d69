package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
)

// ParseEffect parses "allow", "deny" or "ask".
func ParseEffect(s string) (Effect, error) {
	switch s {
	case "allow":
		return Allow, nil
	case "deny":
		return Deny, nil
	case "ask":
		return Ask, nil
	}
	return 0, fmt.Errorf("%w: effect %q (want allow, deny or ask)", ErrInvalidConfig, s)
}

// MarshalText encodes e as "allow", "deny" or "ask".
func (e Effect) MarshalText() ([]byte, error) {
	if !validEffect(e) {
		return nil, fmt.Errorf("policy: cannot encode %v", e)
	}
	return []byte(e.String()), nil
}

// UnmarshalText decodes "allow", "deny" or "ask".
func (e *Effect) UnmarshalText(b []byte) error {
	v, err := ParseEffect(string(b))
	if err != nil {
		return err
	}
	*e = v
	return nil
}

// Format is a configuration file format.
type Format string

// The configuration formats.
const (
	TOML Format = "toml"
	JSON Format = "json"
)

// fileConfig is the configuration file's shape. Pattern lists are pointers so that
// an absent key (the defaults) differs from an empty list (none).
type fileConfig struct {
	Default             *string    `toml:"default" json:"default"`
	MaxFileSize         int64      `toml:"max_file_size" json:"max_file_size"`
	CaseInsensitive     bool       `toml:"case_insensitive" json:"case_insensitive"`
	HideSecrets         bool       `toml:"hide_secrets" json:"hide_secrets"`
	AllowGitWrites      bool       `toml:"allow_git_writes" json:"allow_git_writes"`
	SecretPatterns      *[]string  `toml:"secret_patterns" json:"secret_patterns"`
	PersistencePatterns *[]string  `toml:"persistence_patterns" json:"persistence_patterns"`
	Rules               []fileRule `toml:"rules" json:"rules"`
}

type fileRule struct {
	Name   string   `toml:"name" json:"name"`
	Effect *string  `toml:"effect" json:"effect"`
	Ops    []string `toml:"ops" json:"ops"`
	Paths  []string `toml:"paths" json:"paths"`
	Reason string   `toml:"reason" json:"reason"`
}

// MaxConfigBytes bounds a configuration file: a larger one is refused.
const MaxConfigBytes = 1 << 20

// ParseConfig decodes a configuration file (see the package doc for its keys). A
// file over MaxConfigBytes, keys it does not know, and rules without an effect, are
// errors wrapping ErrInvalidConfig; patterns are checked by New, not here.
func ParseConfig(data []byte, format Format) (Config, error) {
	fc, err := decodeConfig(data, format)
	if err != nil {
		return Config{}, err
	}
	var cfg Config
	if fc.Default != nil {
		d, err := ParseEffect(*fc.Default)
		if err != nil {
			return Config{}, fmt.Errorf("default: %w", err)
		}
		cfg.Default = d
	}
	cfg.MaxFileSize = fc.MaxFileSize
	cfg.CaseInsensitive = fc.CaseInsensitive
	cfg.HideSecrets = fc.HideSecrets
	cfg.AllowGitWrites = fc.AllowGitWrites
	if fc.SecretPatterns != nil {
		cfg.SecretPatterns = append([]string{}, *fc.SecretPatterns...)
	}
	if fc.PersistencePatterns != nil {
		cfg.PersistencePatterns = append([]string{}, *fc.PersistencePatterns...)
	}
	for i, fr := range fc.Rules {
		r, err := fr.rule(i)
		if err != nil {
			return Config{}, err
		}
		cfg.Rules = append(cfg.Rules, r)
	}
	return cfg, nil
}

// decodeConfig decodes data in format strictly: no unknown key, nothing
// after the document, at most MaxConfigBytes.
func decodeConfig(data []byte, format Format) (fileConfig, error) {
	var fc fileConfig
	if len(data) > MaxConfigBytes {
		return fc, fmt.Errorf("%w: more than %d bytes", ErrInvalidConfig, MaxConfigBytes)
	}
	switch format {
	case TOML:
		md, err := toml.Decode(string(data), &fc)
		if err != nil {
			return fc, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
		if und := md.Undecoded(); len(und) > 0 {
			keys := make([]string, len(und))
			for i, k := range und {
				keys[i] = k.String()
			}
			return fc, fmt.Errorf("%w: unknown keys: %s", ErrInvalidConfig, strings.Join(keys, ", "))
		}
	case JSON:
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&fc); err != nil {
			return fc, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return fc, fmt.Errorf("%w: data after the JSON object", ErrInvalidConfig)
		}
	default:
		return fc, fmt.Errorf("%w: unknown format %q", ErrInvalidConfig, format)
	}
	return fc, nil
}

// rule is the i-th rule of a configuration file as a [Rule].
func (fr fileRule) rule(i int) (Rule, error) {
	where := fmt.Sprintf("rules[%d]", i)
	if fr.Name != "" {
		where += fmt.Sprintf(" (%s)", fr.Name)
	}
	if fr.Effect == nil {
		return Rule{}, fmt.Errorf("%w: %s: no effect (allow, deny or ask)", ErrInvalidConfig, where)
	}
	eff, err := ParseEffect(*fr.Effect)
	if err != nil {
		return Rule{}, fmt.Errorf("%s: %w", where, err)
	}
	r := Rule{Effect: eff, Name: fr.Name, Reason: fr.Reason, Paths: fr.Paths}
	for _, op := range fr.Ops {
		r.Ops = append(r.Ops, Op(op))
	}
	return r, nil
}

// Parse decodes a configuration file and compiles it with New.
func Parse(data []byte, format Format) (*Engine, error) {
	cfg, err := ParseConfig(data, format)
	if err != nil {
		return nil, err
	}
	return New(cfg)
}

// Load reads the configuration file at path (a host path), in the format its
// extension names (".toml" or ".json"), and compiles it with New. Errors name the
// file.
func Load(path string) (*Engine, error) {
	var format Format
	switch strings.ToLower(filepath.Ext(path)) {
	case ".toml":
		format = TOML
	case ".json":
		format = JSON
	default:
		return nil, fmt.Errorf("policy: %s: %w: unknown file extension (want .toml or .json)", path, ErrInvalidConfig)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	e, err := Parse(data, format)
	if err != nil {
		return nil, fmt.Errorf("policy: %s: %w", path, err)
	}
	return e, nil
}
