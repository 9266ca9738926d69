//go:build linux

package mcpserver_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/mcpserver"
	"github.com/capfs/capfs/policy"
)

// TestUnaddressableNamesSearched: grep and glob name a host name no path can
// hold (a\b) once, with the reason, instead of skipping it silently; with the
// openat2 and the portable resolvers. Before, both left it out without a word.
func TestUnaddressableNamesSearched(t *testing.T) {
	for _, r := range []struct {
		name string
		mode physical.ResolverMode
	}{{"openat2", physical.ResolverAuto}, {"portable", physical.ResolverPortable}} {
		t.Run(r.name, func(t *testing.T) {
			host := t.TempDir()
			for _, name := range []string{"ok.txt", `a\b`} {
				if err := os.WriteFile(filepath.Join(host, name), []byte("needle\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			pb, err := physical.New(host, physical.WithResolver(r.mode))
			if err != nil {
				t.Skipf("physical backend: %v", err)
			}
			t.Cleanup(func() { pb.Close() })
			d, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
			cs := connect(t, d, mcpserver.Options{})
			for _, c := range []struct {
				tool string
				args map[string]any
			}{{"grep", map[string]any{"pattern": "needle"}}, {"glob", map[string]any{"pattern": "*"}}} {
				res := callTool(t, cs, c.tool, c.args)
				if res.isErr || !strings.Contains(res.text, "ok.txt") {
					t.Fatalf("%s: %s", c.tool, res.text)
				}
				if n := strings.Count(res.text, `a\\b`); n != 1 {
					t.Errorf("%s names a\\b %d times; want once:\n%s", c.tool, n, res.text)
				}
			}
		})
	}
}
