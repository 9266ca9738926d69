package mcpserver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolCallsAnswerWireResults: a tools/call result of a server from New
// reaches middleware added after New (and the jsonrpc layer) in the wire form,
// which ToolResult turns back into the *mcp.CallToolResult.
func TestToolCallsAnswerWireResults(t *testing.T) {
	fsys := memory.New()
	d, _ := dir.New(fsys)
	ctx := context.Background()
	if err := d.WriteFile(ctx, "a.txt", []byte("<&>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var seen []mcp.Result
	srv := mcpserver.New(d, mcpserver.Options{})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "tools/call" {
				seen = append(seen, res)
			}
			return res, err
		}
	})
	cs := serve(t, srv)
	for _, call := range []struct {
		args    map[string]any
		isError bool
	}{
		{map[string]any{"path": "a.txt"}, false},
		{map[string]any{"path": "missing.txt"}, true},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: call.args})
		if err != nil {
			t.Fatal(err)
		}
		text := res.Content[len(res.Content)-1].(*mcp.TextContent).Text
		if res.IsError != call.isError || (!call.isError && !strings.Contains(text, "<&>")) {
			t.Fatalf("read %v: isError %v, text %q", call.args, res.IsError, text)
		}
		if res.Meta[mcpserver.MetaRequestTag] == nil || (call.isError && res.Meta[mcpserver.MetaCode] != "not_found") {
			t.Fatalf("read %v: _meta %v", call.args, res.Meta)
		}
		if !call.isError && res.StructuredContent == nil {
			t.Fatalf("read %v: no structuredContent", call.args)
		}
	}
	if len(seen) != 2 {
		t.Fatalf("%d tool results seen, want 2", len(seen))
	}
	for _, r := range seen {
		if _, ok := r.(*mcp.CallToolResult); ok {
			t.Fatal("a tool result reached the jsonrpc layer as the SDK's type, to be written by its MarshalJSON")
		}
		res, ok := mcpserver.ToolResult(r)
		if !ok || res.Meta[mcpserver.MetaRequestTag] == nil || len(res.Content) == 0 {
			t.Fatalf("ToolResult(%T) = %+v, %v", r, res, ok)
		}
	}
	direct := &mcp.CallToolResult{}
	if res, ok := mcpserver.ToolResult(direct); !ok || res != direct {
		t.Fatalf("ToolResult of the SDK's own type = %p, %v", res, ok)
	}
	if _, ok := mcpserver.ToolResult(&mcp.ListToolsResult{}); ok {
		t.Fatal("ToolResult accepted a tools/list result")
	}
}
