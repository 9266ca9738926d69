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
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, ErrNotRegular
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(data)) > max {
		return nil, nil, fmt.Errorf("more than %d bytes", max)
	}
	return data, st, nil
}
