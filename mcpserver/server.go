package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/internal/termsafe"
	"github.com/capfs/capfs/vfs"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Default limits, used when the matching Options field is zero.
const (
	// DefaultMaxReadBytes is the most text one read or read_many call returns.
	DefaultMaxReadBytes = 256 << 10
	// DefaultLineWidth is the longest line read and grep show before cutting it.
	DefaultLineWidth = 2000
	// DefaultReadLines is how many lines read returns when no limit is given.
	DefaultReadLines = 2000
	// DefaultHeadLimit is how many results grep, glob and tree return when the
	// caller gives no head_limit.
	DefaultHeadLimit = 250
	// DefaultTreeDepth is how deep tree descends when no depth is given.
	DefaultTreeDepth = 3
	// DefaultMaxMediaBytes is the largest image or audio file returned.
	DefaultMaxMediaBytes = 5 << 20
)

// MountInfo describes one mount for the mounts tool.
type MountInfo struct {
	Path     string `json:"path"`             // guest path of the mount point ("/" for the root)
	Backend  string `json:"backend"`          // the kind of storage ("memory", "host", "git", ...)
	Source   string `json:"source,omitempty"` // what it serves, as the host wants the guest to see it
	ReadOnly bool   `json:"read_only"`        // writes under it fail with read_only
	Note     string `json:"note,omitempty"`   // anything else worth telling the guest
}

// Options configure New. The zero value is usable.
type Options struct {
	// Name and Version identify the server to clients (default "capfs", "dev").
	Name, Version string
	// Instructions are sent to clients at initialization; the default explains the
	// path rules in two sentences.
	Instructions string
	// Mounts reports the namespace's mounts for the mounts tool; nil reports a single
	// mount at "/" described by the root Dir alone.
	Mounts func() []MountInfo
	// MaxReadBytes caps the text one read or read_many call returns
	// (DefaultMaxReadBytes when zero).
	MaxReadBytes int
	// LineWidth is the longest line read and grep show; longer lines are cut and
	// marked (DefaultLineWidth when zero).
	LineWidth int
	// ReadLines is how many lines read returns without a limit (DefaultReadLines).
	ReadLines int
	// HeadLimit is the default head_limit of grep, glob and tree (DefaultHeadLimit).
	HeadLimit int
	// MaxMediaBytes caps the image or audio file read and read_media return
	// (DefaultMaxMediaBytes when zero).
	MaxMediaBytes int
	// MaxGrepFileBytes: grep skips larger files and reports them as skipped
	// (search.DefaultMaxFileSize when zero).
	MaxGrepFileBytes int64
	// Roots, if set, receives the client's roots (roots/list) once the session
	// is initialized and again whenever the client announces they changed
	// (notifications/roots/list_changed), if the client declared the roots
	// capability. It runs on a goroutine of its own; the host decides what to
	// make of them (capfs mcp --roots mounts them). A client without the
	// capability is never asked, and neither is a session on the sessionless
	// protocol (2026-07-28), which deprecates roots (SEP-2577) and lets a
	// server ask the client only within a tool call's input requests.
	//lint:ignore SA1019 roots are deprecated by SEP-2577 but still part of the session protocols capfs serves (issue 12 asks for them)
	Roots func(ctx context.Context, roots []*mcp.Root)
}

