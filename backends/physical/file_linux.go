//go:build linux

package physical

import (
	"io"
	"io/fs"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

// file is an open regular file or directory: a descriptor behind the [vfs.File]
// contract, used with plain read/pread/write/pwrite calls. A readers-writer lock
// keeps Close from releasing the descriptor (whose number the kernel could then
// reuse for another file) while a call still uses it. Errors name the guest path
// only.
//
// A descriptor opened by name after a check (without a verified /proc, or with
// the portable resolver) may still carry O_NONBLOCK from that open (which keeps a
// FIFO swapped in at the last moment from blocking it); regular files ignore the
// flag on local filesystems, and the first EAGAIN (from a filesystem that honours
// it) clears it for good.
type file struct {
	mu       sync.RWMutex
	fd       int
	closed   bool
	cleanup  runtime.Cleanup
	blocking atomic.Bool // O_NONBLOCK has been cleared

	p       vfs.Path
	typ     fs.FileMode // fs.ModeDir or 0, as checked at the open
	name    string      // Info.Name
	rootDev uint64
	max     int64 // WithMaxFileSize; 0 for none
	read    bool  // opened for reading
	write   bool  // opened for writing
	append  bool  // O_APPEND

	opened    unix.Stat_t // the status checked at the open (OpenStat), when hasOpened
	hasOpened bool
}

var (
	_ vfs.TypedFile  = (*file)(nil)
	_ vfs.OpenStater = (*file)(nil)
)

// withOpenStat records st, the status of the object h opened as the open checked
// it, for OpenStat, and returns h.
func (h *file) withOpenStat(st *unix.Stat_t) *file {
	h.opened, h.hasOpened = *st, true
	return h
}

// OpenStat returns the status of the object as the open checked it ([vfs.OpenStater]),
// without a system call: the fstat of its O_PATH handle before the reopen, or of
// the descriptor right after a checked open. Files opened for writing record none.
func (h *file) OpenStat() (vfs.Info, bool) {
	if !h.hasOpened {
		return vfs.Info{}, false
	}
	return infoOf(&h.opened, h.name, h.rootDev), true
}

// newFile wraps fd, which it owns from then on, opened with flag, of type typ;
// nonblock says fd carries O_NONBLOCK.
func (f *FS) newFile(fd int, p vfs.Path, flag int, typ fs.FileMode, nonblock bool) *file {
	acc := flag & (os.O_WRONLY | os.O_RDWR)
	h := &file{
		fd:      fd,
		p:       p,
		typ:     typ,
		name:    baseName(p),
		rootDev: f.dev,
		max:     f.cfg.maxSize,
		read:    acc != os.O_WRONLY,
		write:   acc != os.O_RDONLY,
		append:  flag&os.O_APPEND != 0,
	}
	h.blocking.Store(!nonblock)
	// A File nobody closes releases its descriptor when it becomes unreachable.
	h.cleanup = runtime.AddCleanup(h, func(fd int) { unix.Close(fd) }, fd)
	return h
}

// Type returns the type of the open file, [fs.ModeDir] or 0 for a regular file, as
// checked when it was opened, without a system call ([vfs.TypedFile]).
func (h *file) Type() fs.FileMode { return h.typ }

func (h *file) err(op string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return wrap(op, h.p, err)
}

func (h *file) fail(code vfs.Code, op, msg string) error { return vfs.NewError(code, op, h.p, msg) }

// enter starts a call: the file must be open and, for reads and writes, open in
// that direction. It holds the descriptor until leave.
func (h *file) enter(op string, needRead, needWrite bool) (int, error) {
	h.mu.RLock()
	var err error
	switch {
	case h.closed:
		err = h.fail(vfs.CodeClosed, op, "file already closed")
	case needRead && !h.read:
		err = h.fail(vfs.CodePermission, op, "file not open for reading")
	case needWrite && !h.write:
		err = h.fail(vfs.CodePermission, op, "file not open for writing")
	}
	if err != nil {
		h.mu.RUnlock()
		return -1, err
	}
	return h.fd, nil
}

func (h *file) leave() { h.mu.RUnlock() }

// retry reports whether a call that failed with err should be repeated: after
// EINTR, and after the first EAGAIN of a descriptor opened with O_NONBLOCK, once
// that is cleared.
func (h *file) retry(fd int, err error) bool {
	switch err {
	case unix.EINTR:
		return true
	case unix.EAGAIN:
		if h.blocking.Load() {
			return false
		}
		if _, ferr := unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0); ferr != nil {
			return false
		}
		if h.append {
			unix.FcntlInt(uintptr(fd), unix.F_SETFL, unix.O_APPEND)
		}
		h.blocking.Store(true)
		return true
	}
	return false
}

