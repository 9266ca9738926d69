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
