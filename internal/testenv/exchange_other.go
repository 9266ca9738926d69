//go:build !linux

package testenv

import "testing"

// Exchanging skips t: exchanging two names atomically (renameat2
// RENAME_EXCHANGE) needs Linux.
func Exchanging(t testing.TB, dir string, pairs [][2]string, fn func()) {
	t.Helper()
	t.Skip("exchanging names (renameat2 RENAME_EXCHANGE) needs Linux")
}

// HeldFIFO skips t: holding both ends of a FIFO without waiting needs Linux's
// O_RDWR open of a FIFO.
func HeldFIFO(t testing.TB, path, data string) (left func() string) {
	t.Helper()
	t.Skip("a held FIFO needs Linux")
	return nil
}
