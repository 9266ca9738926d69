package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// sdkLine is what the SDK's encoder makes of msg, as a line.
func sdkLine(t *testing.T, msg jsonrpc.Message) []byte {
	t.Helper()
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		t.Fatal(err)
	}
	return append(data, '\n')
}

// TestEncodeMessage: encodeMessage writes exactly the bytes the SDK's encoder
// writes, for responses it builds itself (numeric ids, results holding HTML
// characters, escapes, non-ASCII, nesting) and for every message it hands to
// the SDK (string ids, errors, requests, notifications).
func TestEncodeMessage(t *testing.T) {
	results := []string{
		`{}`, `[]`, `null`, `0`, `"x"`,
		`{"content":[{"type":"text","text":"a <b> & c\n\t\"q\" \\ é 😀 \u2028"}],"isError":false}`,
		`{"tools":[{"name":"read","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}]}`,
		`{"a":{"b":{"c":[1,2.5,-3e9,true,false,null]}}}`,
	}
	var msgs []jsonrpc.Message
	for _, id := range []any{float64(0), float64(1), float64(-7), float64(1 << 50), "abc", "<id>&"} {
		jid, err := jsonrpc.MakeID(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			msgs = append(msgs, &jsonrpc.Response{ID: jid, Result: json.RawMessage(r)})
		}
		msgs = append(msgs,
			&jsonrpc.Response{ID: jid, Error: &jsonrpc.Error{Code: -32602, Message: "bad <params> & more"}},
			&jsonrpc.Response{ID: jid, Error: errors.New("plain error")},
			&jsonrpc.Request{ID: jid, Method: "roots/list", Params: json.RawMessage(`{"a":1}`)},
		)
	}
	msgs = append(msgs, &jsonrpc.Request{Method: "notifications/progress", Params: json.RawMessage(`{"progress":1}`)})
	for _, m := range msgs {
		got, err := encodeMessage(m)
		if err != nil {
			t.Fatalf("encodeMessage(%#v): %v", m, err)
		}
		if want := sdkLine(t, m); !bytes.Equal(got, want) {
			t.Errorf("encodeMessage(%#v):\n got %s\nwant %s", m, got, want)
		}
	}
}

// TestStdioLinesAreTheSDKs drives a server over StdioTransport with real calls
// (initialize, tools/list, list, read, grep, tree, a bad call) and checks that
// every line it writes is what the SDK's own encoder writes for that message.
func TestStdioLinesAreTheSDKs(t *testing.T) {
	m := memory.New()
	d, _ := dir.New(m)
	ctx := context.Background()
	for i := range 40 {
		if err := d.MkdirAll(ctx, fmt.Sprintf("src/p%d", i%4)); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf("package p\n// <note> & \"quoted\" é %d\nfunc New%d() {}\n", i, i)
		if err := d.WriteFile(ctx, fmt.Sprintf("src/p%d/f%d.go", i%4, i), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := New(d, Options{})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- srv.Run(runCtx, &StdioTransport{In: inR, Out: outW})
		outW.Close()
	}()
	requests := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list","arguments":{"path":"src/p1"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read","arguments":{"path":"src/p2/f2.go"}}}`,
		`{"jsonrpc":"2.0","id":"s5","method":"tools/call","params":{"name":"grep","arguments":{"pattern":"note","output_mode":"content"}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"tree","arguments":{"path":"src"}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read","arguments":{"path":"missing"}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"no/such/method"}`,
	}
	go func() {
		for _, r := range requests {
			if _, err := io.WriteString(inW, r+"\n"); err != nil {
				return
			}
		}
		inW.Close()
	}()
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 16<<20)
	lines := 0
	for sc.Scan() {
		line := append(sc.Bytes(), '\n')
		msg, err := jsonrpc.DecodeMessage(sc.Bytes())
		if err != nil {
			t.Fatalf("the server wrote a line the SDK cannot decode: %v\n%s", err, line)
		}
		if want := sdkLine(t, msg); !bytes.Equal(line, want) {
			t.Errorf("line differs from the SDK's encoding:\n got %s\nwant %s", line, want)
		}
		lines++
	}
	if err := <-done; err != nil && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "EOF") {
		t.Logf("server ended: %v", err)
	}
	if lines != len(requests)-1 {
		t.Errorf("%d lines written; want %d (one reply per call)", lines, len(requests)-1)
	}
}
