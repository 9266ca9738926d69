package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rawServer is `capfs mcp` driven line by line over stdio, as a client that
// writes JSON-RPC itself would drive it.
type rawServer struct {
	t     *testing.T
	srv   *capfsServer
	in    io.WriteCloser
	lines chan string // every line the server wrote, until it exits
	seen  []string    // lines read so far
}

type rpcReply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func startRaw(t *testing.T, dir string, args ...string) *rawServer {
	t.Helper()
	srv := startCapfs(t, dir, nil, append([]string{"mcp"}, args...)...)
	r := &rawServer{t: t, srv: srv, in: srv.stdin, lines: make(chan string, 1024)}
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(srv.stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { _ = srv.stdin.Close() }) // before startCapfs's: the server ends at EOF
	return r
}

func (r *rawServer) send(lines ...string) {
	r.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(r.in, l+"\n"); err != nil {
			r.t.Fatalf("writing to the server: %v", err)
		}
	}
}

// reply waits for the reply whose id is id (JSON text: `1`, `"a"`, `null`).
func (r *rawServer) reply(id string) rpcReply {
	r.t.Helper()
	for _, l := range r.seen {
		if rep, ok := matchID(l, id); ok {
			return rep
		}
	}
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				r.t.Fatalf("the server exited without answering id %s; it wrote:\n%s", id, strings.Join(r.seen, "\n"))
			}
			r.seen = append(r.seen, l)
			if rep, ok := matchID(l, id); ok {
				return rep
			}
		case <-timeout:
			r.t.Fatalf("no reply to id %s; the server wrote:\n%s", id, strings.Join(r.seen, "\n"))
		}
	}
}

func matchID(line, id string) (rpcReply, bool) {
	var rep rpcReply
	if json.Unmarshal([]byte(line), &rep) != nil {
		return rep, false
	}
	if id == "null" {
		return rep, rep.Error != nil && (len(rep.ID) == 0 || string(rep.ID) == "null")
	}
	return rep, string(rep.ID) == id
}

// drain closes the server's input and returns everything it wrote after
// that, and its exit code.
func (r *rawServer) drain() ([]string, int) {
	r.t.Helper()
	_ = r.in.Close()
	var rest []string
	for l := range r.lines {
		r.seen = append(r.seen, l)
		rest = append(rest, l)
	}
	code := r.srv.wait()
	if code < 0 {
		r.t.Fatal("the server did not return 20 s after its stdin closed")
	}
	return rest, code
}

