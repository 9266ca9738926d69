package bench

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
)

// TestHostTargets checks that every host-directory implementation does the same
// work on the same tree, so the benchmarks compare equal work: it reads the same
// bytes, sees the same sizes and listings, and leaves the same files on disk.
func TestHostTargets(t *testing.T) {
	impls := HostImpls()
	if len(impls) < len(HostPeers())+1 {
		t.Fatalf("only %d implementations: the physical backend is missing", len(impls))
	}
	for _, im := range impls {
		t.Run(im.Name, func(t *testing.T) {
			root := t.TempDir()
			for _, setup := range []func(string) error{setupFiles, setupCreate, setupList, setupRename} {
				if err := setup(root); err != nil {
					t.Fatal(err)
				}
			}
			tg, err := im.New(root)
			if err != nil {
				t.Fatal(err)
			}
			defer tg.Close()
			if strings.Count(DeepFile, "/") != DeepDepth-1 || strings.Contains(ShallowFile, "/") {
				t.Fatalf("depths: %q, %q", ShallowFile, DeepFile)
			}
			buf := make([]byte, FileSize+1)
			for _, name := range []string{ShallowFile, DeepFile} {
				clear(buf)
				if n, err := readOnce(tg, name, buf); n != FileSize || err != nil || !bytes.Equal(buf[:n], fileData) {
					t.Fatalf("read %s: %d bytes, %v", name, n, err)
				}
				if size, err := tg.Stat(name); size != FileSize || err != nil {
					t.Fatalf("stat %s: %d, %v", name, size, err)
				}
			}
			if _, err := tg.Stat("missing"); err == nil {
				t.Fatal("stat of a missing file succeeded")
			}
			if n, err := tg.ReadDir("list"); n != ListSize || err != nil {
				t.Fatalf("readdir: %d, %v", n, err)
			}
			if im.ReadOnly {
				if err := createOnce(tg, "w/new", fileData); err == nil {
					t.Fatal("a read-only target created a file")
				}
				return
			}
			// Create makes a new file with the data, and truncates an existing one.
			if err := createOnce(tg, "w/new", fileData); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(host(root, "w/new")); err != nil || !bytes.Equal(got, fileData) {
				t.Fatalf("created file holds %d bytes, %v", len(got), err)
			}
			if err := createOnce(tg, "w/new", fileData[:10]); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(host(root, "w/new")); err != nil || !bytes.Equal(got, fileData[:10]) {
				t.Fatalf("recreated file holds %d bytes, %v", len(got), err)
			}
			if n, err := tg.ReadDir("list"); n != ListSize || err != nil {
				t.Fatalf("readdir: %d, %v", n, err)
			}
			if err := tg.Rename("r/a", "r/b"); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(host(root, "r/a")); !os.IsNotExist(err) {
				t.Fatalf("r/a after rename: %v", err)
			}
			if err := tg.Rename("r/b", "r/a"); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(host(root, "r/a")); err != nil || !bytes.Equal(got, fileData) {
				t.Fatalf("r/a after renaming back: %d bytes, %v", len(got), err)
			}
		})
	}
}

// TestHostWorkloads runs every host-directory workload once on every
// implementation it applies to: each checks what it reads and writes, so a
// failure here is a workload or adapter that does not do the work.
func TestHostWorkloads(t *testing.T) {
	if testing.Short() {
		t.Skip("sets up every workload's tree for every implementation")
	}
	bt := flag.Lookup("test.benchtime")
	old := bt.Value.String()
	if err := flag.Set("test.benchtime", "1x"); err != nil {
		t.Fatal(err)
	}
	defer flag.Set("test.benchtime", old)
	for _, w := range HostWorkloads() {
		root, err := w.Setup()
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(root)
		for _, im := range HostImpls() {
			if im.Layered && !w.Layered {
				continue
			}
			// Twice: the second run finds the directory as the first found it.
			for range 2 {
				r := testing.Benchmark(func(b *testing.B) { w.Run(b, im, root) })
				if r.N != 1 {
					t.Errorf("%s on %s: ran %d operations, not 1 (it failed: go test -bench Host ./bench shows why)", w.Name, im.Name, r.N)
				}
			}
		}
	}
}

// BenchmarkHost runs every host-directory workload on every implementation:
// go test -bench Host ./bench (the table: go run ./bench/cmd/benchtable -only physical).
func BenchmarkHost(b *testing.B) {
	for _, w := range HostWorkloads() {
		b.Run(benchName(w.Name), func(b *testing.B) {
			root, err := w.Setup()
			must(b, err)
			defer os.RemoveAll(root)
			for _, im := range HostImpls() {
				if im.Layered && !w.Layered {
					continue
				}
				b.Run(strings.ReplaceAll(im.Name, " ", "_"), func(b *testing.B) {
					b.ReportAllocs()
					w.Run(b, im, root)
				})
			}
		})
	}
}
