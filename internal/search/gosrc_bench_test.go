//go:build linux

package search_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/internal/search"
	"github.com/capfs/capfs/policy"
)

// BenchmarkGoSrc searches $(go env GOROOT)/src through a physical backend and
// a Dir with the default policy (CAPFS_BENCH_GOSRC=1 go test -bench GoSrc).
func BenchmarkGoSrc(b *testing.B) {
	if os.Getenv("CAPFS_BENCH_GOSRC") == "" {
		b.Skip("set CAPFS_BENCH_GOSRC=1")
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatal(err)
	}
	pb, err := physical.New(filepath.Join(strings.TrimSpace(string(out)), "src"))
	if err != nil {
		b.Fatal(err)
	}
	defer pb.Close()
	d, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
	for _, mode := range []search.Mode{search.Content, search.FilesWithMatches} {
		b.Run(map[search.Mode]string{search.Content: "content", search.FilesWithMatches: "files"}[mode], func(b *testing.B) {
			cpu0 := cpuTime()
			for range b.N {
				n := 0
				_, err := search.Search(context.Background(), d, ".", search.Options{Pattern: `func New[A-Z][a-zA-Z]*\(`, Mode: mode}, func(f *search.File) error {
					n++
					return nil
				})
				if err != nil || n == 0 {
					b.Fatal(n, err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

// cpuTime is the process's user and system CPU time so far: on a shared
// machine it moves less with the load than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGoSrcFloor measures the system calls alone that reading every file
// of $(go env GOROOT)/src costs, on two goroutines, with no matching and no
// directory listing (CAPFS_BENCH_GOSRC=1 go test -bench GoSrcFloor): "plain"
// opens each file by name, reads it and closes it, as rg and grep do;
// "confined" makes the physical backend's calls for a read open: openat2
// (O_PATH, RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), fstat, the reopen through
// /proc/self/fd (so that a FIFO or device is never opened), the close of the
// O_PATH handle, one read and the close. The difference is the floor the
// confinement sets under the engine.
func BenchmarkGoSrcFloor(b *testing.B) {
	if os.Getenv("CAPFS_BENCH_GOSRC") == "" {
		b.Skip("set CAPFS_BENCH_GOSRC=1")
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatal(err)
	}
	root := filepath.Join(strings.TrimSpace(string(out)), "src")
	var files []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			r, _ := filepath.Rel(root, p)
			files = append(files, r)
		}
		return nil
	})
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(rfd)
	procfd, err := unix.Open("/proc/self/fd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Skip("no /proc/self/fd")
	}
	defer unix.Close(procfd)
	plain := func(buf []byte, p string) error {
		fd, err := unix.Openat(rfd, p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for {
			n, err := unix.Read(fd, buf)
			if n <= 0 || err != nil {
				return err
			}
		}
	}
	confined := func(buf []byte, p string) error {
		o, err := unix.Openat2(rfd, p, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS})
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstat(o, &st); err != nil {
			unix.Close(o)
			return err
		}
		fd, err := unix.Openat(procfd, strconv.Itoa(o), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		unix.Close(o)
		if err != nil {
			return err
		}
		_, err = unix.Read(fd, buf[:min(len(buf), int(st.Size)+1)])
		unix.Close(fd)
		return err
	}
	for _, tc := range []struct {
		name string
		fn   func([]byte, string) error
	}{{"plain", plain}, {"confined", confined}} {
		b.Run(tc.name, func(b *testing.B) {
			cpu0 := cpuTime()
			for range b.N {
				work := make(chan string, 256)
				errs := make(chan error, 2)
				for range 2 {
					go func() {
						buf := make([]byte, 8<<20)
						var first error
						for p := range work {
							if err := tc.fn(buf, p); err != nil && first == nil {
								first = err
							}
						}
						errs <- first
					}()
				}
				for _, p := range files {
					work <- p
				}
				close(work)
				for range 2 {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}
