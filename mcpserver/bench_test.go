package mcpserver_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// goSrc serves $GOROOT/src read-only through a physical backend, or skips.
func goSrc(b *testing.B) (*mcp.ClientSession, string) {
	b.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Skip("go env GOROOT:", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src")
	if _, err := os.Stat(filepath.Join(src, "go", "build")); err != nil {
		b.Skip("no Go source tree:", err)
	}
	fsys, err := physical.New(src)
	if err != nil {
		b.Fatal(err)
	}
	d, _ := dir.New(fsys)
	srv := mcpserver.New(d.ReadOnly(), mcpserver.Options{})
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs, src
}

const benchPattern = `func New[A-Z][a-zA-Z]*\(`

func benchCall(b *testing.B, cs *mcp.ClientSession, name string, args map[string]any) string {
	b.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		b.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		b.Fatal(text)
	}
	return text
}

// BenchmarkGrepGoSrc greps $GOROOT/src through the server (files_with_matches
// and content), beside grep -rlI and grep -rnI on the same tree.
func BenchmarkGrepGoSrc(b *testing.B) {
	cs, src := goSrc(b)
	for _, mode := range []string{"files_with_matches", "content"} {
		b.Run("capfs-mcp/"+mode, func(b *testing.B) {
			var out string
			for b.Loop() {
				out = benchCall(b, cs, "grep", map[string]any{"pattern": benchPattern, "output_mode": mode, "head_limit": 1 << 20})
			}
			b.ReportMetric(float64(strings.Count(out, "\n")), "lines")
		})
	}
	grep, err := exec.LookPath("grep")
	if err != nil {
		return
	}
	for mode, flag := range map[string]string{"files_with_matches": "-rlIE", "content": "-rnIE"} {
		b.Run("grep/"+mode, func(b *testing.B) {
			var out []byte
			for b.Loop() {
				cmd := exec.Command(grep, flag, benchPattern, ".")
				cmd.Dir = src
				cmd.Env = append(os.Environ(), "LC_ALL=C")
				out, _ = cmd.Output()
			}
			b.ReportMetric(float64(strings.Count(string(out), "\n")), "lines")
		})
	}
}

// BenchmarkReadRoundTrip is one read tool call (a 100-line file) through the SDK
// client and server over in-memory transports.
func BenchmarkReadRoundTrip(b *testing.B) {
	cs, _ := goSrc(b)
	for b.Loop() {
		benchCall(b, cs, "read", map[string]any{"path": "io/io.go", "limit": 100})
	}
}
