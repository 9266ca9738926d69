package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxMessageBytes is the longest JSON-RPC message StdioTransport accepts
// when MaxMessageBytes is zero.
const DefaultMaxMessageBytes = 64 << 20

// StdioTransport is the MCP stdio transport (newline-delimited JSON-RPC 2.0
// messages) with the robustness the SDK's mcp.StdioTransport lacks. Use it in
// place of mcp.StdioTransport:
//
//   - A line that is not JSON gets a -32700 (parse error) reply with a null id,
//     a JSON array (a batch, which MCP does not have) or a JSON value that is
//     not a JSON-RPC 2.0 message gets -32600 (invalid request), and a line
//     longer than MaxMessageBytes gets -32600; in every case the server keeps
//     serving. (The SDK's transport ends the session on the first such line.)
//   - Before the client has sent initialize, only initialize, ping,
//     server/discover and requests that carry their protocol version in _meta
//     (the sessionless protocol of 2026-07-28) are passed on; any other request
//     gets -32600 saying to initialize first. (The SDK answers them with code 0.)
//   - When the input ends (EOF), the connection does not report the end until
//     every request read so far has been answered: replies still in flight are
//     written before the server exits. A request the server sends to the client
//     after that (roots/list, ...) fails at once instead of waiting for an
//     answer that cannot come.
//   - After notifications/cancelled for a request in flight, the request's
//     context is cancelled (by the SDK) and its reply, if the handler still
//     produces one, is not written, as the specification requires.
//   - A request id that is already in flight gets -32600; the first request
//     keeps its id.
//
// Writes are serialized, one message per line.
type StdioTransport struct {
	In  io.Reader // the client's messages (os.Stdin)
	Out io.Writer // the server's messages (os.Stdout)
	// MaxMessageBytes bounds one incoming message (DefaultMaxMessageBytes when
	// zero).
	MaxMessageBytes int
}

// Connect implements mcp.Transport.
func (t *StdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	limit := t.MaxMessageBytes
	if limit <= 0 {
		limit = DefaultMaxMessageBytes
	}
	c := &lineConn{
		out:      t.Out,
		limit:    limit,
		in:       make(chan jsonrpc.Message, 16),
		closed:   make(chan struct{}),
		changed:  make(chan struct{}, 1),
		pending:  map[jsonrpc.ID]bool{},
		outgoing: map[jsonrpc.ID]bool{},
	}
	go c.readLoop(t.In)
	return c, nil
}

// lineConn is the connection StdioTransport returns.
type lineConn struct {
	out   io.Writer
	limit int

	in      chan jsonrpc.Message // messages for the SDK; closed at EOF
	closed  chan struct{}        // closed by Close
	changed chan struct{}        // a reply was written or a call failed
	once    sync.Once
	wmu     sync.Mutex // serializes writes to out

	mu          sync.Mutex
	initialized bool
	eof         bool
	pending     map[jsonrpc.ID]bool // client requests passed on and not answered: true once cancelled
	outgoing    map[jsonrpc.ID]bool // server requests written and not answered
	failed      []jsonrpc.ID        // server requests to fail locally (written after EOF)
	writeErr    error
}

func (c *lineConn) SessionID() string { return "" }

