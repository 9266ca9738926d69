package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/mcpserver"
)

// MCPPattern is the regular expression the grep workloads search for: Go
// constructor declarations, a few hundred lines of GOROOT/src.
const MCPPattern = `func New[A-Z][a-zA-Z]*\(`

// MCPReadPath and MCPReadLines are what the read round trip asks for: the first
// 100 lines of io/io.go.
const (
	MCPReadPath  = "io/io.go"
	MCPReadLines = 100
)

// MCPFixture is what the MCP workloads (issue 6's benchmark) run on: a tree served
// read-only by capfs's MCP server (mcpserver.New over a physical backend and a
// dir.Dir with default options), reached by the SDK's client over in-memory
// transports, and the same tree for the peers.
type MCPFixture struct {
	Src string // the host directory served: $(go env GOROOT)/src
	// Lines and Files are what grep -rnIE and grep -rlIE find for MCPPattern:
	// every implementation must find the same.
	Lines, Files int

	session *mcp.ClientSession
	close   func()
}

// NewMCPFixture serves $(go env GOROOT)/src and counts what grep finds there.
func NewMCPFixture() (*MCPFixture, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOROOT: %w", err)
	}
	return mcpFixtureAt(filepath.Join(strings.TrimSpace(string(out)), "src"))
}

func mcpFixtureAt(src string) (*MCPFixture, error) {
	fx := &MCPFixture{Src: src}
	lines, err := grepCLI(src, "-rnIE")
	if err != nil {
		return nil, err
	}
	files, err := grepCLI(src, "-rlIE")
	if err != nil {
		return nil, err
	}
	fx.Lines, fx.Files = lines, files
	pb, err := physical.New(src)
	if err != nil {
		return nil, err
	}
	d, _ := dir.New(pb)
	srv := mcpserver.New(d.ReadOnly(), mcpserver.Options{})
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		pb.Close()
		return nil, err
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "capfs-bench", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		ss.Close()
		pb.Close()
		return nil, err
	}
	fx.session = cs
	fx.close = func() {
		cs.Close()
		ss.Wait()
		pb.Close()
	}
	return fx, nil
}

// Close ends the client session and the server.
func (fx *MCPFixture) Close() {
	if fx.close != nil {
		fx.close()
		fx.close = nil
	}
}

// grepCLI runs grep with flags for MCPPattern in src (byte semantics, LC_ALL=C)
// and returns the number of lines it prints.
func grepCLI(src, flags string) (int, error) {
	cmd := exec.Command("grep", flags, MCPPattern, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("grep %s: %w", flags, err)
	}
	return bytes.Count(out, []byte("\n")), nil
}

// MCPImpl is one way of doing an MCP workload: through capfs's server, or the
// peer it is measured against.
type MCPImpl struct {
	Name string
	Peer bool
	Run  func(b *testing.B, fx *MCPFixture)
}

// MCPWorkload is one MCP workload with its implementations, capfs's first.
type MCPWorkload struct {
	Name  string
	Impls []MCPImpl
}

// MCPWorkloads returns issue 6's benchmark: grep over the tree through the
// server (content and files_with_matches) beside grep -rn and grep -rl, and the
// latency of one read call beside reading the file directly.
func MCPWorkloads() []MCPWorkload {
	return []MCPWorkload{
		{Name: "grep -n " + MCPPattern, Impls: []MCPImpl{
			{Name: "MCP grep, output_mode content", Run: mcpGrepContent},
			{Name: "grep -rnIE", Peer: true, Run: func(b *testing.B, fx *MCPFixture) { grepPeer(b, fx, "-rnIE", fx.Lines) }},
		}},
		{Name: "grep -l " + MCPPattern, Impls: []MCPImpl{
			{Name: "MCP grep, output_mode files_with_matches", Run: mcpGrepFiles},
			{Name: "grep -rlIE", Peer: true, Run: func(b *testing.B, fx *MCPFixture) { grepPeer(b, fx, "-rlIE", fx.Files) }},
		}},
		{Name: fmt.Sprintf("read %d lines of %s", MCPReadLines, MCPReadPath), Impls: []MCPImpl{
			{Name: "MCP read round trip", Run: mcpRead},
			{Name: "os.ReadFile (no server, the floor)", Peer: true, Run: osRead},
		}},
	}
}

// call makes one tool call and returns its text, failing on a tool error.
func (fx *MCPFixture) call(b *testing.B, name string, args map[string]any) string {
	res, err := fx.session.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		b.Fatal(err)
	}
	if len(res.Content) == 0 {
		b.Fatalf("%s: empty result", name)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok || res.IsError {
		b.Fatalf("%s: error result %+v", name, res.Content[0])
	}
	return tc.Text
}

// grepLine is a line of grep's content output: path:line:text.
var grepLine = regexp.MustCompile(`(?m)^[^:\n]+:[0-9]+:`)

func mcpGrepContent(b *testing.B, fx *MCPFixture) {
	for i := 0; i < b.N; i++ {
		out := fx.call(b, "grep", map[string]any{"pattern": MCPPattern, "output_mode": "content", "head_limit": 1 << 20})
		if i == 0 {
			if n := len(grepLine.FindAllStringIndex(out, -1)); n != fx.Lines {
				b.Fatalf("MCP grep: %d matching lines, grep -rn %d:\n%.2000s", n, fx.Lines, out)
			}
		}
	}
}

func mcpGrepFiles(b *testing.B, fx *MCPFixture) {
	for i := 0; i < b.N; i++ {
		out := fx.call(b, "grep", map[string]any{"pattern": MCPPattern, "output_mode": "files_with_matches", "head_limit": 1 << 20})
		if i == 0 {
			n := 0 // one path a line, then notes in parentheses
			for _, l := range strings.Split(out, "\n") {
				if l != "" && !strings.HasPrefix(l, "(") {
					n++
				}
			}
			if n != fx.Files {
				b.Fatalf("MCP grep: %d files, grep -rl %d:\n%.2000s", n, fx.Files, out)
			}
		}
	}
}

func grepPeer(b *testing.B, fx *MCPFixture, flags string, want int) {
	for i := 0; i < b.N; i++ {
		n, err := grepCLI(fx.Src, flags)
		if err != nil || n != want {
			b.Fatalf("grep %s: %d lines (want %d), %v", flags, n, want, err)
		}
	}
}

func mcpRead(b *testing.B, fx *MCPFixture) {
	for i := 0; i < b.N; i++ {
		out := fx.call(b, "read", map[string]any{"path": MCPReadPath, "limit": MCPReadLines})
		if i == 0 && strings.Count(out, "\n") < MCPReadLines-1 {
			b.Fatalf("MCP read: %d lines:\n%.500s", strings.Count(out, "\n"), out)
		}
	}
}

func osRead(b *testing.B, fx *MCPFixture) {
	p := filepath.Join(fx.Src, filepath.FromSlash(MCPReadPath))
	for i := 0; i < b.N; i++ {
		data, err := os.ReadFile(p)
		if err != nil || bytes.Count(data, []byte("\n")) < MCPReadLines {
			b.Fatalf("read %s: %d bytes, %v", p, len(data), err)
		}
	}
}
