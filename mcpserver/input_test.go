package mcpserver_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSchemaValidation checks that arguments of the wrong shape never reach a tool:
// the SDK refuses them against the tool's input schema.
func TestSchemaValidation(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "a\n"})
	for name, args := range map[string]map[string]any{
		"read":        {},
		"write":       {"path": "b.txt"},
		"edit":        {"path": "a.txt", "old_string": "a"},
		"grep":        {"pattern": 7},
		"move":        {"source": "a.txt"},
		"remove":      {"path": "a.txt", "recursive": "yes"},
		"read_many":   {"paths": "a.txt"},
		"tree":        {"depth": "deep"},
		"apply_patch": {"dry_run": "no"},
	} {
		res, err := f.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err == nil && !res.IsError {
			t.Errorf("%s %v: accepted", name, args)
		}
	}
	if got := f.content("a.txt"); got != "a\n" {
		t.Fatalf("a rejected call changed a.txt: %q", got)
	}
	if !f.exists("a.txt") {
		t.Fatal("a rejected remove removed a.txt")
	}
}
