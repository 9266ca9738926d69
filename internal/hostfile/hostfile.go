// Package hostfile reads a host file that came from outside (a project's own
// .git/config, its .git/index): only a regular file, opened without blocking,
// and no more than a bound.
package hostfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is the answer for a file that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ReadRegular reads the regular file at name (following links), at most max
// bytes, and returns its contents and status. A FIFO or device is refused
// (ErrNotRegular) without a read that could block or never end, and a longer
// file is an error, not a truncated read. Errors name no path.
func ReadRegular(name string, max int64) ([]byte, fs.FileInfo, error) {
	f, st, err := OpenRegular(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(data)) > max {
		return nil, nil, fmt.Errorf("more than %d bytes", max)
	}
	return data, st, nil
}

// OpenRegular opens the regular file at name (following links) for reading
// and returns it with its status, for a caller that reads it in place (an
// archive too large to hold in memory). A FIFO, device or directory is
// refused (ErrNotRegular) without a read, and the open itself does not block
// on a FIFO. An open that fails returns the error of open(2) alone
// (an [syscall.Errno]), so no path, the caller's or a resolved one, is in it.
func OpenRegular(name string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = ErrNotRegular
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}
