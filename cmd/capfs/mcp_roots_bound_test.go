//lint:file-ignore SA1019 roots are deprecated by SEP-2577 but still part of the session protocols capfs serves

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPRootsBounded: a client offering more roots than maxRoots gets the
// first maxRoots handled and the rest refused on stderr, so it cannot grow the
// namespace without end (before, each distinct root became a mount).
func TestMCPRootsBounded(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	proj := filepath.Join(work, "proj")
	var roots []*mcp.Root
	for i := range maxRoots + 6 {
		d := filepath.Join(proj, fmt.Sprintf("d%03d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		roots = append(roots, &mcp.Root{URI: "file://" + d, Name: fmt.Sprintf("d%03d", i)})
	}
	last := fmt.Sprintf(`"/roots/d%03d"`, maxRoots-1)
	cs, mounts, stderr := rootsClient(t, work, []string{"mcp", "--roots", "-m", "project=physical:" + proj}, last, roots...)
	defer cs.Close()
	if !strings.Contains(mounts, last) {
		t.Fatalf("the first %d roots are not all shown: %s", maxRoots, mounts)
	}
	if strings.Contains(mounts, fmt.Sprintf(`"/roots/d%03d"`, maxRoots)) {
		t.Errorf("a root past the bound is shown: %s", mounts)
	}
	if n := strings.Count(stderr.String(), "the most a session takes"); n != 6 {
		t.Errorf("%d roots refused for the bound, want 6:\n%s", n, stderr.String())
	}
}