// beyond is the outcome of a read starting at or past the maximum size plus one:
// file_too_large if the file is larger than the maximum, else io.EOF.
func (h *file) beyond(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
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
	fd, err := h.enter("read", true, false)
	if err != nil {
		return 0, err
	}
	defer h.leave()
	if h.max > 0 {
		off, err := unix.Seek(fd, 0, io.SeekCurrent)
		if err != nil {
			return 0, h.err("read", err)
		}
		lim := h.max + 1 - off
		if lim <= 0 {
			return 0, h.beyond(fd)
		}
		if int64(len(b)) > lim {
			b = b[:lim]
		}
	}
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, err := unix.Read(fd, b)
		if err != nil && h.retry(fd, err) {
			continue
		}
		if err != nil {
			return 0, h.err("read", err)
		}
		if n == 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

// ReadAt reads len(b) bytes at off without moving the offset, with Read's size
// limit; fewer bytes come with io.EOF (or file_too_large).
func (h *file) ReadAt(b []byte, off int64) (int, error) {
	fd, err := h.enter("read", true, false)
	if err != nil {
		return 0, err
	}
	defer h.leave()
	if off < 0 {
		return 0, h.fail(vfs.CodeInvalidPath, "read", "negative offset")
	}
	clamped := false
	if h.max > 0 {
		lim := h.max + 1 - off
		if lim <= 0 {
			return 0, h.beyond(fd)
		}
		if int64(len(b)) > lim {
			b, clamped = b[:lim], true
		}
	}
	n := 0
	for n < len(b) {
		m, err := unix.Pread(fd, b[n:], off+int64(n))
		if err != nil && h.retry(fd, err) {
			continue
		}
		if err != nil {
			return n, h.err("read", err)
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
	}
	if clamped {
		return n, wrap("read", h.p, errTooLarge)
	}
	return n, nil
}

// Write writes at the current offset (at the end with O_APPEND). With
// WithMaxFileSize, a write that would make the file larger writes nothing and
// fails with file_too_large.
func (h *file) Write(b []byte) (int, error) {
	fd, err := h.enter("write", false, true)
	if err != nil {
		return 0, err
	}
	defer h.leave()
	if h.max > 0 {
		var end int64
		if h.append {
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				return 0, h.err("write", err)
			}
			end = st.Size
		} else if end, err = unix.Seek(fd, 0, io.SeekCurrent); err != nil {
			return 0, h.err("write", err)
		}
		if end+int64(len(b)) > h.max {
			return 0, wrap("write", h.p, errTooLarge)
		}
	}
	n := 0
	for n < len(b) {
		m, err := unix.Write(fd, b[n:])
		if err != nil && h.retry(fd, err) {
			continue
		}
		if err != nil {
			return n, h.err("write", err)
		}
		if m == 0 {
			return n, h.err("write", io.ErrShortWrite)
		}
		n += m
	}
	return n, nil
}

// WriteAt writes at off without moving the offset. It fails with invalid_path on
// an O_APPEND handle, as in package os.
func (h *file) WriteAt(b []byte, off int64) (int, error) {
	fd, err := h.enter("write", false, true)
	if err != nil {
		return 0, err
	}
	defer h.leave()
	switch {
	case h.append:
		return 0, h.fail(vfs.CodeInvalidPath, "write", "WriteAt on a file opened with O_APPEND")
	case off < 0:
		return 0, h.fail(vfs.CodeInvalidPath, "write", "negative offset")
	case h.max > 0 && off+int64(len(b)) > h.max:
		return 0, wrap("write", h.p, errTooLarge)
	}
	n := 0
	for n < len(b) {
		m, err := unix.Pwrite(fd, b[n:], off+int64(n))
		if err != nil && h.retry(fd, err) {
			continue
		}
		if err != nil {
			return n, h.err("write", err)
		}
		if m == 0 {
			return n, h.err("write", io.ErrShortWrite)
		}
		n += m
	}
	return n, nil
}

// Seek sets the offset for the next Read or Write.
func (h *file) Seek(off int64, whence int) (int64, error) {
	fd, err := h.enter("seek", false, false)
	if err != nil {
		return 0, err
	}
	defer h.leave()
	n, err := unix.Seek(fd, off, whence)
	return n, h.err("seek", err)
}

// Truncate changes the size; with WithMaxFileSize, not beyond it.
func (h *file) Truncate(size int64) error {
	fd, err := h.enter("truncate", false, true)
	if err != nil {
		return err
	}
	defer h.leave()
	if h.max > 0 && size > h.max {
		return wrap("truncate", h.p, errTooLarge)
	}
	for {
		err := unix.Ftruncate(fd, size)
		if err != unix.EINTR {
			return h.err("truncate", err)
		}
	}
}

// Sync commits the file to stable storage (fsync).
func (h *file) Sync() error {
	fd, err := h.enter("sync", false, false)
	if err != nil {
		return err
	}
	defer h.leave()
	for {
		err := unix.Fsync(fd)
		if err != unix.EINTR {
			return h.err("sync", err)
		}
	}
}

// Close closes the file, after any call still using it; a second Close fails
// with closed.
func (h *file) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return h.fail(vfs.CodeClosed, "close", "file already closed")
	}
	h.closed = true
	h.cleanup.Stop()
	return h.err("close", unix.Close(h.fd))
}

// Stat describes the open file (fstat), named after the path it was opened by.
func (h *file) Stat() (vfs.Info, error) {
	fd, err := h.enter("stat", false, false)
	if err != nil {
		return vfs.Info{}, err
	}
	defer h.leave()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return vfs.Info{}, h.err("stat", err)
	}
	return infoOf(&st, h.name, h.rootDev), nil
}
