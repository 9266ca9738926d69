package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

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