func (c *lineConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *lineConn) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// readLoop reads lines until the input ends, answering the lines the SDK must
// not see and passing the others on.
func (c *lineConn) readLoop(r io.Reader) {
	defer close(c.in)
	br := bufio.NewReaderSize(r, 1<<20)
	var line []byte
	for {
		line = line[:0]
		tooLong := false
		var err error
		for {
			var frag []byte
			frag, err = br.ReadSlice('\n')
			if !tooLong {
				if len(line)+len(frag) > c.limit {
					tooLong = true
					line = line[:0]
				} else {
					line = append(line, frag...)
				}
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if tooLong {
			c.reply(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("message longer than %d bytes: ignored", c.limit))
		} else if msg := c.classify(bytes.TrimSpace(line)); msg != nil {
			select {
			case c.in <- msg:
			case <-c.closed:
				return
			}
		}
		if err != nil {
			c.mu.Lock()
			c.eof = true
			c.mu.Unlock()
			return
		}
	}
}

// classify decodes one line: it answers what must be answered here and returns
// the message to pass on (nil for none).
func (c *lineConn) classify(line []byte) jsonrpc.Message {
	if len(line) == 0 {
		return nil
	}
	if !json.Valid(line) {
		c.reply(jsonrpc.ID{}, jsonrpc.CodeParseError,
			"parse error: the line is not valid JSON; send one JSON-RPC message per line")
		return nil
	}
	if line[0] == '[' {
		c.reply(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not supported by MCP; send one message per line")
		return nil
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		c.reply(lineID(line), jsonrpc.CodeInvalidRequest,
			"invalid request: not a JSON-RPC 2.0 message (want jsonrpc \"2.0\", a method or a result/error, and an id that is a string or a number)")
		return nil
	}
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if !m.IsCall() {
			return c.notification(m)
		}
		return c.call(m)
	case *jsonrpc.Response:
		return c.response(line, m)
	}
	return msg
}

// notification passes notification m on, first marking the request a
// cancellation names cancelled, if it is in flight.
func (c *lineConn) notification(m *jsonrpc.Request) jsonrpc.Message {
	if m.Method != "notifications/cancelled" {
		return m
	}
	if id, ok := cancelledID(m.Params); ok {
		c.mu.Lock()
		if _, ok := c.pending[id]; ok {
			c.pending[id] = true
		}
		c.mu.Unlock()
	}
	return m
}

// cancelledID is the id of the request a notifications/cancelled names.
func cancelledID(params json.RawMessage) (jsonrpc.ID, bool) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	return id, err == nil
}

// call passes call m on and records it in flight, or answers it when it
// cannot be served (see admit).
func (c *lineConn) call(m *jsonrpc.Request) jsonrpc.Message {
	c.mu.Lock()
	if why := c.admit(m); why != "" {
		c.mu.Unlock()
		c.reply(m.ID, jsonrpc.CodeInvalidRequest, why)
		return nil
	}
	c.pending[m.ID] = false
	c.mu.Unlock()
	return m
}

// admit says why call m cannot be served ("" when it can): before
// initialize only initialize, ping, server/discover and sessionless calls
// are, and an id must not be in flight already. It records initialize.
// c.mu is held.
func (c *lineConn) admit(m *jsonrpc.Request) string {
	if !c.initialized {
		switch {
		case m.Method == "initialize":
			c.initialized = true
		case m.Method == "ping" || m.Method == "server/discover" || sessionless(m.Params):
		default:
			return fmt.Sprintf("%q before initialize: send initialize first (only initialize and ping are accepted before it)", m.Method)
		}
	}
	if _, dup := c.pending[m.ID]; dup {
		return "request id is already used by a request in flight; use a new id"
	}
	return ""
}

// response passes on a response to a request the server sent. A reply to
// nothing the server asked is dropped, never answered, but a message with
// neither method nor result nor error is answered as invalid.
func (c *lineConn) response(line []byte, m *jsonrpc.Response) jsonrpc.Message {
	c.mu.Lock()
	_, ours := c.outgoing[m.ID]
	delete(c.outgoing, m.ID)
	c.mu.Unlock()
	if ours {
		return m
	}
	var keys map[string]json.RawMessage
	_ = json.Unmarshal(line, &keys)
	_, hasResult := keys["result"]
	_, hasError := keys["error"]
	if !hasResult && !hasError {
		c.reply(m.ID, jsonrpc.CodeInvalidRequest, "invalid request: no method (a request needs one)")
	}
	// A reply to nothing the server asked is dropped, never answered.
	return nil
}

// sessionless reports whether request params carry a protocol version in
// _meta: such requests (protocol 2026-07-28) need no initialize.
func sessionless(params json.RawMessage) bool {
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	if len(params) == 0 || json.Unmarshal(params, &p) != nil {
		return false
	}
	_, ok := p.Meta[mcp.MetaKeyProtocolVersion]
	return ok
}

// lineID is the id of a line that is JSON but not a valid message, if it has a
// usable one.
func lineID(line []byte) jsonrpc.ID {
	var v struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(line, &v) == nil {
		if id, err := jsonrpc.MakeID(v.ID); err == nil {
			return id
		}
	}
	return jsonrpc.ID{}
}

// reply writes an error response produced by the transport itself.
// Without an id (one that could not be read), the reply's id is null, as
// JSON-RPC 2.0 requires.
func (c *lineConn) reply(id jsonrpc.ID, code int64, msg string) {
	if id.IsValid() {
		_ = c.write(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: msg}})
		return
	}
	data, err := json.Marshal(struct {
		V  string         `json:"jsonrpc"`
		ID *int           `json:"id"`
		E  *jsonrpc.Error `json:"error"`
	}{"2.0", nil, &jsonrpc.Error{Code: code, Message: msg}})
	if err == nil {
		_ = c.writeLine(append(data, '\n'))
	}
}

