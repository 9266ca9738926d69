package gitree

import (
	"io"
	"io/fs"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/capfs/capfs/vfs"
)

// file is an open blob (or directory) of an FS. A blob up to the FS's stream
// threshold is held in memory whole, and reads never touch the repository again;
// a larger one is streamed from the object store (see blobSource).
type file struct {
	path vfs.Path
	info vfs.Info
	data []byte // content of a small blob; nil for a directory or a streamed blob

	// Streamed blobs only.
	r        *repoState
	hash     plumbing.Hash
	streamed bool

	mu     sync.Mutex
	off    int64
	closed bool
	src    blobSource // a streamed blob's reader; nil until the first read
}

func (h *file) size() int64 {
	if h.streamed {
		return h.info.Size
	}
	return int64(len(h.data))
}

// readAt reads at off under h.mu, from memory or the stream.
func (h *file) readAt(b []byte, off int64) (int, error) {
	size := h.size()
	if off >= size {
		if len(b) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	if !h.streamed {
		n := copy(b, h.data[off:])
		if n < len(b) {
			return n, io.EOF
		}
		return n, nil
	}
	want := b
	if rem := size - off; int64(len(want)) > rem {
		want = want[:rem]
	}
	n, err := h.readStream(want, off)
	if err != nil {
		return n, vfs.Errno("read", h.path, err)
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// readStream fills b from the streamed blob at off, through the blob source
// chosen at the first read (see blobSource).
func (h *file) readStream(b []byte, off int64) (int, error) {
	if h.src == nil {
		src, err := h.r.openStream(h.hash, h.info.Size)
		if err != nil {
			return 0, err
		}
		h.src = src
	}
	return h.src.readAt(b, off)
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
	n, err := h.readAt(b, h.off)
	h.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
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
	return h.readAt(b, off)
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
		base = h.size()
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
	if h.src != nil {
		h.src.close()
		h.src = nil
	}
	return nil
}

// Type returns fs.ModeDir for a directory and 0 for a file.
func (h *file) Type() fs.FileMode { return h.info.Mode.Type() }