func (o *Options) defaults() {
	if o.Name == "" {
		o.Name = "capfs"
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Instructions == "" {
		o.Instructions = "Files are reached through a capfs capability: paths are slash-separated and " +
			"relative to its root (a leading / means that root, never the host's; .. cannot climb above it). " +
			"Errors carry a stable code (not_found, read_only, path_outside_sandbox, fs_permission_denied, ...); " +
			"call help for the full rules."
	}
	if o.MaxReadBytes <= 0 {
		o.MaxReadBytes = DefaultMaxReadBytes
	}
	if o.LineWidth <= 0 {
		o.LineWidth = DefaultLineWidth
	}
	if o.ReadLines <= 0 {
		o.ReadLines = DefaultReadLines
	}
	if o.HeadLimit <= 0 {
		o.HeadLimit = DefaultHeadLimit
	}
	if o.MaxMediaBytes <= 0 {
		o.MaxMediaBytes = DefaultMaxMediaBytes
	}
}

// MetaRequestTag is the key, in every tool result's _meta, of the request tag the
// call's audit events carry (audit.Event.Tag).
const MetaRequestTag = "capfs/request"

// MetaCode and MetaPath are the keys, in an error result's _meta, of the stable
// error code and the guest path it concerns.
const (
	MetaCode = "capfs/code"
	MetaPath = "capfs/path"
	// MetaHint is the key of the one-line hint saying what to do next.
	MetaHint = "capfs/hint"
)

type server struct {
	root       *dir.Dir
	opts       Options
	seq        atomic.Uint64
	rootsAsked sync.Map // *mcp.ServerSession -> true once its roots were asked for
}

// New returns an MCP server whose tools act on root. A Dir that can never write
// (root.IsReadOnly) gets only the reading tools. The server holds root and nothing
// else: revoking root's Control makes every tool fail with revoked.
//
// Tool results are written in one encoding pass (see oneEncode): receiving
// middleware added to the returned server sees a tools/call result as an
// mcp.Result of this package's own type, which embeds the *mcp.CallToolResult
// (its fields and methods are promoted; a type assertion to
// *mcp.CallToolResult fails: use ToolResult).
func New(root *dir.Dir, opts Options) *mcp.Server {
	opts.defaults()
	s := &server{root: root, opts: opts}
	so := &mcp.ServerOptions{Instructions: opts.Instructions, Capabilities: &mcp.ServerCapabilities{}}
	if opts.Roots != nil {
		so.InitializedHandler = func(_ context.Context, req *mcp.InitializedRequest) {
			if _, seen := s.rootsAsked.LoadOrStore(req.Session, true); !seen {
				go s.fetchRoots(req.Session)
			}
		}
		//lint:ignore SA1019 roots are deprecated by SEP-2577 but still part of the session protocols capfs serves (issue 12 asks for them)
		so.RootsListChangedHandler = func(_ context.Context, req *mcp.RootsListChangedRequest) { go s.fetchRoots(req.Session) }
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: opts.Version}, so)
	srv.AddReceivingMiddleware(oneEncode, declaredOnly)
	s.addReadTools(srv)
	if !root.IsReadOnly() {
		s.addWriteTools(srv)
	}
	return srv
}

// fetchRoots asks the client for its roots and hands them to Options.Roots.
// (It runs on its own goroutine: the handlers that start it run on the
// session's read loop, which must stay free to read the answer.)
func (s *server) fetchRoots(ss *mcp.ServerSession) {
	if ss == nil {
		return
	}
	ip := ss.InitializeParams()
	//lint:ignore SA1019 roots are deprecated by SEP-2577 but still part of the session protocols capfs serves (issue 12 asks for them)
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.RootsV2 == nil || ip.ProtocolVersion >= "2026-07-28" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	//lint:ignore SA1019 roots are deprecated by SEP-2577 but still part of the session protocols capfs serves (issue 12 asks for them)
	res, err := ss.ListRoots(ctx, nil)
	if err != nil || res == nil {
		return
	}
	s.opts.Roots(ctx, res.Roots)
}

// ReadOnlyTools and WriteTools are the names of the tools New registers: a
// read-only Dir gets ReadOnlyTools only. Callers must not modify them.
var (
	ReadOnlyTools = []string{"read", "read_many", "tail", "read_media", "list", "tree", "glob", "grep", "stat", "mounts", "help"}
	WriteTools    = []string{"write", "append", "edit", "multi_edit", "apply_patch", "mkdir", "move", "copy", "remove", "extract_archive"}
)