func (c *lineConn) write(msg jsonrpc.Message) error {
	data, err := encodeMessage(msg)
	if err != nil {
		return err
	}
	return c.writeLine(data)
}

// encodeMessage encodes msg as jsonrpc.EncodeMessage does, byte for byte, with
// the line's newline appended. A successful response with a numeric id, the
// bulk of what a server writes, is put together here, its result copied into
// the envelope as it is: the SDK builds every result with its JSON encoder
// (jsonrpc2.NewResponse), so it is already compact, valid JSON, and the SDK's
// own encoder would only copy it once more through encoding/json's compaction,
// a second pass over a result that can be megabytes long (a long listing, a
// grep). TestEncodeMessage holds the two to the same bytes.
func encodeMessage(msg jsonrpc.Message) ([]byte, error) {
	if r, ok := msg.(*jsonrpc.Response); ok && r.Error == nil && len(r.Result) > 0 {
		if id, ok := r.ID.Raw().(int64); ok {
			out := make([]byte, 0, len(r.Result)+48)
			out = append(out, `{"jsonrpc":"2.0","id":`...)
			out = strconv.AppendInt(out, id, 10)
			out = append(out, `,"result":`...)
			out = append(out, r.Result...)
			return append(out, '}', '\n'), nil
		}
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// writeLine writes one message, line ending included.
func (c *lineConn) writeLine(line []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.out.Write(line)
	if err != nil {
		c.mu.Lock()
		c.writeErr = err
		c.mu.Unlock()
		c.signal()
	}
	return err
}

// Read implements mcp.Connection. At the end of the input it returns io.EOF
// only once no request read is still unanswered.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m, ok := <-c.in:
		if ok {
			return m, nil
		}
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// The input has ended: wait for the replies in flight.
	for {
		c.mu.Lock()
		if len(c.failed) > 0 {
			id := c.failed[0]
			c.failed = c.failed[1:]
			c.mu.Unlock()
			return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
				Message: "the client closed its input: no answer can come"}}, nil
		}
		for id := range c.outgoing {
			delete(c.outgoing, id)
			c.mu.Unlock()
			return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
				Message: "the client closed its input: no answer can come"}}, nil
		}
		done := len(c.pending) == 0 || c.writeErr != nil
		c.mu.Unlock()
		if done {
			return nil, io.EOF
		}
		select {
		case <-c.changed:
		case <-c.closed:
			return nil, io.EOF
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Write implements mcp.Connection. The reply to a cancelled request is dropped.
func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		c.mu.Lock()
		cancelled, ok := c.pending[m.ID]
		delete(c.pending, m.ID)
		c.mu.Unlock()
		defer c.signal()
		if ok && cancelled {
			return nil
		}
	case *jsonrpc.Request:
		if m.IsCall() {
			c.mu.Lock()
			if c.eof {
				c.failed = append(c.failed, m.ID)
				c.mu.Unlock()
				c.signal()
				return nil
			}
			c.outgoing[m.ID] = true
			c.mu.Unlock()
		}
	}
	return c.write(msg)
}
