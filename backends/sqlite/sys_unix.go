//go:build unix

package sqlite

import (
	"errors"
	"os"
	"syscall"
)

// lockExclusive locks f exclusively without waiting; errWouldBlock when
// another holder has it.
func lockExclusive(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errWouldBlock
	}
	return err
}
