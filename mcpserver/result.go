package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool results are written in one encoding pass.
//
// The SDK writes a *mcp.CallToolResult through its MarshalJSON, which marshals
// each content block through a MarshalJSON of its own; encoding/json
// re-validates and compacts every byte a MarshalJSON returns, so a result's
// text is scanned byte by byte twice and the whole result once more after it
// was written (for an 883-name list, about 0.2 ms of 0.4 ms spent in JSON).
// oneEncode swaps a tool's result, on its way out, for a wireResult: the same
// JSON object, built from plain structs that encoding/json writes by
// reflection alone, with no MarshalJSON to re-check.

// oneEncode is the receiving middleware that hands the SDK's jsonrpc layer a
// wireResult for each tools/call result it can express (text, image and audio
// content; no input requests), and every other result unchanged.
func oneEncode(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || method != "tools/call" {
			return res, err
		}
		if r, ok := res.(*mcp.CallToolResult); ok {
			if w := wireOf(r); w != nil {
				return w, nil
			}
		}
		return res, nil
	}
}

// wireResult is a CallToolResult in the shape the SDK writes it (its fields
// and their JSON names as in mcp.CallToolResult). It embeds the result it was
// made from, so it satisfies mcp.Result and keeps its methods, but not its
// MarshalJSON: noMarshal declares one at the same depth, which makes the
// name ambiguous, and an ambiguous method is not in wireResult's method set.
type wireResult struct {
	*mcp.CallToolResult `json:"-"`
	//lint:ignore U1000 used by being there: it hides the embedded MarshalJSON
	noMarshal `json:"-"`

	WireMeta          mcp.Meta `json:"_meta,omitempty"`
	WireContent       []any    `json:"content"`
	StructuredContent any      `json:"structuredContent,omitempty"`
	IsError           bool     `json:"isError,omitempty"`
}

// noMarshal hides the embedded result's MarshalJSON (see wireResult); its own
// is never called, for the same reason.
//
//lint:ignore U1000 see wireResult
type noMarshal struct{}

//lint:ignore U1000 see wireResult
func (noMarshal) MarshalJSON() ([]byte, error) { panic("mcpserver: unreachable") }

// textWire and mediaWire are the SDK's wire forms of text, image and audio
// content ("text" is always written, "data" always, as base64).
type textWire struct {
	Type        string           `json:"type"`
	Text        string           `json:"text"`
	Meta        mcp.Meta         `json:"_meta,omitempty"`
	Annotations *mcp.Annotations `json:"annotations,omitempty"`
}

type mediaWire struct {
	Type        string           `json:"type"`
	MIMEType    string           `json:"mimeType"`
	Data        []byte           `json:"data"`
	Meta        mcp.Meta         `json:"_meta,omitempty"`
	Annotations *mcp.Annotations `json:"annotations,omitempty"`
}

// wireOf is r as a wireResult, or nil when r holds something it does not
// express (other content, input requests), which the SDK then writes itself.
func wireOf(r *mcp.CallToolResult) *wireResult {
	if r == nil || r.NeedsInput() || r.InputRequests != nil || r.RequestState != "" {
		return nil
	}
	w := &wireResult{CallToolResult: r, WireMeta: r.Meta, StructuredContent: r.StructuredContent, IsError: r.IsError}
	if r.Content != nil {
		w.WireContent = make([]any, len(r.Content))
	}
	for i, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			w.WireContent[i] = textWire{Type: "text", Text: c.Text, Meta: c.Meta, Annotations: c.Annotations}
		case *mcp.ImageContent:
			w.WireContent[i] = mediaWire{Type: "image", MIMEType: c.MIMEType, Data: nonNil(c.Data), Meta: c.Meta, Annotations: c.Annotations}
		case *mcp.AudioContent:
			w.WireContent[i] = mediaWire{Type: "audio", MIMEType: c.MIMEType, Data: nonNil(c.Data), Meta: c.Meta, Annotations: c.Annotations}
		default:
			return nil
		}
	}
	return w
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// ToolResult returns the tool result r stands for, for receiving middleware
// added after New: r as the SDK's *mcp.CallToolResult, or the one this
// package's wire form of it embeds. ok is false for any other result.
func ToolResult(r mcp.Result) (res *mcp.CallToolResult, ok bool) {
	switch r := r.(type) {
	case *mcp.CallToolResult:
		return r, r != nil
	case *wireResult:
		return r.CallToolResult, r != nil && r.CallToolResult != nil
	}
	return nil, false
}