const initLine = `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"%s","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func (r *rawServer) initialize(version string) {
	r.t.Helper()
	r.send(fmt.Sprintf(initLine, version))
	if rep := r.reply(`"init"`); rep.Error != nil {
		r.t.Fatalf("initialize: %+v", rep.Error)
	}
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

func callLine(id int, tool string, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
}

// toolResult is the part of a tools/call result the tests look at.
type toolResult struct {
	IsError bool           `json:"isError"`
	Meta    map[string]any `json:"_meta"`
	Content []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Data     string `json:"data"`
		MIMEType string `json:"mimeType"`
	} `json:"content"`
	Structured json.RawMessage `json:"structuredContent"`
}

func (r *rawServer) call(id int, tool, args string) toolResult {
	r.t.Helper()
	r.send(callLine(id, tool, args))
	rep := r.reply(fmt.Sprint(id))
	if rep.Error != nil {
		r.t.Fatalf("%s %s: JSON-RPC error %d %s", tool, args, rep.Error.Code, rep.Error.Message)
	}
	var tr toolResult
	if err := json.Unmarshal(rep.Result, &tr); err != nil {
		r.t.Fatal(err)
	}
	return tr
}

func (tr toolResult) text() string {
	var b strings.Builder
	for _, c := range tr.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// TestMCPConformanceStdio drives the protocol defects of issue 12 through a
// real `capfs mcp` over stdio, line by line.
func TestMCPConformanceStdio(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "hello\n"})
	for i := range 3000 {
		writeTree(t, root, map[string]string{fmt.Sprintf("many/d%02d/f%04d.txt", i%50, i): strings.Repeat("some text to search through\n", 20)})
	}
	r := startRaw(t, root, "-m", "p=physical:"+root)

	// Before initialize: a request gets a real error code, ping is answered.
	r.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if rep := r.reply("1"); rep.Error == nil || rep.Error.Code != -32600 || !strings.Contains(rep.Error.Message, "initialize") {
		t.Errorf("tools/list before initialize: %+v", rep.Error)
	}
	if rep := r.reply("2"); rep.Error != nil {
		t.Errorf("ping before initialize: %+v", rep.Error)
	}

	// A malformed line gets -32700 with a null id, and the server keeps serving.
	r.send(`this is not json`)
	if rep := r.reply("null"); rep.Error.Code != -32700 || string(rep.ID) != "null" {
		t.Errorf("parse error: %+v id %s", rep.Error, rep.ID)
	}
	r.send(`{"jsonrpc":"2.0","id":3}`, `[{"jsonrpc":"2.0","id":4,"method":"ping"}]`)
	if rep := r.reply("3"); rep.Error == nil || rep.Error.Code != -32600 {
		t.Errorf("invalid request: %+v", rep.Error)
	}
	if rep := r.reply("null"); rep.Error.Code != -32700 && rep.Error.Code != -32600 {
		t.Errorf("batch: %+v", rep.Error)
	}
	r.initialize("2025-11-25")

	// Only declared capabilities are answered.
	for i, m := range []string{"resources/list", "prompts/list", "logging/setLevel", "completion/complete", "resources/templates/list"} {
		id := 10 + i
		r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{}}`, id, m))
		if rep := r.reply(fmt.Sprint(id)); rep.Error == nil || rep.Error.Code != -32601 {
			t.Errorf("%s: want -32601, got %s %+v", m, rep.Result, rep.Error)
		}
	}

	// A cancelled request gets no reply; the next one does.
	r.send(callLine(20, "grep", `{"pattern":"never (found|here)","output_mode":"content"}`),
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":20,"reason":"test"}}`,
		`{"jsonrpc":"2.0","id":21,"method":"ping"}`)
	r.reply("21")

	// Replies in flight when stdin closes are all written before the exit.
	var ids []string
	for i := range 8 {
		id := 30 + i
		ids = append(ids, fmt.Sprint(id))
		r.send(callLine(id, "grep", `{"pattern":"search","output_mode":"count","path":"p/many"}`))
	}
	r.send(callLine(40, "read", `{"path":"p/a.txt"}`))
	ids = append(ids, "40")
	_, code := r.drain()
	if code != 0 {
		t.Errorf("exit status %d after EOF, want 0", code)
	}
	for _, id := range ids {
		found := false
		for _, l := range r.seen {
			if rep, ok := matchID(l, id); ok && rep.Error == nil {
				found = true
			}
		}
		if !found {
			t.Errorf("no reply to request %s in flight at EOF", id)
		}
	}
	for _, l := range r.seen {
		if _, ok := matchID(l, "20"); ok {
			t.Errorf("the cancelled request was answered: %s", l)
		}
	}
}