// toolFunc is a tool body: it returns its structured result (of the type the
// tool declares as its outputSchema), the text shown to the model, or an
// error.
type toolFunc[In, Out any] func(ctx context.Context, in In) (Out, string, error)

// contentful is a result that brings content of its own (an image, audio)
// before its text.
type contentful interface{ extraContent() []mcp.Content }

func boolp(b bool) *bool { return &b }

// kind says which annotations a tool gets.
type kind int

const (
	readOnly        kind = iota
	additive             // writes, never destroys: idempotent or not
	additiveIdem         // writes, never destroys, idempotent
	destructive          // may overwrite or delete
	destructiveIdem      // may overwrite or delete; repeating changes nothing more
)

func annotations(k kind, title string) *mcp.ToolAnnotations {
	a := &mcp.ToolAnnotations{OpenWorldHint: boolp(false), Title: title}
	switch k {
	case readOnly:
		a.ReadOnlyHint = true
		a.IdempotentHint = true
		a.DestructiveHint = boolp(false)
	case additive:
		a.DestructiveHint = boolp(false)
	case additiveIdem:
		a.DestructiveHint = boolp(false)
		a.IdempotentHint = true
	case destructive:
		a.DestructiveHint = boolp(true)
	case destructiveIdem:
		a.DestructiveHint = boolp(true)
		a.IdempotentHint = true
	}
	return a
}

// schemaFor is the JSON schema of a tool's input or output type.
func schemaFor[T any]() *jsonschema.Schema {
	sc, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: schema of %T: %v", *new(T), err))
	}
	return sc
}

// add registers one tool whose body is fn. The wrapper decodes the arguments
// itself (decodeArgs: messages a model can act on), tags the call for the
// audit log, and gives every result the same shape: text content,
// structuredContent, and _meta with the request tag (and, on error, the code).
func add[In, Out any](s *server, srv *mcp.Server, name, title, desc string, k kind, fn toolFunc[In, Out]) {
	tool := &mcp.Tool{Name: name, Title: title, Description: desc, Annotations: annotations(k, title),
		InputSchema: schemaFor[In](), OutputSchema: schemaFor[Out]()}
	srv.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tag := s.tag(req, name)
		var in In
		if err := decodeArgs(req.Params.Arguments, &in); err != nil {
			if legacyArgErrors(req) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: name + ": " + err.Error()}
			}
			return errorResult(tag, err), nil
		}
		ctx = audit.WithRequestTag(ctx, tag)
		out, text, err := fn(ctx, in)
		if err != nil {
			return errorResult(tag, err), nil
		}
		res := &mcp.CallToolResult{Meta: mcp.Meta{MetaRequestTag: tag}, StructuredContent: termsafe.ForJSONValue(out)}
		if c, ok := any(out).(contentful); ok {
			res.Content = c.extraContent()
		}
		res.Content = append(res.Content, &mcp.TextContent{Text: text})
		return res, nil
	})
}

// legacyArgErrors reports whether the session's protocol version predates
// 2025-11-25 (SEP-1303), under which invalid tool arguments are a JSON-RPC
// error (-32602) rather than a tool execution error.
func legacyArgErrors(req *mcp.CallToolRequest) bool {
	if req == nil || req.Session == nil {
		return false
	}
	ip := req.Session.InitializeParams()
	return ip != nil && ip.ProtocolVersion != "" && ip.ProtocolVersion < "2025-11-25"
}

// errorResult is the result of a failed call: isError, the text the model
// reads, and the code, path and hint in _meta.
func errorResult(tag string, err error) *mcp.CallToolResult {
	code, path := errorInfo(err)
	res := &mcp.CallToolResult{IsError: true, Meta: mcp.Meta{MetaRequestTag: tag, MetaCode: code}}
	if path != "" {
		res.Meta[MetaPath] = termsafe.ForJSON(path)
	}
	if h := hintFor(code, err); h != "" {
		res.Meta[MetaHint] = h
	}
	res.Content = []mcp.Content{&mcp.TextContent{Text: errorText(err)}}
	return res
}

