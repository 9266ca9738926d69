package mcpserver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/mcpserver"
	"github.com/capfs/capfs/vfs"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixture is one server over a Dir, driven by the SDK's client in memory.
type fixture struct {
	t       *testing.T
	cs      *mcp.ClientSession
	root    *dir.Dir
	ctl     *dir.Control
	ring    *audit.Ring
	backend vfs.Backend
}

// connect serves d (New with opts) to a client over in-memory transports.
func connect(t *testing.T, d *dir.Dir, opts mcpserver.Options) *mcp.ClientSession {
	t.Helper()
	return serve(t, mcpserver.New(d, opts))
}

// serve connects a client to srv over in-memory transports.
func serve(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// newFixture serves a writable memory-backed Dir with an audit ring; files are
// created in it first (a name ending in "/" is a directory).
func newFixture(t *testing.T, files map[string]string, opts ...dir.Option) *fixture {
	t.Helper()
	ring := audit.NewRing(4096)
	m := memory.New()
	plain, _ := dir.New(m)
	populate(t, plain, files)
	d, ctl := dir.New(m, append([]dir.Option{dir.WithAudit(ring)}, opts...)...)
	return &fixture{t: t, cs: connect(t, d, mcpserver.Options{}), root: d, ctl: ctl, ring: ring, backend: m}
}

func populate(t *testing.T, d *dir.Dir, files map[string]string) {
	t.Helper()
	ctx := context.Background()
	for name, content := range files {
		if strings.HasSuffix(name, "/") {
			if err := d.MkdirAll(ctx, name); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if i := strings.LastIndex(name, "/"); i > 0 {
			if err := d.MkdirAll(ctx, name[:i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.WriteFile(ctx, name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// result is a tool call's outcome as a test looks at it.
type result struct {
	text  string
	isErr bool
	code  string
	path  string
	tag   string
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) result {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	var r result
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			r.text += tc.Text
		}
	}
	r.isErr = res.IsError
	if res.Meta != nil {
		r.code, _ = res.Meta[mcpserver.MetaCode].(string)
		r.path, _ = res.Meta[mcpserver.MetaPath].(string)
		r.tag, _ = res.Meta[mcpserver.MetaRequestTag].(string)
	}
	return r
}

func (f *fixture) call(name string, args any) result {
	f.t.Helper()
	return callTool(f.t, f.cs, name, args)
}

// ok calls a tool that must succeed and returns its text.
func (f *fixture) ok(name string, args any) string {
	f.t.Helper()
	r := f.call(name, args)
	if r.isErr {
		f.t.Fatalf("%s %v: unexpected error: %s", name, args, r.text)
	}
	return r.text
}

// fail calls a tool that must fail with code and returns the result.
func (f *fixture) fail(name string, args any, code string) result {
	f.t.Helper()
	return failWith(f.t, f.cs, name, args, code)
}

func failWith(t *testing.T, cs *mcp.ClientSession, name string, args any, code string) result {
	t.Helper()
	r := callTool(t, cs, name, args)
	if !r.isErr {
		t.Fatalf("%s %v: succeeded, want %s: %s", name, args, code, r.text)
	}
	if r.code != code {
		t.Fatalf("%s %v: code %q, want %q: %s", name, args, r.code, code, r.text)
	}
	if !strings.HasPrefix(r.text, "error "+code+":") {
		t.Fatalf("%s: error text does not start with the code: %q", name, r.text)
	}
	return r
}

func (f *fixture) content(name string) string {
	f.t.Helper()
	b, err := f.root.ReadFile(context.Background(), name)
	if err != nil {
		f.t.Fatalf("reading %s back: %v", name, err)
	}
	return string(b)
}

func (f *fixture) exists(name string) bool {
	f.t.Helper()
	ok, err := f.root.Exists(context.Background(), name)
	if err != nil {
		f.t.Fatal(err)
	}
	return ok
}

func mustContain(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Fatalf("output lacks %q:\n%s", w, got)
		}
	}
}

func mustNotContain(t *testing.T, got string, bads ...string) {
	t.Helper()
	for _, w := range bads {
		if strings.Contains(got, w) {
			t.Fatalf("output contains %q:\n%s", w, got)
		}
	}
}
