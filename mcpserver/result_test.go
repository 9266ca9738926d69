package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wireJSON is what the SDK's jsonrpc layer makes of a result: an Encoder
// without HTML escaping.
func wireJSON(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

func decodeAny(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v in %s", err, data)
	}
	return v
}

// TestWireResultIsTheSDKs: every result the tools make is written as the same
// JSON value the SDK writes for it, and decodes into the same
// mcp.CallToolResult on a client.
func TestWireResultIsTheSDKs(t *testing.T) {
	weird := "<a href=\"x\">&</a>\u2028\u2029\x00\x1b[31m\t\r\n\\ \xff\xfe é 𝄞 \u007f"
	results := map[string]*mcp.CallToolResult{
		"text": {Content: []mcp.Content{&mcp.TextContent{Text: "hello\n"}}},
		"awkward text": {Content: []mcp.Content{&mcp.TextContent{Text: weird}},
			StructuredContent: map[string]any{"name": weird, "n": 3}},
		"empty text":    {Content: []mcp.Content{&mcp.TextContent{}}},
		"no content":    {},
		"empty content": {Content: []mcp.Content{}},
		"meta and error": {IsError: true, Meta: mcp.Meta{MetaCode: "not_found", MetaPath: "a/b", MetaRequestTag: "s1/read/2"},
			Content: []mcp.Content{&mcp.TextContent{Text: "not found"}}},
		"annotated": {Content: []mcp.Content{&mcp.TextContent{Text: "t", Meta: mcp.Meta{"k": "v"},
			Annotations: &mcp.Annotations{Audience: []mcp.Role{"user"}, Priority: 0.5}}}},
		"image": {Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG\r\n\x1a\n")},
			&mcp.TextContent{Text: "a.png"}}},
		"empty image": {Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png"}}},
		"audio":       {Content: []mcp.Content{&mcp.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF")}}},
		"list result": {Content: []mcp.Content{&mcp.TextContent{Text: "[DIR]  a\n[FILE] b\n"}},
			StructuredContent: listOut{Path: ".", Entries: []listEntry{}, Names: []string{"a/", "b", weird}}},
	}
	for name, r := range results {
		t.Run(name, func(t *testing.T) {
			w := wireOf(r)
			if w == nil {
				t.Fatal("wireOf refused a result the tools make")
			}
			sdk, ours := wireJSON(t, r), wireJSON(t, w)
			if !reflect.DeepEqual(decodeAny(t, sdk), decodeAny(t, ours)) {
				t.Fatalf("different JSON values:\nSDK:  %s\nours: %s", sdk, ours)
			}
			var a, b mcp.CallToolResult
			if err := json.Unmarshal(sdk, &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(ours, &b); err != nil {
				t.Fatalf("a client cannot decode ours: %v\n%s", err, ours)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("a client decodes them differently:\nSDK:  %+v\nours: %+v", a, b)
			}
		})
	}
}

// TestWireResultLeavesTheRest: what wireResult does not express goes to the
// SDK unchanged, and a wireResult is never written by a MarshalJSON (which
// is what the type is for).
func TestWireResultLeavesTheRest(t *testing.T) {
	for name, r := range map[string]*mcp.CallToolResult{
		"resource link": {Content: []mcp.Content{&mcp.TextContent{Text: "x"}, &mcp.ResourceLink{URI: "file:///a", Name: "a"}}},
		"embedded":      {Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a", Text: "x"}}}},
		"request state": {Content: []mcp.Content{&mcp.TextContent{Text: "x"}}, RequestState: "s"},
		"nil":           nil,
	} {
		if w := wireOf(r); w != nil {
			t.Errorf("%s: wireOf made %+v", name, w)
		}
	}
	var w any = &wireResult{}
	if _, ok := w.(json.Marshaler); ok {
		t.Fatal("*wireResult has a MarshalJSON: encoding/json would call the SDK's and compact it again")
	}
	if _, ok := w.(mcp.Result); !ok {
		t.Fatal("*wireResult is not an mcp.Result")
	}
	r := &mcp.CallToolResult{Meta: mcp.Meta{"k": "v"}, Content: []mcp.Content{&mcp.TextContent{Text: "x"}}}
	if got := wireOf(r).GetMeta(); !reflect.DeepEqual(got, map[string]any{"k": "v"}) {
		t.Fatalf("GetMeta through the wire form: %v", got)
	}
}

// TestToolCallsAnswerWireResults: a tools/call through a server from New
// reaches the jsonrpc layer as a wireResult, other methods and refused
// results as the SDK made them.
func TestToolCallsAnswerWireResults(t *testing.T) {
	fsys := memory.New()
	d, _ := dir.New(fsys)
	ctx := context.Background()
	if err := d.WriteFile(ctx, "a.txt", []byte("<&>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var seen []mcp.Result
	srv := New(d, Options{})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "tools/call" {
				seen = append(seen, res)
			}
			return res, err
		}
	})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cs.Close(); ss.Wait() }()
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
		if res.Meta[MetaRequestTag] == nil || (call.isError && res.Meta[MetaCode] != "not_found") {
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
		if _, ok := r.(*wireResult); !ok {
			t.Fatalf("a tool result reached the jsonrpc layer as %T", r)
		}
		res, ok := ToolResult(r)
		if !ok || res.Meta[MetaRequestTag] == nil || len(res.Content) == 0 {
			t.Fatalf("ToolResult(%T) = %+v, %v", r, res, ok)
		}
	}
	direct := &mcp.CallToolResult{}
	if res, ok := ToolResult(direct); !ok || res != direct {
		t.Fatalf("ToolResult of the SDK's own type = %p, %v", res, ok)
	}
	if _, ok := ToolResult(&mcp.ListToolsResult{}); ok {
		t.Fatal("ToolResult accepted a tools/list result")
	}
}

// BenchmarkToolResultEncoding writes a names-only list result of 883 entries
// (the size of issue 12's benchmark directory) as the SDK's jsonrpc layer
// does: the result as the SDK marshals it, and its wireResult.
func BenchmarkToolResultEncoding(b *testing.B) {
	var entries []listEntry
	for i := range 883 {
		e := listEntry{Name: fmt.Sprintf("script_%04d_some_test_name.txt", i), Type: "file"}
		if i%50 == 0 {
			e.Type = "directory"
		}
		entries = append(entries, e)
	}
	out := listOut{Path: "cmd/go/testdata/script", Entries: []listEntry{}}
	for _, e := range entries {
		out.Names = append(out.Names, e.Name)
	}
	res := &mcp.CallToolResult{Meta: mcp.Meta{MetaRequestTag: "s1/list/1"}, StructuredContent: out,
		Content: []mcp.Content{&mcp.TextContent{Text: listText(entries, false, 0)}}}
	for name, v := range map[string]any{"sdk": res, "wire": wireOf(res)} {
		b.Run(name, func(b *testing.B) {
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				enc := json.NewEncoder(&buf)
				enc.SetEscapeHTML(false)
				if err := enc.Encode(v); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(buf.Len()))
		})
	}
}
