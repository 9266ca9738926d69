package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/capfs/capfs/internal/mountkind"
	"github.com/capfs/capfs/vfs"
)

// configFile is the TOML configuration format (see the root command's help).
type configFile struct {
	Policy      string        `toml:"policy"`
	Audit       string        `toml:"audit"`
	Work        string        `toml:"work"`
	MemoryQuota string        `toml:"memory_quota"`
	Mounts      []configMount `toml:"mount"`
}

type configMount struct {
	Path     string `toml:"path"`
	Kind     string `toml:"kind"`
	Source   string `toml:"source"`
	Rev      string `toml:"rev"`
	ReadOnly bool   `toml:"read_only"`
	Quota    string `toml:"quota"`
}

// config is cm without its path, as [mountkind.ParseConfig] takes it.
func (cm configMount) config() mountkind.Config {
	return mountkind.Config{Kind: cm.Kind, Source: cm.Source, Rev: cm.Rev, ReadOnly: cm.ReadOnly, Quota: cm.Quota}
}

// configResult is a parsed configuration file.
type configResult struct {
	mounts        []mountSpec
	policy, audit string
	work          string
	memoryQuota   int64 // 0: not set
}

// loadConfig reads the TOML configuration file at name, relative to env's
// working directory. Relative paths in it are relative to the file's
// directory.
func loadConfig(env environ, name string) (configResult, error) {
	bad := func(format string, a ...any) (configResult, error) {
		return configResult{}, usageErrorf("--config %s: %s", name, fmt.Sprintf(format, a...))
	}
	file := env.abs(name)
	data, err := os.ReadFile(file)
	if err != nil {
		return bad("%v", cause(err))
	}
	var cf configFile
	md, err := toml.Decode(string(data), &cf)
	if err != nil {
		return bad("%v", err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return bad("unknown keys: %s", strings.Join(keys, ", "))
	}
	base, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		return bad("%v", err)
	}
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	res := configResult{policy: rel(cf.Policy), audit: rel(cf.Audit), work: cf.Work}
	if cf.Work != "" {
		if _, err := vfs.ParseGuest(cf.Work); err != nil {
			return bad("work = %q: %s", cf.Work, messageOrCode(err))
		}
	}
	if cf.MemoryQuota != "" {
		q, err := parseQuota(cf.MemoryQuota)
		if err != nil {
			return bad("memory_quota = %q: %v", cf.MemoryQuota, err)
		}
		res.memoryQuota = q
	}
	for i, cm := range cf.Mounts {
		where := fmt.Sprintf("mount #%d", i+1)
		p, err := parseMountPath(cm.Path)
		if err != nil {
			return bad("%s: %v", where, err)
		}
		spec, err := mountkind.ParseConfig(p, cm.config(), name, base)
		if err != nil {
			return bad("%s: %v", where, err)
		}
		res.mounts = append(res.mounts, spec)
	}
	return res, nil
}
