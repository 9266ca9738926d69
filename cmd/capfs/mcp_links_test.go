package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPFollowsLinksThatStayInside: through a real capfs mcp, a relative link
// that leaves the project mount and comes back into it, and an absolute host path
// naming a file in the project, are followed (as the reference filesystem server
// follows them when the real path stays inside); a link to the host outside the
// project, or to a secret inside it, is refused. Both physical resolvers.
func TestMCPFollowsLinksThatStayInside(t *testing.T) {
	t.Parallel()
	for _, r := range []string{"auto", "portable"} {
		t.Run(r, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			if real, err := filepath.EvalSymlinks(root); err == nil {
				root = real
			}
			outside := t.TempDir()
			writeTree(t, root, map[string]string{"src/x.txt": "INSIDE", "src/d/keep": "", ".env": "TOKEN=1"})
			writeTree(t, outside, map[string]string{"secret": "OUTSIDE"})
			for target, at := range map[string]string{
				"../../../project/src/x.txt":     "src/d/re",
				filepath.Join(root, "src/x.txt"): "src/abs",
				filepath.Join(outside, "secret"): "src/absout",
				"../../../secret":                "src/d/up",
				"../../../project/.env":          "src/d/env",
				filepath.Join(root, ".env"):      "src/absenv",
			} {
				if err := os.Symlink(target, filepath.Join(root, at)); err != nil {
					t.Fatal(err)
				}
			}
			cs := mcpClientEnv(t, root, []string{"CAPFS_PHYSICAL_RESOLVER=" + r})
			defer cs.Close()
			for _, name := range []string{"project/src/d/re", "project/src/abs"} {
				text, isErr, _ := mcpCall(t, cs, "read", map[string]any{"path": name})
				if isErr || !strings.Contains(text, "INSIDE") {
					t.Errorf("read %s: error %v, %q; want the file it leads to", name, isErr, text)
				}
			}
			for _, name := range []string{"project/src/absout", "project/src/d/up", "project/src/d/env", "project/src/absenv"} {
				text, isErr, _ := mcpCall(t, cs, "read", map[string]any{"path": name})
				if !isErr || strings.Contains(text, "OUTSIDE") || strings.Contains(text, "TOKEN") {
					t.Errorf("read %s: error %v, %q; want a refusal", name, isErr, text)
				}
				if strings.Contains(text, root) || strings.Contains(text, outside) {
					t.Errorf("read %s: the answer names a host path: %q", name, text)
				}
			}
		})
	}
}
