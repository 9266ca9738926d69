package main

import (
	"strings"
	"testing"
)

// TestGrepGlobNameUnaddressable: capfs grep and glob name a host name no capfs
// path can hold (a\b) once on stderr, as ls and tree do, instead of skipping it
// silently, with the openat2 and the portable resolvers.
func TestGrepGlobNameUnaddressable(t *testing.T) {
	t.Parallel()
	for _, res := range resolvers {
		t.Run(res, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			writeTree(t, root, map[string]string{"ok.txt": "needle\n", `a\b`: "needle\n"})
			env := []string{"CAPFS_PHYSICAL_RESOLVER=" + res}
			g := runCapfsEnv(t, root, env, "--audit", "off", "grep", "-r", "needle", "project")
			if !strings.Contains(g.stdout, "ok.txt") || strings.Count(g.stderr, `a\\b`) != 1 {
				t.Errorf("grep: exit %d\nstdout:\n%s\nstderr:\n%s", g.code, g.stdout, g.stderr)
			}
			m := runCapfsEnv(t, root, env, "--audit", "off", "glob", "project/*").want(t, 0)
			if !strings.Contains(m.stdout, "ok.txt") || strings.Count(m.stderr, `a\\b`) != 1 {
				t.Errorf("glob:\nstdout:\n%s\nstderr:\n%s", m.stdout, m.stderr)
			}
		})
	}
}
