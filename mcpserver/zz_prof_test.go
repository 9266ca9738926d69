package mcpserver_test

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/mcpserver"
	"github.com/capfs/capfs/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func BenchmarkZZList(b *testing.B) {
	src := filepath.Join(runtime.GOROOT(), "src")
	pb, err := physical.New(src)
	if err != nil {
		b.Fatal(err)
	}
	d, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
	srv := mcpserver.New(d, mcpserver.Options{})
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, _ := srv.Connect(ctx, st, nil)
	defer ss.Close()
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, sizes := range []bool{false} {
		b.Run("names", func(b *testing.B) {
			for b.Loop() {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list", Arguments: map[string]any{"path": "cmd/go/testdata/script", "sizes": sizes}})
				if err != nil || res.IsError {
					b.Fatal(err)
				}
			}
		})
	}
}
