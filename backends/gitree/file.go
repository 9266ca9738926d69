package gitree

import (
	"io"
	"io/fs"
	"sync"

	"github.com/capfs/capfs/vfs"
)

// file is an open blob (or directory) of an FS. The blob's content is held in
// memory whole; reads never touch the repository again.
type file struct {
	path vfs.Path
	info vfs.Info
	data []byte // nil for a directory

	mu     sync.Mutex
	off    int64
	closed bool
}

var _ vfs.TypedFile = (*file)(nil)

func (h *file) fail(code vfs.Code, op string) error {
	return vfs.NewError(code, op, h.path, "")
}

// readable checks, under h.mu, that h is open and not a directory.
func (h *file) readable(op string) error {
	if h.closed {
		return h.fail(vfs.CodeClosed, op)
	}
	if h.info.Mode.IsDir() {
		return h.fail(vfs.CodeIsDir, op)
	}
	return nil
}

// Read reads from the current offset.
func (h *file) Read(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.readable("read"); err != nil {
		return 0, err
	}
	if h.off >= int64(len(h.data)) {
		if len(b) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(b, h.data[h.off:])
	h.off += int64(n)
	return n, nil
}

// ReadAt reads at off without moving the offset; a short read returns io.EOF.
func (h *file) ReadAt(b []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.readable("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, h.fail(vfs.CodeInvalidPath, "read")
	}
	if off >= int64(len(h.data)) {
		if len(b) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(b, h.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// Seek sets the offset; a negative result fails with invalid_path.
func (h *file) Seek(offset int64, whence int) (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return 0, h.fail(vfs.CodeClosed, "seek")
	}
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = h.off
	case io.SeekEnd:
		base = int64(len(h.data))
	default:
		return 0, h.fail(vfs.CodeInvalidPath, "seek")
	}
	n := base + offset
	if n < 0 || (offset > 0 && n < base) {
		return 0, h.fail(vfs.CodeInvalidPath, "seek")
	}
	h.off = n
	return n, nil
}

// Write fails with read_only.
func (h *file) Write([]byte) (int, error) { return 0, h.writeErr("write") }

// WriteAt fails with read_only.
func (h *file) WriteAt([]byte, int64) (int, error) { return 0, h.writeErr("write") }

// Truncate fails with read_only.
func (h *file) Truncate(int64) error { return h.writeErr("truncate") }

func (h *file) writeErr(op string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return h.fail(vfs.CodeClosed, op)
	}
	return vfs.NewError(vfs.CodeReadOnly, op, h.path, "git revision is read-only")
}

// Stat returns the information the file was opened with.
func (h *file) Stat() (vfs.Info, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return vfs.Info{}, h.fail(vfs.CodeClosed, "stat")
	}
	return h.info, nil
}

// Sync does nothing: there is nothing to commit.
func (h *file) Sync() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return h.fail(vfs.CodeClosed, "sync")
	}
	return nil
}

// Close releases the content; later calls fail with closed.
func (h *file) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return h.fail(vfs.CodeClosed, "close")
	}
	h.closed = true
	h.data = nil
	return nil
}

// Type returns fs.ModeDir for a directory and 0 for a file.
func (h *file) Type() fs.FileMode { return h.info.Mode.Type() }
