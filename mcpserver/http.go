package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
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
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	if opts.SessionTimeout < 0 {
		opts.SessionTimeout = 0
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	origins := make([]string, 0, len(opts.Origins))
	for _, o := range opts.Origins {
		origins = append(origins, strings.ToLower(strings.TrimSuffix(o, "/")))
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		SessionTimeout:      opts.SessionTimeout,
		MaxRequestBodyBytes: opts.MaxBodyBytes,
	})
	fl := &flights{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" {
			if !originAllowed(o, origins) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				data, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
					Message: fmt.Sprintf("origin %q is not allowed: this server accepts browser requests only from its own origin", o)}})
				_, _ = w.Write(data)
				return
			}
		}
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" && r.Body != nil {
			// A request outside a session must be initialize (or sessionless):
			// the SDK answers others with error code 0.
			data, err := io.ReadAll(io.LimitReader(r.Body, opts.MaxBodyBytes+1))
			r.Body.Close()
			if err != nil {
				http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
				return
			}
			if int64(len(data)) > opts.MaxBodyBytes {
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", opts.MaxBodyBytes), http.StatusRequestEntityTooLarge)
				return
			}
			if msg, err := jsonrpc.DecodeMessage(data); err == nil {
				if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && req.Method != "initialize" &&
					req.Method != "ping" && req.Method != "server/discover" && !sessionless(req.Params) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					out, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
						Message: fmt.Sprintf("%q outside a session: send initialize first (only initialize and ping are accepted before it)", req.Method)}})
					_, _ = w.Write(out)
					return
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(data))
			r.ContentLength = int64(len(data))
		}
		if sid := r.Header.Get("Mcp-Session-Id"); r.Method == http.MethodPost && sid != "" && r.Body != nil {
			data, err := io.ReadAll(io.LimitReader(r.Body, opts.MaxBodyBytes+1))
			r.Body.Close()
			if err != nil {
				http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(data))
			r.ContentLength = int64(len(data))
			if int64(len(data)) <= opts.MaxBodyBytes {
				if msg, err := jsonrpc.DecodeMessage(data); err == nil {
					if req, ok := msg.(*jsonrpc.Request); ok {
						switch {
						case req.IsCall():
							// Serve it through a writer that drops its reply once
							// the client has cancelled it.
							key := flightKey{sid, idKey(req.ID)}
							cw := &cancelWriter{ResponseWriter: w, id: req.ID}
							fl.start(key, &cw.cancelled)
							defer fl.end(key)
							w = cw
						case req.Method == "notifications/cancelled":
							// Marked before the SDK sees it (and cancels the
							// handler), so the reply the handler then returns is
							// the one dropped.
							var p struct {
								RequestID any `json:"requestId"`
							}
							if json.Unmarshal(req.Params, &p) == nil {
								if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
									fl.cancel(flightKey{sid, idKey(id)})
								}
							}
						}
					}
				}
			}
		}
		h.ServeHTTP(w, r)
	})
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