// TestMCPArgumentErrors: schema errors name the argument, the type and what
// was given (no Go type), as a tool error under 2025-11-25 and as -32602
// before; semantic argument errors are invalid_argument, never a path error.
func TestMCPArgumentErrors(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "hello\n"})
	r := startRaw(t, root, "-m", "p=physical:"+root)
	r.initialize("2025-11-25")
	cases := []struct{ args, want string }{
		{`{"path":"p/a.txt","offset":"x"}`, `argument "offset" must be an integer, got the string "x"`},
		{`{"path":"p/a.txt","offset":1.5}`, `argument "offset" must be an integer, got the non-integer number 1.5`},
		{`{"path":7}`, `argument "path" must be a string, got the number 7`},
		{`{}`, `missing required argument "path"`},
		{`{"path":"p/a.txt","bogus":1}`, `unknown argument "bogus"; this tool takes: path, offset, limit`},
		{`{"path":"p/a.txt","offset":-1}`, `argument "offset" must be a line number from 1, got -1`},
	}
	for i, c := range cases {
		tr := r.call(100+i, "read", c.args)
		text := tr.text()
		if !tr.IsError || tr.Meta["capfs/code"] != "invalid_argument" || !strings.Contains(text, c.want) {
			t.Errorf("read %s: error %v meta %v text %q, want %q", c.args, tr.IsError, tr.Meta, text, c.want)
		}
		for _, leak := range []string{"Go struct", "mcpserver.", "readIn", "validating", "invalid_path", "slash-separated"} {
			if strings.Contains(text, leak) {
				t.Errorf("read %s: the message says %q: %s", c.args, leak, text)
			}
		}
	}
	// Under an older protocol the same error is a JSON-RPC -32602.
	r2 := startRaw(t, root, "-m", "p=physical:"+root)
	r2.initialize("2025-06-18")
	r2.send(callLine(1, "read", `{"path":"p/a.txt","offset":"x"}`))
	if rep := r2.reply("1"); rep.Error == nil || rep.Error.Code != -32602 || !strings.Contains(rep.Error.Message, `argument "offset" must be an integer`) {
		t.Errorf("2025-06-18: want -32602 naming the argument, got %s %+v", rep.Result, rep.Error)
	}
	// An unknown tool is a protocol error in every version.
	r2.send(callLine(2, "nosuch", `{}`))
	if rep := r2.reply("2"); rep.Error == nil || rep.Error.Code != -32602 {
		t.Errorf("unknown tool: %+v", rep.Error)
	}
	// help is guidance for a model, not Go API text.
	help := r.call(200, "help", `{}`).text()
	for _, want := range []string{"invalid_argument", "list", "grep", "What is mounted"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	for _, goText := range []string{"func (", "*dir.Dir", "ctx context.Context", "ReadFile("} {
		if strings.Contains(help, goText) {
			t.Errorf("help shows Go API text %q", goText)
		}
	}
}