// tag names one tool call: the session, the tool and a per-server sequence number.
func (s *server) tag(req *mcp.CallToolRequest, tool string) string {
	sid := ""
	if req != nil && req.Session != nil {
		sid = req.Session.ID()
	}
	if sid == "" {
		sid = "-"
	}
	return "mcp:" + sid + ":" + tool + "#" + strconv.FormatUint(s.seq.Add(1), 10)
}

// toolError builds an error of the server's own (not from the Dir): a stable code,
// the tool as op, the guest path.
func toolError(code vfs.Code, op, path, format string, args ...any) error {
	return &vfs.Error{Code: code, Op: op, Path: path, Err: fmt.Errorf(format, args...)}
}

func errorInfo(err error) (code, path string) {
	var ae *argError
	if errors.As(err, &ae) {
		return CodeInvalidArgument, ""
	}
	var ve *vfs.Error
	if errors.As(err, &ve) {
		if ve.Code == vfs.CodeInvalidPath && errors.Is(ve, syscall.EINVAL) {
			// EINVAL from the host on a path that passed the Dir's checks is a
			// race (an entry replaced during the call), not a bad path.
			return string(vfs.CodeConflict), ve.Path
		}
		return string(ve.Code), ve.Path
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return string(vfs.CodeCanceled), ""
	}
	return string(vfs.CodeIO), ""
}

// errorText is what the model reads: the code first, then the error (escaped:
// it quotes guest paths), then a hint.
func errorText(err error) string {
	code, _ := errorInfo(err)
	msg := "error " + code + ": " + esc(err.Error())
	if h := hintFor(code, err); h != "" {
		msg += "\n" + h
	}
	return msg
}

// hintFor is the one line telling the model what to do next.
func hintFor(code string, err error) string {
	if code == string(vfs.CodeConflict) && vfs.CodeOf(err) == vfs.CodeInvalidPath {
		return "The entry changed while the call ran (a concurrent rename or symlink swap); call again."
	}
	if code == string(vfs.CodeNotFound) && strings.Contains(err.Error(), "old_string occurs 0 times") {
		return "Read the lines again and copy old_string from them exactly."
	}
	return hints[vfs.Code(code)]
}

var hints = map[vfs.Code]string{
	CodeInvalidArgument: "Fix the argument named above and call again; the tool's input schema lists every argument and its type.",
	vfs.CodeNotFound:    "Check the path with list or glob; paths are relative to the root shown by mounts.",
	vfs.CodeExists:      "Choose another destination, or set overwrite (create_only off) to replace it.",
	vfs.CodeTooLarge:    "Read a smaller part (offset/limit, or tail) or narrow the search.",
	vfs.CodeIsDir:       "This is a directory: use list or tree.",
	vfs.CodeNotDir:      "A component of the path is a file, not a directory.",
	vfs.CodeQuota:       "The mount's quota is full: remove files or write less.",
	vfs.CodeCanceled:    "The call was cancelled.",
	vfs.CodeOutside:     "Paths are relative to the capability's root; \"..\" cannot climb above it and symlinks cannot lead out of it.",
	vfs.CodeReadOnly:    "This location cannot be written through this server.",
	vfs.CodeRevoked:     "Access has been revoked by the host; no tool will work any more.",
	vfs.CodePermission:  "The host's policy refuses this path; do not retry it under another name.",
	vfs.CodeInvalidPath: "Use a slash-separated path relative to the root, without NUL bytes or backslashes.",
}

// guard fails with revoked when the root is revoked; tools that touch no path
// (mounts, help) call it so that every tool fails once access is revoked. It is an
// ordinary, audited Dir call.
func (s *server) guard(ctx context.Context) error {
	if _, err := s.root.Stat(ctx, "/"); err != nil && vfs.CodeOf(err) == vfs.CodeRevoked {
		return err
	}
	return nil
}
