package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPRoots: with --roots, the client's roots become mounts under roots/;
// without it they are not asked for.
func TestMCPRoots(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	proj := filepath.Join(work, "proj")
	writeTree(t, proj, map[string]string{"hello.txt": "from a root\n"})
	for _, withFlag := range []bool{true, false} {
		args := []string{"mcp", "-m", "scratch=memory:"}
		if withFlag {
			args = append(args, "--roots")
		}
		cmd := exec.Command(capfsBin, args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
		client := mcp.NewClient(&mcp.Implementation{Name: "capfs-test", Version: "v0"}, nil)
		//lint:ignore SA1019 roots are deprecated by SEP-2577 but still part of the session protocols capfs serves (issue 12 asks for them)
		client.AddRoots(&mcp.Root{URI: "file://" + proj, Name: "project"}, &mcp.Root{URI: "https://example.com/x", Name: "not a directory"})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		// Roots are a feature of the session protocols (2025-11-25 and before);
		// the sessionless 2026-07-28 deprecates them.
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var mounts string
		for range 50 {
			mounts, _, _ = mcpCall(t, cs, "mounts", map[string]any{})
			if strings.Contains(mounts, "/roots/proj") || !withFlag {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if withFlag {
			if !strings.Contains(mounts, `"/roots/proj"`) || strings.Contains(mounts, proj) || strings.Contains(mounts, "example.com") {
				t.Fatalf("mounts with --roots: %s", mounts)
			}
			text, isErr, _ := mcpCall(t, cs, "read", map[string]any{"path": "roots/proj/hello.txt"})
			if isErr || !strings.Contains(text, "from a root") {
				t.Errorf("reading through the root: %q", text)
			}
		} else if strings.Contains(mounts, "roots") {
			t.Errorf("mounts without --roots: %s", mounts)
		}
		cs.Close()
	}
}