// TestMCPToolsDeclareSchemas: every tool has a title, an output schema and
// truthful annotations, every result has structuredContent; a read-only
// server lists no writing tool.
func TestMCPToolsDeclareSchemas(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "hello\n"})
	for _, ro := range []bool{false, true} {
		args := []string{"-m", "p=physical:" + root}
		if ro {
			args = append(args, "--read-only")
		}
		r := startRaw(t, root, args...)
		r.initialize("2025-11-25")
		r.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		rep := r.reply("1")
		var list struct {
			Tools []struct {
				Name         string          `json:"name"`
				Title        string          `json:"title"`
				OutputSchema json.RawMessage `json:"outputSchema"`
				Annotations  struct {
					ReadOnly    bool  `json:"readOnlyHint"`
					Destructive *bool `json:"destructiveHint"`
					Idempotent  bool  `json:"idempotentHint"`
				} `json:"annotations"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(rep.Result, &list); err != nil {
			t.Fatal(err)
		}
		writers := map[string]bool{"write": true, "append": true, "edit": true, "multi_edit": true, "apply_patch": true, "mkdir": true, "move": true, "copy": true, "remove": true, "extract_archive": true}
		for _, tool := range list.Tools {
			if tool.Title == "" || len(tool.OutputSchema) == 0 || tool.Annotations.Destructive == nil {
				t.Errorf("%s: title %q, outputSchema %s, destructiveHint %v", tool.Name, tool.Title, tool.OutputSchema, tool.Annotations.Destructive)
			}
			if writers[tool.Name] {
				if ro {
					t.Errorf("a read-only server lists %s", tool.Name)
				}
				if tool.Annotations.ReadOnly {
					t.Errorf("%s claims readOnlyHint", tool.Name)
				}
			} else if !tool.Annotations.ReadOnly || *tool.Annotations.Destructive {
				t.Errorf("%s: a reading tool without readOnlyHint", tool.Name)
			}
		}
		if tr := r.call(2, "list", `{"path":"p"}`); len(tr.Structured) == 0 || !strings.Contains(string(tr.Structured), `"name":"a.txt"`) {
			t.Errorf("list: structuredContent %s", tr.Structured)
		}
	}
}

// TestMCPContent: what read, tree and edit make of hidden files, non-UTF-8
// text, images and CRLF files.
func TestMCPContent(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	writeTree(t, root, map[string]string{
		"proj/.env":       "SECRET=1\n",
		"proj/latin1.txt": "caf\xe9\n",
		"proj/img.png":    string(png),
		"proj/crlf.txt":   "one\r\ntwo\r\nthree\r\n",
		"proj/ok.txt":     "fine\n",
	})
	r := startRaw(t, root, "-m", "p=physical:"+filepath.Join(root, "proj"))
	r.initialize("2025-11-25")

	tree := r.call(1, "tree", `{"path":"p"}`)
	list := r.call(2, "list", `{"path":"p"}`)
	if strings.Contains(tree.text(), "-1 bytes") || !strings.Contains(tree.text(), ".env (hidden") {
		t.Errorf("tree shows the secret as: %q", tree.text())
	}
	if !strings.Contains(list.text(), "[HIDDEN] .env") {
		t.Errorf("list shows the secret as: %q", list.text())
	}

	lat := r.call(3, "read", `{"path":"p/latin1.txt"}`)
	if !lat.IsError || lat.Meta["capfs/code"] != "not_supported" || !strings.Contains(lat.text(), "not valid UTF-8") || strings.Contains(lat.text(), "\uFFFD") {
		t.Errorf("non-UTF-8 read: %v %q", lat.IsError, lat.text())
	}

	img := r.call(4, "read", `{"path":"p/img.png"}`)
	if img.IsError || len(img.Content) < 1 || img.Content[0].Type != "image" || img.Content[0].MIMEType != "image/png" {
		t.Fatalf("read png: %+v", img)
	}
	if data, _ := base64Decode(img.Content[0].Data); !bytes.Equal(data, png) {
		t.Errorf("png data differs")
	}

	crlf := r.call(5, "read", `{"path":"p/crlf.txt"}`)
	if !strings.Contains(crlf.text(), "line endings: CRLF") || !strings.Contains(string(crlf.Structured), `"line_ending":"crlf"`) {
		t.Errorf("read crlf: %q %s", crlf.text(), crlf.Structured)
	}
	ed := r.call(6, "edit", `{"path":"p/crlf.txt","old_string":"one\ntwo\n","new_string":"ONE\nTWO\n"}`)
	if ed.IsError {
		t.Fatalf("edit across CRLF lines: %q", ed.text())
	}
	if got, _ := os.ReadFile(filepath.Join(root, "proj/crlf.txt")); string(got) != "ONE\r\nTWO\r\nthree\r\n" {
		t.Errorf("after the edit: %q", got)
	}
	miss := r.call(7, "edit", `{"path":"p/ok.txt","old_string":"fine line","new_string":"x"}`)
	if !miss.IsError || miss.Meta["capfs/code"] != "not_found" || !strings.Contains(miss.text(), "Nearest: line 1") || !strings.Contains(miss.text(), "column") {
		t.Errorf("near miss: %q", miss.text())
	}
}

// TestMCPConformanceHTTP: the HTTP transport refuses foreign origins
// whatever the Host, requires its Accept header, bounds bodies and expires
// sessions.
func TestMCPConformanceHTTP(t *testing.T) {
	t.Parallel()
	root := project(t)
	srv := startCapfs(t, root, nil, "-m", "p=physical:"+root, "mcp", "--http", "127.0.0.1:0", "--http-session-timeout", "2s")
	endpoint := srv.waitStderr(t, "http://")
	initBody := fmt.Sprintf(initLine, "2025-11-25")
	post := func(body string, hdr map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", endpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			if v == "" {
				req.Header.Del(k)
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := post(initBody, map[string]string{"Origin": "http://evil.example"}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Origin with a loopback Host: %s", resp.Status)
	}
	if resp := post(initBody, map[string]string{"Origin": "http://localhost:1"}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a loopback Origin on another port: %s", resp.Status)
	}
	if resp := post(initBody, map[string]string{"Accept": ""}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("POST without Accept: %s", resp.Status)
	}
	if resp := post(initBody, map[string]string{"Accept": "application/json"}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("POST accepting JSON only: %s", resp.Status)
	}
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":"` + strings.Repeat("a", 17<<20) + `"}}}`
	if resp := post(big, nil); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 17 MiB body: %s", resp.Status)
	}
	// Outside a session, only initialize (and ping) are served.
	resp := post(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, nil)
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"code":-32600`) || !strings.Contains(string(body), "initialize") {
		t.Errorf("tools/list outside a session: %s %s", resp.Status, body)
	}
	own := strings.TrimSuffix(endpoint, "/mcp")
	resp = post(initBody, map[string]string{"Origin": own})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("own Origin: %s", resp.Status)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("no session id")
	}
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	if resp := post(ping, map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}); resp.StatusCode != http.StatusOK {
		t.Errorf("ping in the session: %s", resp.Status)
	}
	time.Sleep(3500 * time.Millisecond)
	if resp := post(ping, map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("ping in an expired session: %s, want 404", resp.Status)
	}
}

func base64Decode(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

// TestMCPHTTPCancelled: over HTTP, a request the client cancels while it is in
// flight (notifications/cancelled, its own POST in the same session) gets no
// reply: its stream ends without one. A request not cancelled is answered.
func TestMCPHTTPCancelled(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	// A search that takes a while: 24 MiB of lines no literal narrows.
	line := strings.Repeat("abcd efgh ijkl mnop ", 4) + "\n"
	if err := os.WriteFile(filepath.Join(root, "big.txt"), bytes.Repeat([]byte(line), (24<<20)/len(line)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "small.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The binary, not in-process: the cancellation must reach a search that
	// is under way, which the race detector's instrumentation of the search
	// (in a -race test binary) would slow past the test's waits.
	cmd := exec.Command(capfsBinary(t), "-m", "p=physical:"+root, "mcp", "--http", "127.0.0.1:0")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	addr, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the server's address: %v (%q)", err, addr)
	}
	endpoint := strings.TrimSpace(addr[strings.Index(addr, "http://"):])
	sid := ""
	post := func(body string) (*http.Response, error) {
		req, _ := http.NewRequest("POST", endpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		return http.DefaultClient.Do(req)
	}
	body := func(body string) (int, string) {
		t.Helper()
		resp, err := post(body)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	resp, err := post(fmt.Sprintf(initLine, "2025-11-25"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if sid = resp.Header.Get("Mcp-Session-Id"); sid == "" {
		t.Fatal("no session id")
	}
	body(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	type reply struct {
		status int
		body   string
		err    error
	}
	slow := make(chan reply, 1)
	go func() {
		resp, err := post(callLine(5, "grep", `{"pattern":"[a-z]{5}[0-9]","output_mode":"count","path":"p"}`))
		if err != nil {
			slow <- reply{err: err}
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		slow <- reply{resp.StatusCode, string(data), err}
	}()
	time.Sleep(150 * time.Millisecond) // the call is under way
	if st, b := body(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"test"}}`); st != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d %s", st, b)
	}
	if st, b := body(`{"jsonrpc":"2.0","id":6,"method":"ping"}`); st != http.StatusOK || !strings.Contains(b, `"id":6`) {
		t.Fatalf("ping after the cancellation: %d %s", st, b)
	}
	select {
	case r := <-slow:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if strings.Contains(r.body, `"id":5`) {
			t.Errorf("the cancelled request was answered: %.300s", r.body)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("the cancelled request's stream did not end")
	}
	// A request not cancelled is answered through the same wrapper.
	if st, b := body(callLine(7, "grep", `{"pattern":"hello","path":"p"}`)); st != http.StatusOK || !strings.Contains(b, `"id":7`) || !strings.Contains(b, "small.txt") {
		t.Errorf("an uncancelled grep: %d %.300s", st, b)
	}
}
