package gitree

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// benchRepo builds a packed repository of 20 directories of 25 files each.
func benchRepo(b *testing.B) (string, []string) {
	b.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("git CLI not on PATH")
	}
	d := b.TempDir()
	run := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@e"}, args...)...)
		cmd.Dir = d
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q")
	var paths []string
	for i := 0; i < 20; i++ {
		for j := 0; j < 25; j++ {
			p := fmt.Sprintf("d%02d/f%02d.txt", i, j)
			if err := os.MkdirAll(filepath.Join(d, filepath.Dir(p)), 0o755); err != nil {
				b.Fatal(err)
			}
			data := strings.Repeat(fmt.Sprintf("line %d %d\n", i, j), 200)
			if err := os.WriteFile(filepath.Join(d, p), []byte(data), 0o644); err != nil {
				b.Fatal(err)
			}
			paths = append(paths, p)
		}
	}
	run("add", "-A")
	run("commit", "-q", "-m", "bench")
	run("repack", "-adq")
	return d, paths
}

// BenchmarkReadAll reads every file of a packed revision under each storage
// setting, one fresh FS per iteration (cold tree cache).
func BenchmarkReadAll(b *testing.B) {
	d, paths := benchRepo(b)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		opts []Option
	}{
		{"default", nil},
		{"deltacache=0", []Option{WithDeltaBaseCacheSize(0)}},
		{"treecache=1", []Option{WithTreeCacheSize(1)}},
		{"stream=1KiB", []Option{WithStreamThreshold(1024)}},
		{"go-git", []Option{WithDirectPacks(false)}},
		{"go-git,fds=0", []Option{WithDirectPacks(false), WithMaxOpenDescriptors(0)}},
		{"go-git,large=1KiB,stream", []Option{WithDirectPacks(false), WithLargeObjectThreshold(1024), WithStreamThreshold(1024)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				g, err := Open(d, "HEAD", c.opts...)
				if err != nil {
					b.Fatal(err)
				}
				for _, p := range paths {
					h, err := g.OpenFile(ctx, vfs.MustParse(p), os.O_RDONLY, 0)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := io.Copy(io.Discard, h); err != nil {
						b.Fatal(err)
					}
					h.Close()
				}
				g.Close()
			}
		})
	}
}

// BenchmarkStreamedReadAt reads 4 KiB at random offsets of a 16 MiB packed blob
// opened streamed, through one handle: with the direct pack reader (checkpoints)
// and through go-git (every backward read reopens the object and inflates from
// the start).
func BenchmarkStreamedReadAt(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("git CLI not on PATH")
	}
	d := b.TempDir()
	run := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@e"}, args...)...)
		cmd.Dir = d
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q")
	var data strings.Builder
	for i := 0; data.Len() < 16<<20; i++ {
		fmt.Fprintf(&data, "%09d %x\n", i, i*2654435761)
	}
	if err := os.WriteFile(filepath.Join(d, "big"), []byte(data.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	run("add", "-A")
	run("commit", "-q", "-m", "big")
	run("repack", "-adq")
	size := int64(data.Len())
	for _, c := range []struct {
		name string
		opts []Option
	}{
		{"checkpoints", nil},
		{"go-git", []Option{WithDirectPacks(false), WithLargeObjectThreshold(1 << 20)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			g, err := Open(d, "HEAD", append(c.opts, WithStreamThreshold(1<<20))...)
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			h, err := g.OpenFile(context.Background(), vfs.MustParse("big"), os.O_RDONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			buf := make([]byte, 4096)
			// Decode the blob once, so the checkpoints exist.
			if _, err := h.ReadAt(buf, size-int64(len(buf))); err != nil {
				b.Fatal(err)
			}
			x := uint64(1)
			for b.Loop() {
				x = x*6364136223846793005 + 1442695040888963407
				off := int64(x>>1) % (size - int64(len(buf)))
				if n, err := h.ReadAt(buf, off); n != len(buf) || err != nil {
					b.Fatalf("ReadAt(%d) = %d, %v", off, n, err)
				}
			}
		})
	}
}
