// Package bench measures capfs beside its peers on the same workloads, in one run:
// the memory backend (through the raw vfs.Backend SPI and through a dir.Dir, with its
// revocation, policy and audit path) beside afero's MemMapFs and go-billy's memfs;
// and the physical backend (each resolver, and through a dir.Dir) beside plain os,
// os.Root and afero's BasePathFs over OsFs, on a host directory (HostWorkloads).
//
// The workloads are ordinary functions over a small Target interface, so the
// benchmarks in this package's tests (go test -bench . ./bench) and the table program
// (go run ./bench/cmd/benchtable) run exactly the same code. Each workload checks what
// it reads (sizes, entry counts), so a target that silently does less work fails
// instead of looking fast.
//
// What it does not measure: concurrency (every workload is single-goroutine),
// persistence, or the cost of the host's policy rules beyond the default ones. The
// figures are wall-clock times from testing.Benchmark on whatever machine runs them;
// only the ratios between columns of one run are meaningful.
package bench

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// Target is the filesystem surface the workloads use. Paths are slash-separated and
// relative to the target's root.
type Target interface {
	// Create creates or truncates name for writing.
	Create(name string) (io.WriteCloser, error)
	// Append opens name for appending, creating it if missing.
	Append(name string) (io.WriteCloser, error)
	// Open opens name for reading.
	Open(name string) (io.ReadCloser, error)
	// Stat returns the size of name.
	Stat(name string) (int64, error)
	// ReadDir returns the number of entries of directory name, listed sorted.
	ReadDir(name string) (int, error)
	// Mkdir creates directory name; its parent exists.
	Mkdir(name string) error
}

// Impl is one implementation under test.
type Impl struct {
	Name string        // column name
	New  func() Target // a new, empty filesystem
}

// Workload is one measured job. One benchmark iteration runs the whole job once.
type Workload struct {
	Name string
	// Ops is the number of operations one iteration performs, for per-op figures.
	Ops int
	// Run runs b.N iterations against filesystems made by newTarget.
	Run func(b *testing.B, newTarget func() Target)
}

// Sizes of the workloads.
const (
	NumFiles    = 10_000
	FileSize    = 4 << 10
	BigFileSize = 64 << 20
	AppendSize  = 64 << 10
	Depth       = 16
)

var (
	fileNames = func() []string {
		n := make([]string, NumFiles)
		for i := range n {
			n[i] = fmt.Sprintf("files/f%05d", i)
		}
		return n
	}()
	fileData   = pattern(FileSize)
	appendData = pattern(AppendSize)
	deepDirs   = func() []string {
		var d []string
		p := ""
		for i := 0; i < Depth; i++ {
			if p != "" {
				p += "/"
			}
			p += fmt.Sprintf("d%02d", i)
			d = append(d, p)
		}
		return d
	}()
	deepFile = deepDirs[len(deepDirs)-1] + "/leaf"
)

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// Workloads returns the workloads in table order.
func Workloads() []Workload {
	return []Workload{
		{Name: "create+write 10,000 × 4 KiB", Ops: NumFiles, Run: createWrite},
		{Name: "read back 10,000 × 4 KiB", Ops: NumFiles, Run: readBack},
		{Name: "stat 10,000 files", Ops: NumFiles, Run: statFiles},
		{Name: "ReadDir of 10,000 entries", Ops: 1, Run: readDir},
		{Name: "64 MiB as 64 KiB appends", Ops: BigFileSize / AppendSize, Run: appendBig},
		{Name: "stat 16 directories deep", Ops: 1, Run: deepStat},
	}
}

func must(b *testing.B, err error) {
	if err != nil {
		b.Helper()
		b.Fatal(err)
	}
}

func writeOne(t Target, name string, data []byte) error {
	w, err := t.Create(name)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// populate returns a target holding the 10,000 files.
func populate(b *testing.B, newTarget func() Target) Target {
	t := newTarget()
	must(b, t.Mkdir("files"))
	for _, n := range fileNames {
		must(b, writeOne(t, n, fileData))
	}
	return t
}

func createWrite(b *testing.B, newTarget func() Target) {
	b.SetBytes(NumFiles * FileSize)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		t := newTarget()
		must(b, t.Mkdir("files"))
		b.StartTimer()
		for _, n := range fileNames {
			if err := writeOne(t, n, fileData); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func readBack(b *testing.B, newTarget func() Target) {
	t := populate(b, newTarget)
	buf := make([]byte, FileSize+1)
	b.SetBytes(NumFiles * FileSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, n := range fileNames {
			r, err := t.Open(n)
			if err != nil {
				b.Fatal(err)
			}
			got, err := io.ReadFull(r, buf)
			if got != FileSize || err != io.ErrUnexpectedEOF {
				b.Fatalf("read %s: %d bytes, %v", n, got, err)
			}
			r.Close()
		}
	}
}

func statFiles(b *testing.B, newTarget func() Target) {
	t := populate(b, newTarget)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, n := range fileNames {
			size, err := t.Stat(n)
			if err != nil || size != FileSize {
				b.Fatalf("stat %s: %d, %v", n, size, err)
			}
		}
	}
}

func readDir(b *testing.B, newTarget func() Target) {
	t := populate(b, newTarget)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n, err := t.ReadDir("files")
		if err != nil || n != NumFiles {
			b.Fatalf("readdir: %d entries, %v", n, err)
		}
	}
}

func appendBig(b *testing.B, newTarget func() Target) {
	b.SetBytes(BigFileSize)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		t := newTarget()
		b.StartTimer()
		w, err := t.Append("big")
		must(b, err)
		for off := 0; off < BigFileSize; off += AppendSize {
			if _, err := w.Write(appendData); err != nil {
				b.Fatal(err)
			}
		}
		must(b, w.Close())
		b.StopTimer()
		size, err := t.Stat("big")
		if err != nil || size != BigFileSize {
			b.Fatalf("big file: %d bytes, %v", size, err)
		}
		b.StartTimer()
	}
}

func deepStat(b *testing.B, newTarget func() Target) {
	t := newTarget()
	for _, d := range deepDirs {
		must(b, t.Mkdir(d))
	}
	must(b, writeOne(t, deepFile, fileData[:10]))
	if strings.Count(deepFile, "/") != Depth {
		b.Fatalf("deep path %q is not %d directories deep", deepFile, Depth)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		size, err := t.Stat(deepFile)
		if err != nil || size != 10 {
			b.Fatalf("stat deep: %d, %v", size, err)
		}
	}
}
