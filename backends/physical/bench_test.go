//go:build linux

package physical

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

// benchTree makes a file 8 directories deep (and one at depth 1) holding 4 KiB.
func benchTree(b *testing.B) (root, deep string) {
	root = b.TempDir()
	deep = strings.Repeat("d/", 8) + "f"
	if err := os.MkdirAll(filepath.Join(root, filepath.Dir(deep)), 0o755); err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 4096)
	for _, p := range []string{deep, "f"} {
		if err := os.WriteFile(filepath.Join(root, p), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return root, deep
}

func BenchmarkOpenRead(b *testing.B) {
	root, deep := benchTree(b)
	buf := make([]byte, 8192)
	for _, depth := range []struct {
		name, path string
	}{{"depth1", "f"}, {"depth8", deep}} {
		b.Run("os/"+depth.name, func(b *testing.B) {
			p := filepath.Join(root, depth.path)
			for b.Loop() {
				f, err := os.Open(p)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(f, buf[:4096]); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
		for _, r := range resolvers {
			b.Run(r.name+"/"+depth.name, func(b *testing.B) {
				f, err := New(root, WithResolver(r.mode))
				if err != nil {
					b.Skip(err)
				}
				defer f.Close()
				q := vfs.MustParse(depth.path)
				ctx := b.Context()
				for b.Loop() {
					h, err := f.OpenFile(ctx, q, os.O_RDONLY, 0)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(h, buf[:4096]); err != nil {
						b.Fatal(err)
					}
					h.Close()
				}
			})
		}
	}
}

func BenchmarkStat(b *testing.B) {
	root, deep := benchTree(b)
	for _, depth := range []struct {
		name, path string
	}{{"depth1", "f"}, {"depth8", deep}} {
		b.Run("os/"+depth.name, func(b *testing.B) {
			p := filepath.Join(root, depth.path)
			for b.Loop() {
				if _, err := os.Stat(p); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, r := range resolvers {
			b.Run(r.name+"/"+depth.name, func(b *testing.B) {
				f, err := New(root, WithResolver(r.mode))
				if err != nil {
					b.Skip(err)
				}
				defer f.Close()
				q := vfs.MustParse(depth.path)
				ctx := b.Context()
				for b.Loop() {
					if _, err := f.Stat(ctx, q); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkCreateWrite(b *testing.B) {
	root := b.TempDir()
	data := make([]byte, 4096)
	for _, r := range resolvers {
		b.Run(r.name, func(b *testing.B) {
			f, err := New(root, WithResolver(r.mode))
			if err != nil {
				b.Skip(err)
			}
			defer f.Close()
			q := vfs.MustParse("new-" + r.name)
			ctx := b.Context()
			for b.Loop() {
				h, err := f.OpenFile(ctx, q, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := h.Write(data); err != nil {
					b.Fatal(err)
				}
				h.Close()
			}
		})
	}
}

// BenchmarkCanonical measures what a layer deciding on canonical paths pays at
// depth 8 with openat2: Resolve then the call on the Resolved path (two lookups),
// against the fused ResolveStat and ResolveOpen (one), and the plain call.
func BenchmarkCanonical(b *testing.B) {
	root, deep := benchTree(b)
	f, err := New(root, WithResolver(ResolverOpenat2))
	if err != nil {
		b.Skip(err)
	}
	defer f.Close()
	q := vfs.MustParse(deep)
	ctx := b.Context()
	buf := make([]byte, 8192)
	allow := func(vfs.Location) error { return nil }
	read := func(b *testing.B, h vfs.File, err error) {
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(h, buf[:4096]); err != nil {
			b.Fatal(err)
		}
		h.Close()
	}
	run := func(name string, fn func(b *testing.B)) {
		b.Run(name, func(b *testing.B) {
			// CPU time of the locked thread: on a shared machine, wall time mostly
			// measures waiting for a CPU.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var t0, t1 unix.Timespec
			unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t0)
			fn(b)
			unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t1)
			b.ReportMetric(float64(t1.Nano()-t0.Nano())/float64(b.N), "cpu-ns/op")
		})
	}
	run("stat/plain", func(b *testing.B) {
		for b.Loop() {
			if _, err := f.Stat(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
	})
	run("stat/resolve+stat", func(b *testing.B) {
		for b.Loop() {
			loc, err := f.Resolve(ctx, q, true)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Stat(ctx, loc.Path); err != nil {
				b.Fatal(err)
			}
		}
	})
	run("stat/ResolveStat", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := f.ResolveStat(ctx, q, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	run("read/plain", func(b *testing.B) {
		for b.Loop() {
			h, err := f.OpenFile(ctx, q, os.O_RDONLY, 0)
			read(b, h, err)
		}
	})
	run("read/resolve+open", func(b *testing.B) {
		for b.Loop() {
			loc, err := f.Resolve(ctx, q, true)
			if err != nil {
				b.Fatal(err)
			}
			h, err := f.OpenFile(ctx, loc.Path, os.O_RDONLY, 0)
			read(b, h, err)
		}
	})
	run("read/ResolveOpen", func(b *testing.B) {
		for b.Loop() {
			h, _, err := f.ResolveOpen(ctx, q, allow)
			read(b, h, err)
		}
	})
}

// BenchmarkOpenFloor measures, in bare system calls with no Go file around
// them, the three ways to open and read a file 8 directories deep: what
// os.Open asks of the kernel (openat by host path); the confined open this
// backend makes, which never opens a special file (openat2 O_PATH, fstat,
// the reopen through /proc/self/fd); and a confined open by name
// (openat2 O_RDONLY|O_NONBLOCK, fstat), which opens whatever is there,
// device or FIFO, before it can look. The second is the floor of OpenFile's
// guarantee on a kernel without a flag that refuses to open anything but a
// regular file.
func BenchmarkOpenFloor(b *testing.B) {
	root, deep := benchTree(b)
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(rfd)
	proc, err := unix.Open("/proc/self/fd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Skip("no /proc/self/fd:", err)
	}
	defer unix.Close(proc)
	if _, err := unix.Openat2(rfd, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC}); err != nil {
		b.Skip("no openat2:", err)
	}
	const confined = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_SYMLINKS
	buf := make([]byte, 8192)
	var st unix.Stat_t
	readClose := func(b *testing.B, fd int) {
		if n, err := unix.Read(fd, buf); err != nil || n != 4096 {
			b.Fatalf("read %d, %v", n, err)
		}
		unix.Close(fd)
	}
	b.Run("openat-host-path", func(b *testing.B) {
		p := filepath.Join(root, deep)
		for b.Loop() {
			fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			readClose(b, fd)
		}
	})
	b.Run("opath-fstat-proc-reopen", func(b *testing.B) {
		how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: confined}
		for b.Loop() {
			p, err := unix.Openat2(rfd, deep, how)
			if err != nil {
				b.Fatal(err)
			}
			if err := unix.Fstat(p, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
				b.Fatal("not a regular file", err)
			}
			fd, err := unix.Openat(proc, strconv.Itoa(p), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			unix.Close(p)
			if err != nil {
				b.Fatal(err)
			}
			readClose(b, fd)
		}
	})
	b.Run("openat2-by-name-nonblock", func(b *testing.B) {
		how := &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: confined}
		for b.Loop() {
			fd, err := unix.Openat2(rfd, deep, how)
			if err != nil {
				b.Fatal(err)
			}
			if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
				b.Fatal("not a regular file", err)
			}
			readClose(b, fd)
		}
	})
}
