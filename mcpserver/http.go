package mcpserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of HTTPOptions.
const (
	DefaultSessionTimeout = 30 * time.Minute
	DefaultMaxBodyBytes   = 16 << 20
)

// HTTPOptions configure NewHTTPHandler.
type HTTPOptions struct {
	// Origins are the origins ("http://127.0.0.1:8765") a browser page may call
	// the server from: the server's own. A request whose Origin header is
	// present and not in Origins is refused with 403, whatever its Host.
	// Requests without an Origin header (non-browser clients) are served.
	Origins []string
	// SessionTimeout closes a session that received no request for this long
	// (DefaultSessionTimeout when zero; negative: never).
	SessionTimeout time.Duration
	// MaxBodyBytes bounds a request body; larger ones get 413
	// (DefaultMaxBodyBytes when zero).
	MaxBodyBytes int64
}

// OwnOrigins lists the origins under which a server listening on addr (a
// loopback host:port) can be reached: http://127.0.0.1:PORT,
// http://localhost:PORT and http://[::1]:PORT for a loopback address.
func OwnOrigins(addr net.Addr) []string {
	_, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return nil
	}
	out := []string{"http://" + addr.String()}
	for _, h := range []string{"127.0.0.1", "localhost", "[::1]"} {
		out = append(out, "http://"+h+":"+port)
	}
	return out
}

// NewHTTPHandler serves srv over the streamable HTTP transport (the SDK's
// mcp.StreamableHTTPHandler), adding what it leaves to the host:
//
//   - An Origin header that is not one of opts.Origins is refused with 403 even
//     when the Host header is loopback (the SDK only compares Host with the
//     listening address, which a DNS-rebinding page passes by sending its
//     own Origin with a loopback Host). The SDK's own Host check stays on.
//   - Sessions idle for opts.SessionTimeout are closed; a request naming an
//     expired session gets 404, as the transport specifies, so the client
//     starts a new one.
//   - Request bodies are bounded (413 past opts.MaxBodyBytes).
//   - A request the client cancelled (notifications/cancelled in the same
//     session) while it was in flight is not answered: its reply is dropped
//     from the request's stream, which then ends (the SDK would write it).
//   - A request outside a session (no Mcp-Session-Id) other than initialize,
//     ping, server/discover or a sessionless request (protocol version in
//     _meta) gets 400 with a JSON-RPC -32600 error saying to initialize first
//     (the SDK answers with error code 0).
//
// The SDK already requires the Accept header the transport defines (both
// application/json and text/event-stream on POST, text/event-stream on GET)
// and answers 400 without it; the conformance test checks it.
func NewHTTPHandler(srv *mcp.Server, opts HTTPOptions) http.Handler {
	opts = opts.withDefaults()
	origins := make([]string, 0, len(opts.Origins))
	for _, o := range opts.Origins {
		origins = append(origins, strings.ToLower(strings.TrimSuffix(o, "/")))
	}
	f := &httpFront{opts: opts, origins: origins}
	f.h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		SessionTimeout:      opts.SessionTimeout,
		MaxRequestBodyBytes: opts.MaxBodyBytes,
	})
	return http.HandlerFunc(f.serve)
}

// withDefaults fills in the defaults of unset options (a negative
// SessionTimeout: none).
func (opts HTTPOptions) withDefaults() HTTPOptions {
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	if opts.SessionTimeout < 0 {
		opts.SessionTimeout = 0
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return opts
}

// httpFront is what NewHTTPHandler adds in front of the SDK's handler h.
type httpFront struct {
	h       http.Handler
	opts    HTTPOptions
	origins []string // lower case, without a trailing slash
	fl      flights
}

// serve checks a request's origin and, for a POST, its body (see
// NewHTTPHandler), then passes it to the SDK.
func (f *httpFront) serve(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" && !originAllowed(o, f.origins) {
		writeInvalidRequest(w, http.StatusForbidden, jsonrpc.ID{},
			fmt.Sprintf("origin %q is not allowed: this server accepts browser requests only from its own origin", o))
		return
	}
	if r.Method == http.MethodPost && r.Body != nil {
		sid := r.Header.Get("Mcp-Session-Id")
		data, ok := f.readBody(w, r)
		if !ok {
			return
		}
		if sid == "" && !f.admitOutsideSession(w, data) {
			return
		}
		if sid != "" {
			var end func()
			if w, end = f.track(w, sid, data); end != nil {
				defer end()
			}
		}
	}
	f.h.ServeHTTP(w, r)
}

// readBody reads a POST's body (up to one byte past the limit), and puts it
// back for the SDK. A body that cannot be read gets 400.
func (f *httpFront) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	data, err := io.ReadAll(io.LimitReader(r.Body, f.opts.MaxBodyBytes+1))
	r.Body.Close()
	if err != nil {
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	r.ContentLength = int64(len(data))
	return data, true
}

