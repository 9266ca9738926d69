package bench

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// TestMCPWorkloads runs every implementation of every MCP workload once on a
// small tree: each checks what it finds against grep's counts (or the file's
// lines), so they all do the same work.
func TestMCPWorkloads(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{
		"io/io.go":     "package io\n\nfunc NewReader(r int) {}\n" + repeatLines(120),
		"a/b/c.go":     "package c\n\nfunc NewThing() {}\nfunc NewOther(x int) {}\n",
		"a/none.go":    "package a\n",
		"a/notes.txt":  "func NewText( in a text file\n",
		"a/x_test.go":  "package a\n",
		"bin/data.bin": "\x00\x01func NewBinary(\x00",
	}
	for name, data := range files {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fx, err := mcpFixtureAt(src, "a", "a", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	if fx.Lines != 4 || fx.Files != 3 {
		t.Fatalf("grep found %d lines in %d files", fx.Lines, fx.Files)
	}
	old := flag.Lookup("test.benchtime").Value.String()
	if err := flag.Set("test.benchtime", "1x"); err != nil {
		t.Fatal(err)
	}
	defer flag.Set("test.benchtime", old)
	for _, w := range MCPWorkloads() {
		peers := 0
		for _, im := range w.Impls {
			if im.Peer {
				peers++
			}
			t.Run(benchName(w.Name)+"/"+benchName(im.Name), func(t *testing.T) {
				r := testing.Benchmark(func(b *testing.B) { im.Run(b, fx) })
				if r.N == 0 {
					t.Fatalf("%s on %s failed", w.Name, im.Name)
				}
			})
		}
		if peers != 1 || w.Impls[0].Peer {
			t.Fatalf("%s: %d peers; capfs first", w.Name, peers)
		}
	}
}

func repeatLines(n int) string {
	var b []byte
	for i := 0; i < n; i++ {
		b = append(b, "// a line\n"...)
	}
	return string(b)
}

// BenchmarkMCP runs the MCP workloads on $(go env GOROOT)/src
// (CAPFS_BENCH_GOSRC=1 go test -run '^$' -bench MCP ./bench); the table program
// runs the same code: go run ./bench/cmd/benchtable -only mcp.
func BenchmarkMCP(b *testing.B) {
	needGoSrc(b)
	fx, err := NewMCPFixture()
	if err != nil {
		b.Fatal(err)
	}
	defer fx.Close()
	for _, w := range MCPWorkloads() {
		b.Run(benchName(w.Name), func(b *testing.B) {
			for _, im := range w.Impls {
				b.Run(benchName(im.Name), func(b *testing.B) { im.Run(b, fx) })
			}
		})
	}
}
