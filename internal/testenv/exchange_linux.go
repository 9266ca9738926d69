//go:build linux

package testenv

import (
	"fmt"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Exchanging runs fn while, for each pair, a goroutine exchanges the pair's two
// names (paths beneath dir) with renameat2(RENAME_EXCHANGE) as fast as it can,
// the way a hostile host races a guest's calls. Every exchanger has stopped when
// Exchanging returns, whether fn returns or fails its test; a failed exchange
// fails t.
func Exchanging(t testing.TB, dir string, pairs [][2]string, fn func()) {
	t.Helper()
	dirfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("opening %s for the exchanges: %v", dir, err)
	}
	defer unix.Close(dirfd)
	stop := make(chan struct{})
	errs := make(chan error, len(pairs))
	var wg sync.WaitGroup
	for _, pair := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := unix.Renameat2(dirfd, pair[0], dirfd, pair[1], unix.RENAME_EXCHANGE); err != nil {
					errs <- fmt.Errorf("exchanging %s and %s: %w", pair[0], pair[1], err)
					return
				}
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}()
	fn()
}

// HeldFIFO makes a FIFO at path, holds both its ends (an O_RDWR open, which
// never waits on Linux) and writes data into it. The bytes stay there until
// someone reads the FIFO: the function returned reads what is left (at most
// 4 KiB), so a test can check that nothing it ran read from it. The FIFO's
// ends are closed at the end of t.
func HeldFIFO(t testing.TB, path, data string) (left func() string) {
	t.Helper()
	if err := unix.Mkfifo(path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("opening the FIFO: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.Write(fd, []byte(data)); err != nil {
		t.Fatalf("writing into the FIFO: %v", err)
	}
	return func() string {
		buf := make([]byte, 4096)
		n, _ := unix.Read(fd, buf)
		return string(buf[:max(n, 0)])
	}
}
