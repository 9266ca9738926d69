package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capfs/capfs/mcpserver"
)

// mcpClient starts capfs mcp in-process in dir, serving over its stdin and
// stdout, with args and returns the connected client session.
func mcpClient(t *testing.T, dir string, args ...string) *mcp.ClientSession {
	t.Helper()
	srv := startCapfs(t, dir, nil, append([]string{"mcp"}, args...)...)
	client := mcp.NewClient(&mcp.Implementation{Name: "capfs-test", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, srv.transport(), nil)
	if err != nil {
		t.Fatalf("connecting to capfs mcp: %v", err)
	}
	return cs
}

// mcpCall calls a tool and returns its text and whether it is an error result.
func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool, mcp.Meta) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError, res.Meta
}

func toolNames(t *testing.T, cs *mcp.ClientSession) map[string]bool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, tool := range res.Tools {
		out[tool.Name] = true
	}
	return out
}

func TestMCPOverStdio(t *testing.T) {
	t.Parallel()
	root := project(t)
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	cs := mcpClient(t, root, "-m", "p=physical:"+root, "-m", "scratch=memory:", "--audit", logPath)

	tools := toolNames(t, cs)
	for _, name := range append(append([]string{}, mcpserver.ReadOnlyTools...), mcpserver.WriteTools...) {
		if !tools[name] {
			t.Errorf("tool %s is not offered", name)
		}
	}
	text, isErr, _ := mcpCall(t, cs, "read", map[string]any{"path": "p/src/main.go", "offset": 3, "limit": 1})
	if isErr || text != "     3\tfunc main() {\n(more lines follow: continue with offset=4)\n" {
		t.Fatalf("read: %v %q", isErr, text)
	}
	if text, isErr, _ = mcpCall(t, cs, "edit", map[string]any{"path": "p/src/main.go", "old_string": `println("hello")`, "new_string": `println("bye")`}); isErr {
		t.Fatalf("edit: %s", text)
	}
	patch := "*** Begin Patch\n*** Add File: p/NOTES.md\n+notes\n*** Update File: p/README.md\n@@\n-Hello, capfs.\n+Hi, capfs.\n*** End Patch"
	if text, isErr, _ = mcpCall(t, cs, "apply_patch", map[string]any{"patch": patch}); isErr {
		t.Fatalf("apply_patch: %s", text)
	}
	for name, want := range map[string]string{
		"src/main.go": "package main\n\nfunc main() {\n\tprintln(\"bye\")\n}\n",
		"NOTES.md":    "notes\n",
		"README.md":   "# demo\nHi, capfs.\n",
	} {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil || string(got) != want {
			t.Errorf("host %s: %q, %v; want %q", name, got, err, want)
		}
	}
	text, _, _ = mcpCall(t, cs, "grep", map[string]any{"pattern": "hello", "-i": true, "path": "p"})
	if !strings.Contains(text, "p/src/util/util.go") || strings.Contains(text, ".env") || !strings.Contains(text, "1 refused by policy") {
		t.Errorf("grep: %q", text)
	}
	if text, isErr, _ = mcpCall(t, cs, "write", map[string]any{"path": "scratch/x.txt", "content": "x"}); isErr {
		t.Fatalf("write to memory mount: %s", text)
	}
	// Confinement, the policy and the error shape, through the real binary.
	text, isErr, meta := mcpCall(t, cs, "read", map[string]any{"path": "p/../../etc/passwd"})
	if !isErr || meta[mcpserver.MetaCode] != "path_outside_sandbox" {
		t.Errorf("traversal: %v %v %q", isErr, meta, text)
	}
	text, isErr, meta = mcpCall(t, cs, "read", map[string]any{"path": "p/.env"})
	if !isErr || meta[mcpserver.MetaCode] != "fs_permission_denied" || strings.Contains(text, "hello-secret") {
		t.Errorf("secret: %v %v %q", isErr, meta, text)
	}
	text, _, _ = mcpCall(t, cs, "mounts", map[string]any{})
	if !strings.Contains(text, `"path": "/p"`) || !strings.Contains(text, `"path": "/scratch"`) {
		t.Errorf("mounts: %s", text)
	}
	noHostPath(t, text, root)
	tag := meta[mcpserver.MetaRequestTag]
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}

	// The audit log has the calls, tagged with their MCP request.
	var tagged, sawTag bool
	for _, e := range readAudit(t, logPath) {
		if strings.HasPrefix(e.Tag, "mcp:") {
			tagged = true
		}
		if e.Tag == tag && e.Path == "p/.env" && e.Outcome == "denied" {
			sawTag = true
		}
		if e.Subject != "capfs/mcp" {
			t.Errorf("event subject %q, want capfs/mcp", e.Subject)
		}
		noHostPath(t, e.Path+e.Dest, root)
	}
	if !tagged || !sawTag {
		t.Errorf("audit log: tagged events %v, the denied read under tag %v %v", tagged, tag, sawTag)
	}
}