// admitOutsideSession answers a request outside a session that is too large
// (413) or is not initialize, ping, server/discover or sessionless (400 with
// -32600: the SDK answers those with error code 0), and reports whether the
// SDK may have it.
func (f *httpFront) admitOutsideSession(w http.ResponseWriter, data []byte) bool {
	if int64(len(data)) > f.opts.MaxBodyBytes {
		http.Error(w, fmt.Sprintf("request body exceeds %d bytes", f.opts.MaxBodyBytes), http.StatusRequestEntityTooLarge)
		return false
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return true
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() || req.Method == "initialize" || req.Method == "ping" ||
		req.Method == "server/discover" || sessionless(req.Params) {
		return true
	}
	writeInvalidRequest(w, http.StatusBadRequest, req.ID,
		fmt.Sprintf("%q outside a session: send initialize first (only initialize and ping are accepted before it)", req.Method))
	return false
}

// track follows a request of session sid: a call is served through a writer
// that drops its reply once the client has cancelled it (end, when not nil,
// ends that once it is served); a cancellation marks its request before the
// SDK sees it (and cancels the handler), so the reply the handler then
// returns is the one dropped.
func (f *httpFront) track(w http.ResponseWriter, sid string, data []byte) (http.ResponseWriter, func()) {
	if int64(len(data)) > f.opts.MaxBodyBytes {
		return w, nil
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return w, nil
	}
	req, ok := msg.(*jsonrpc.Request)
	switch {
	case !ok:
	case req.IsCall():
		key := flightKey{sid, idKey(req.ID)}
		cw := &cancelWriter{ResponseWriter: w, id: req.ID}
		f.fl.start(key, &cw.cancelled)
		return cw, func() { f.fl.end(key) }
	case req.Method == "notifications/cancelled":
		if id, ok := cancelledID(req.Params); ok {
			f.fl.cancel(flightKey{sid, idKey(id)})
		}
	}
	return w, nil
}

// writeInvalidRequest answers with status and a JSON-RPC -32600 error
// (invalid request) to id saying msg.
func writeInvalidRequest(w http.ResponseWriter, status int, id jsonrpc.ID, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	data, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: msg}})
	_, _ = w.Write(data)
}

// flights are the requests in flight over HTTP, by session and request id,
// each with the flag its cancellation sets. (Over stdio, lineConn does this.)
type flights struct {
	mu sync.Mutex
	m  map[flightKey]*atomic.Bool
}

type flightKey struct{ session, id string }

func idKey(id jsonrpc.ID) string { return fmt.Sprintf("%T:%v", id.Raw(), id.Raw()) }

func (f *flights) start(k flightKey, flag *atomic.Bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[flightKey]*atomic.Bool{}
	}
	f.m[k] = flag
}

func (f *flights) end(k flightKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, k)
}

func (f *flights) cancel(k flightKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if flag := f.m[k]; flag != nil {
		flag.Store(true)
	}
}

// cancelWriter is the response writer of one request's POST. Once the client
// has cancelled the request (notifications/cancelled), the reply to it is not
// written: the SSE event (or JSON body) carrying a response with its id is
// dropped, and the stream ends without it, as the specification asks of a
// receiver of a cancellation ("SHOULD NOT send a response"; the issue makes
// it a must). Other events on the stream (progress notifications) pass.
type cancelWriter struct {
	http.ResponseWriter
	id        jsonrpc.ID
	cancelled atomic.Bool
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	if w.cancelled.Load() && w.isReply(p) {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// isReply reports whether p, one SSE event or a JSON body as the SDK writes
// them (each in one Write), carries the response to w.id.
func (w *cancelWriter) isReply(p []byte) bool {
	data := p
	if t := bytes.TrimSpace(p); len(t) == 0 || t[0] != '{' {
		data = nil
		for _, line := range bytes.Split(p, []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
			}
		}
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return false
	}
	resp, ok := msg.(*jsonrpc.Response)
	return ok && idKey(resp.ID) == idKey(w.id)
}

// Flush and Unwrap let the SDK flush each event through the wrapper.
func (w *cancelWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *cancelWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func originAllowed(o string, allowed []string) bool {
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return slices.Contains(allowed, strings.ToLower(u.Scheme+"://"+u.Host))
}

// declaredOnly is the receiving middleware that answers -32601 (method not
// found) to every request outside the capabilities the server declares: tools
// only. The SDK answers resources/list, prompts/list, logging/setLevel and
// completion/complete with empty results even when they are not declared.
func declaredOnly(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch {
		case method == "initialize", method == "ping", method == "server/discover",
			method == "tools/list", method == "tools/call", method == "subscriptions/listen",
			strings.HasPrefix(method, "notifications/"):
			return next(ctx, method, req)
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
			Message: fmt.Sprintf("method %q is not offered: this server declares only the tools capability (tools/list, tools/call)", method)}
	}
}
