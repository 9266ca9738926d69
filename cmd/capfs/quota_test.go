package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/mcpserver"
)

func TestParseQuota(t *testing.T) {
	for in, want := range map[string]int64{
		"64MiB": 64 << 20, "64M": 64 << 20, "64mb": 64 << 20, "1GiB": 1 << 30, "512K": 512 << 10,
		"1048576": 1 << 20, "100B": 100, "2TiB": 2 << 40, "0": -1, "none": -1, "NONE": -1, "0MiB": -1,
	} {
		if got, err := parseQuota(in); err != nil || got != want {
			t.Errorf("parseQuota(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "1.5GiB", "12XB", "99999999999999999999", "9999999999T", "1 2"} {
		if got, err := parseQuota(in); err == nil {
			t.Errorf("parseQuota(%q) = %d, want an error", in, got)
		}
	}
	for _, q := range []int64{-1, 100, 1 << 10, 64 << 20, 3 << 30, 1<<20 + 1} {
		if got, err := parseQuota(formatQuota(q)); err != nil || got != q {
			t.Errorf("formatQuota(%d) = %q, parses back as %d, %v", q, formatQuota(q), got, err)
		}
	}
}

func TestParseMountFlagQuota(t *testing.T) {
	for in, want := range map[string]int64{
		"tmp=memory:": 0, "tmp=memory:,quota=64MiB": 64 << 20, "tmp=memory:,quota=1K,ro": 1 << 10,
		"tmp=memory:,ro,quota=none": -1, "tmp=memory:,quota=2M,quota=3M": 2 << 20,
	} {
		spec, err := parseMountFlag(in, "")
		if err != nil || spec.Quota != want {
			t.Errorf("parseMountFlag(%q): quota %d, %v; want %d", in, spec.Quota, err, want)
		}
	}
	for _, in := range []string{"tmp=memory:quota=1K", "tmp=memory:,quota=", "tmp=memory:,quota=lots", "tmp=memory:,size=1M", "p=physical:.,quota=1M"} {
		if _, err := parseMountFlag(in, ""); err == nil {
			t.Errorf("parseMountFlag(%q) accepted", in)
		}
	}
}

// TestMemoryQuotaSettings: the default, --memory-quota, the configuration's
// memory_quota and a mount's own quota, as `capfs mounts` reports them.
func TestMemoryQuotaSettings(t *testing.T) {
	t.Parallel()
	root := project(t)
	r := runCapfs(t, root, "mounts").want(t, 0)
	if !strings.Contains(r.stdout, "(quota 256MiB)") {
		t.Errorf("the default tmp mount has no 256MiB quota:\n%s", r.stdout)
	}
	r = runCapfs(t, root, "--memory-quota", "8MiB", "-m", "a=memory:", "-m", "b=memory:,quota=1GiB", "mounts").want(t, 0)
	if !strings.Contains(r.stdout, "/a    memory  rw    - (quota 8MiB)") || !strings.Contains(r.stdout, "- (quota 1GiB)") {
		t.Errorf("mounts:\n%s", r.stdout)
	}
	cfg := filepath.Join(t.TempDir(), "capfs.toml")
	body := "memory_quota = \"16MiB\"\n[[mount]]\npath = \"a\"\nkind = \"memory\"\n[[mount]]\npath = \"b\"\nkind = \"memory\"\nquota = \"none\"\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCapfs(t, root, "--config", cfg, "mounts").want(t, 0)
	if !strings.Contains(r.stdout, "(quota 16MiB)") || !strings.Contains(r.stdout, "(quota none)") {
		t.Errorf("mounts with %s:\n%s", body, r.stdout)
	}
	// The flag overrides the configuration's default.
	r = runCapfs(t, root, "--config", cfg, "--memory-quota", "1MiB", "mounts").want(t, 0)
	if !strings.Contains(r.stdout, "(quota 1MiB)") {
		t.Errorf("--memory-quota does not override memory_quota:\n%s", r.stdout)
	}
	runCapfs(t, root, "--memory-quota", "lots", "mounts").want(t, exitUsage)
	if err := os.WriteFile(cfg, []byte("[[mount]]\npath = \"a\"\nkind = \"memory\"\nquota = \"1.5G\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runCapfs(t, root, "--config", cfg, "mounts").want(t, exitUsage)
}

// TestMCPMemoryQuota: a guest writing past a memory mount's quota through MCP
// gets quota_exceeded, on a mount with its own quota and on the default tmp
// mount under --memory-quota; what fits is written.
func TestMCPMemoryQuota(t *testing.T) {
	t.Parallel()
	root := project(t)
	big := strings.Repeat("x", 80<<10)
	for _, args := range [][]string{
		{"-m", "p=physical:" + root, "-m", "tmp=memory:,quota=64KiB"},
		{"--memory-quota", "64KiB", "--ephemeral-scratch"}, // the default mounts, tmp among them
		{"--memory-quota", "64KiB"},                        // the same tmp kept in the project's SQLite scratch
	} {
		cs := mcpClient(t, root, args...)
		text, isErr, _ := mcpCall(t, cs, "write", map[string]any{"path": "tmp/small.txt", "content": "fits"})
		if isErr {
			t.Fatalf("%v: small write: %s", args, text)
		}
		text, isErr, meta := mcpCall(t, cs, "write", map[string]any{"path": "tmp/big.txt", "content": big})
		if !isErr || meta[mcpserver.MetaCode] != "quota_exceeded" {
			t.Errorf("%v: write past the quota: %v %v %q", args, isErr, meta, text)
		}
		// Many small files hit it too: names and nodes are charged.
		var failed bool
		for i := 0; i < 1000 && !failed; i++ {
			_, isErr, meta = mcpCall(t, cs, "write", map[string]any{"path": "tmp/d/" + strings.Repeat("n", 200) + string(rune('a'+i%26)) + strings.Repeat("x", i/26), "content": ""})
			if isErr {
				failed = true
				if meta[mcpserver.MetaCode] != "quota_exceeded" {
					t.Errorf("%v: empty files: %v", args, meta)
				}
			}
		}
		if !failed {
			t.Errorf("%v: 1000 empty files with 200-byte names fit under 64KiB", args)
		}
		text, _, _ = mcpCall(t, cs, "read", map[string]any{"path": "tmp/small.txt"})
		if !strings.Contains(text, "fits") {
			t.Errorf("%v: read back %q", args, text)
		}
		text, _, _ = mcpCall(t, cs, "mounts", map[string]any{})
		if !strings.Contains(text, "quota 64KiB") {
			t.Errorf("%v: mounts does not show the quota: %s", args, text)
		}
		cs.Close()
	}
}