func TestMCPReadOnly(t *testing.T) {
	t.Parallel()
	root := project(t)
	cs := mcpClient(t, root, "-m", "p=physical:"+root, "--read-only")
	defer cs.Close()
	tools := toolNames(t, cs)
	for _, name := range mcpserver.WriteTools {
		if tools[name] {
			t.Errorf("--read-only offers %s", name)
		}
	}
	if text, isErr, _ := mcpCall(t, cs, "read", map[string]any{"path": "p/README.md"}); isErr || !strings.Contains(text, "Hello, capfs.") {
		t.Errorf("read through --read-only: %q", text)
	}
	text, _, _ := mcpCall(t, cs, "mounts", map[string]any{})
	if !strings.Contains(text, `"read_only": true`) || strings.Contains(text, `"read_only": false`) {
		t.Errorf("mounts under --read-only: %s", text)
	}
}

func TestMCPRefusesNonLoopbackHTTP(t *testing.T) {
	t.Parallel()
	root := project(t)
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "192.0.2.1:80", "[::]:80", "example.com:80", "nonsense"} {
		r := runCapfs(t, root, "-m", "p=memory:", "mcp", "--http", addr).want(t, exitUsage)
		if !strings.Contains(r.stderr, "--http") {
			t.Errorf("%s: stderr %q does not explain", addr, r.stderr)
		}
	}
}

func TestMCPOverHTTP(t *testing.T) {
	t.Parallel()
	root := project(t)
	srv := startCapfs(t, root, nil, "-m", "p=physical:"+root, "mcp", "--http", "127.0.0.1:0")
	endpoint := srv.waitStderr(t, "http://")
	client := mcp.NewClient(&mcp.Implementation{Name: "capfs-test", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", endpoint, err)
	}
	defer cs.Close()
	text, isErr, _ := mcpCall(t, cs, "list", map[string]any{"path": "p"})
	if isErr || !strings.Contains(text, "[FILE] README.md") {
		t.Fatalf("list over HTTP: %q", text)
	}
}

// TestMCPAllMountsReadOnly: a namespace of read-only mounts gets no writing tool,
// without --read-only.
func TestMCPAllMountsReadOnly(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t, map[string]string{"a.txt": "from git\n"})
	cs := mcpClient(t, repo, "-m", "ref=git:"+repo+"@main", "-m", "src=physical:"+repo+",ro")
	defer cs.Close()
	tools := toolNames(t, cs)
	for _, name := range mcpserver.WriteTools {
		if tools[name] {
			t.Errorf("a read-only namespace offers %s", name)
		}
	}
	text, isErr, _ := mcpCall(t, cs, "read", map[string]any{"path": "ref/a.txt"})
	if isErr || !strings.Contains(text, "from git") {
		t.Errorf("read from the git mount: %q", text)
	}
	text, _, _ = mcpCall(t, cs, "mounts", map[string]any{})
	if !strings.Contains(text, "revision main") || strings.Contains(text, repo) {
		t.Errorf("mounts: %s", text)
	}
}
