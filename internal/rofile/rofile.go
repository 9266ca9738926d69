// Package rofile is the open-file handle of the read-only virtual backends (a
// git revision, a content-addressed tree): an immutable file, held whole or read
// on demand from a Source, or a directory, which opens but does not read.
//
// A File guarantees: reads at any offset, an offset of its own (Read, Seek), every
// write refused with read_only, every call after Close refused with closed, and
// errors addressed to the path it was opened at. It is safe for concurrent use;
// calls are serialized.
package rofile

import (
	"io"
	"io/fs"
	"sync"

	"github.com/capfs/capfs/vfs"
)

// Source reads a file's content on demand. ReadAt is called with the File's lock
// held, with 0 <= off < size and off+len(b) <= size; it returns its errors in
// their final form (addressed, typed). Close releases it; it is called once, at
// the File's Close.
type Source interface {
	ReadAt(b []byte, off int64) (int, error)
	Close() error
}

// File is an open file or directory of a read-only backend.
type File struct {
	path     vfs.Path
	info     vfs.Info
	data     []byte // the content held whole; nil with src or for a directory
	src      Source
	size     int64  // len(data), or info.Size with src
	readOnly string // the read_only message

	mu     sync.Mutex
	off    int64
	closed bool
}

var _ vfs.TypedFile = (*File)(nil)

// NewData returns a File holding data, the whole content (reads end at its
// length), or, for a directory (info's mode), nothing. readOnly is the message
// writes fail with ("git revision is read-only"). Stat reports info.
func NewData(p vfs.Path, info vfs.Info, data []byte, readOnly string) *File {
	return &File{path: p, info: info, data: data, size: int64(len(data)), readOnly: readOnly}
}

// NewSource returns a File of info.Size bytes read from src.
func NewSource(p vfs.Path, info vfs.Info, src Source, readOnly string) *File {
	return &File{path: p, info: info, src: src, size: info.Size, readOnly: readOnly}
}

func (h *File) fail(code vfs.Code, op string) error { return vfs.NewError(code, op, h.path, "") }

// readable checks, under h.mu, that h is open and not a directory.
func (h *File) readable(op string) error {
	if h.closed {
		return h.fail(vfs.CodeClosed, op)
	}
	if h.info.Mode.IsDir() {
		return h.fail(vfs.CodeIsDir, op)
	}
	return nil
}

// readAt reads at off under h.mu; a short read returns io.EOF.
func (h *File) readAt(b []byte, off int64) (int, error) {
	size := h.size
	if off >= size {
		if len(b) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	if h.src == nil {
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
	n, err := h.src.ReadAt(want, off)
	if err != nil {
		return n, err
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// Read reads from the current offset.
func (h *File) Read(b []byte) (int, error) {
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
func (h *File) ReadAt(b []byte, off int64) (int, error) {
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
func (h *File) Seek(offset int64, whence int) (int64, error) {
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
		base = h.size
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
func (h *File) Write([]byte) (int, error) { return 0, h.writeErr("write") }

// WriteAt fails with read_only.
func (h *File) WriteAt([]byte, int64) (int, error) { return 0, h.writeErr("write") }

// Truncate fails with read_only.
func (h *File) Truncate(int64) error { return h.writeErr("truncate") }

func (h *File) writeErr(op string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return h.fail(vfs.CodeClosed, op)
	}
	return vfs.NewError(vfs.CodeReadOnly, op, h.path, h.readOnly)
}

// Stat returns the information the file was opened with.
func (h *File) Stat() (vfs.Info, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return vfs.Info{}, h.fail(vfs.CodeClosed, "stat")
	}
	return h.info, nil
}

// Sync does nothing: the content is immutable.
func (h *File) Sync() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return h.fail(vfs.CodeClosed, "sync")
	}
	return nil
}

// Close releases the content; later calls fail with closed.
func (h *File) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return h.fail(vfs.CodeClosed, "close")
	}
	h.closed = true
	h.data = nil
	if h.src != nil {
		h.src.Close()
		h.src = nil
	}
	return nil
}

// Type returns fs.ModeDir for a directory and 0 for a file.
func (h *File) Type() fs.FileMode { return h.info.Mode.Type() }

// Source returns the Source the File reads from, nil when it holds its content
// whole (for a backend's own tests and diagnostics).
func (h *File) Source() Source {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.src
}
