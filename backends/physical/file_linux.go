//go:build linux

package physical

import (
	"io"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

// file is an open regular file or directory: an *os.File (whose descriptor
// bookkeeping makes Close safe against concurrent calls) behind the vfs.File
// contract. Errors name the guest path only.
type file struct {
	f       *os.File
	p       vfs.Path
	name    string // Info.Name
	rootDev uint64
	max     int64 // WithMaxFileSize; 0 for none
	read    bool  // opened for reading
	write   bool  // opened for writing
	append  bool  // O_APPEND
	closed  atomic.Bool
}

var _ vfs.File = (*file)(nil)

// newFile wraps fd, which it owns from then on, opened with flag.
func (f *FS) newFile(fd int, p vfs.Path, flag int) *file {
	acc := flag & (os.O_WRONLY | os.O_RDWR)
	return &file{
		f:       os.NewFile(uintptr(fd), ""),
		p:       p,
		name:    baseName(p),
		rootDev: f.dev,
		max:     f.cfg.maxSize,
		read:    acc != os.O_WRONLY,
		write:   acc != os.O_RDONLY,
		append:  flag&os.O_APPEND != 0,
	}
}

func (h *file) err(op string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return wrap(op, h.p, err)
}

func (h *file) fail(code vfs.Code, op, msg string) error { return vfs.NewError(code, op, h.p, msg) }

// usable checks a call's preconditions: the file is open and, for reads and
// writes, open in that direction.
func (h *file) usable(op string, needRead, needWrite bool) error {
	switch {
	case h.closed.Load():
		return h.fail(vfs.CodeClosed, op, "file already closed")
	case needRead && !h.read:
		return h.fail(vfs.CodePermission, op, "file not open for reading")
	case needWrite && !h.write:
		return h.fail(vfs.CodePermission, op, "file not open for writing")
	}
	return nil
}

func (h *file) fstat(st *unix.Stat_t) error {
	rc, err := h.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstat(int(fd), st) }); err != nil {
		return err
	}
	return serr
}

// beyond is the outcome of a read starting at or past the maximum size
// plus one: file_too_large if the file is larger than the maximum, else io.EOF.
func (h *file) beyond() error {
	var st unix.Stat_t
	if err := h.fstat(&st); err != nil {
		return h.err("read", err)
	}
	if st.Size > h.max {
		return wrap("read", h.p, errTooLarge)
	}
	return io.EOF
}

// Read reads from the current offset. With WithMaxFileSize(n) it never returns a
// byte past offset n+1: the read that would fails with file_too_large.
func (h *file) Read(b []byte) (int, error) {
	if err := h.usable("read", true, false); err != nil {
		return 0, err
	}
	if h.max > 0 {
		off, err := h.f.Seek(0, io.SeekCurrent)
		if err != nil {
			return 0, h.err("read", err)
		}
		lim := h.max + 1 - off
		if lim <= 0 {
			return 0, h.beyond()
		}
		if int64(len(b)) > lim {
			b = b[:lim]
		}
	}
	n, err := h.f.Read(b)
	return n, h.err("read", err)
}

// ReadAt reads at off without moving the offset, with Read's size limit.
func (h *file) ReadAt(b []byte, off int64) (int, error) {
	if err := h.usable("read", true, false); err != nil {
		return 0, err
	}
	clamped := false
	if h.max > 0 && off >= 0 {
		lim := h.max + 1 - off
		if lim <= 0 {
			return 0, h.beyond()
		}
		if int64(len(b)) > lim {
			b, clamped = b[:lim], true
		}
	}
	n, err := h.f.ReadAt(b, off)
	if err == nil && clamped {
		err = errTooLarge
	}
	return n, h.err("read", err)
}

// Write writes at the current offset (at the end with O_APPEND). With
// WithMaxFileSize, a write that would make the file larger writes nothing and
// fails with file_too_large.
func (h *file) Write(b []byte) (int, error) {
	if err := h.usable("write", false, true); err != nil {
		return 0, err
	}
	if h.max > 0 {
		var end int64
		if h.append {
			var st unix.Stat_t
			if err := h.fstat(&st); err != nil {
				return 0, h.err("write", err)
			}
			end = st.Size
		} else {
			off, err := h.f.Seek(0, io.SeekCurrent)
			if err != nil {
				return 0, h.err("write", err)
			}
			end = off
		}
		if end+int64(len(b)) > h.max {
			return 0, wrap("write", h.p, errTooLarge)
		}
	}
	n, err := h.f.Write(b)
	return n, h.err("write", err)
}

// WriteAt writes at off without moving the offset. It fails with invalid_path on
// an O_APPEND handle, as in package os.
func (h *file) WriteAt(b []byte, off int64) (int, error) {
	if err := h.usable("write", false, true); err != nil {
		return 0, err
	}
	if h.append {
		return 0, h.fail(vfs.CodeInvalidPath, "write", "WriteAt on a file opened with O_APPEND")
	}
	if h.max > 0 && off >= 0 && off+int64(len(b)) > h.max {
		return 0, wrap("write", h.p, errTooLarge)
	}
	n, err := h.f.WriteAt(b, off)
	return n, h.err("write", err)
}

// Seek sets the offset for the next Read or Write.
func (h *file) Seek(off int64, whence int) (int64, error) {
	if err := h.usable("seek", false, false); err != nil {
		return 0, err
	}
	n, err := h.f.Seek(off, whence)
	return n, h.err("seek", err)
}

// Truncate changes the size; with WithMaxFileSize, not beyond it.
func (h *file) Truncate(size int64) error {
	if err := h.usable("truncate", false, true); err != nil {
		return err
	}
	if h.max > 0 && size > h.max {
		return wrap("truncate", h.p, errTooLarge)
	}
	return h.err("truncate", h.f.Truncate(size))
}

// Sync commits the file to stable storage (fsync).
func (h *file) Sync() error {
	if err := h.usable("sync", false, false); err != nil {
		return err
	}
	return h.err("sync", h.f.Sync())
}

// Close closes the file; a second Close fails with closed.
func (h *file) Close() error {
	if h.closed.Swap(true) {
		return h.fail(vfs.CodeClosed, "close", "file already closed")
	}
	return h.err("close", h.f.Close())
}

// Stat describes the open file (fstat), named after the path it was opened by.
func (h *file) Stat() (vfs.Info, error) {
	if err := h.usable("stat", false, false); err != nil {
		return vfs.Info{}, err
	}
	var st unix.Stat_t
	if err := h.fstat(&st); err != nil {
		return vfs.Info{}, h.err("stat", err)
	}
	return infoOf(&st, h.name, h.rootDev), nil
}
