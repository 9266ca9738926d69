package aferofs

import (
	"errors"
	"io"
	"os"
	"sync"

	"github.com/capfs/capfs/vfs"
	"github.com/spf13/afero"
)

// file is a vfs.File over an afero.File. It keeps its own offset and access mode and
// only ever calls ReadAt and WriteAt on the afero file, so the quirks of afero's
// handles (offsets shared between handles in tarfs, WriteAt moving the offset in
// MemMapFs, Read and ReadAt beyond the end panicking in zipfs) never show.
type file struct {
	mu     sync.Mutex
	s      *shared
	u      afero.File
	p      vfs.Path
	off    int64
	read   bool
	write  bool
	append bool
	isDir  bool
	closed bool
}

var _ vfs.File = (*file)(nil)

func newFile(s *shared, u afero.File, p vfs.Path, flag int, isDir bool) *file {
	acc := flag & accMode
	return &file{
		s:      s,
		u:      u,
		p:      p.WithoutDirMark(),
		read:   acc == os.O_RDONLY || acc == os.O_RDWR,
		write:  acc == os.O_WRONLY || acc == os.O_RDWR,
		append: flag&os.O_APPEND != 0,
		isDir:  isDir,
	}
}

func (f *file) fail(code vfs.Code, op, msg string) error {
	return vfs.NewError(code, op, f.p, msg)
}

// check returns the error for op on f's state; the caller holds f.mu.
func (f *file) check(op string, needRead, needWrite bool) error {
	switch {
	case f.closed:
		return &vfs.Error{Code: vfs.CodeClosed, Op: op, Path: f.p.String(), Err: os.ErrClosed}
	case f.isDir && (needRead || needWrite):
		return f.fail(vfs.CodeIsDir, op, "")
	case needRead && !f.read:
		return f.fail(vfs.CodePermission, op, "file not open for reading")
	case needWrite && !f.write:
		return f.fail(vfs.CodePermission, op, "file not open for writing")
	}
	return nil
}

// size returns the current size of the file.
func (f *file) size(op string) (int64, error) {
	fi, err := f.u.Stat()
	if err != nil {
		return 0, errOf(op, f.p, err)
	}
	return fi.Size(), nil
}

// readAt reads into b at off once, never past the current end; the caller holds f.mu.
func (f *file) readAt(op string, b []byte, off int64) (int, error) {
	sz, err := f.size(op)
	if err != nil {
		return 0, err
	}
	if off >= sz {
		return 0, io.EOF
	}
	if rem := sz - off; int64(len(b)) > rem {
		b = b[:rem]
	}
	n, err := f.u.ReadAt(b, off)
	if err != nil && err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) {
		return n, errOf(op, f.p, err)
	}
	if n == 0 && len(b) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Read implements io.Reader.
func (f *file) Read(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("read", true, false); err != nil {
		return 0, err
	}
	if len(b) == 0 {
		return 0, nil
	}
	n, err := f.readAt("read", b, f.off)
	f.off += int64(n)
	return n, err
}

// ReadAt implements io.ReaderAt: it fills b or returns an error (io.EOF at the end).
func (f *file) ReadAt(b []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("read", true, false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, f.fail(vfs.CodeInvalidPath, "read", "negative offset")
	}
	total := 0
	for total < len(b) {
		n, err := f.readAt("read", b[total:], off+int64(total))
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// Write implements io.Writer. With O_APPEND each write goes to the current end.
func (f *file) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("write", false, true); err != nil {
		return 0, err
	}
	if f.append {
		// Appends through this package are serialized, so the end does not move
		// between reading the size and writing.
		f.s.appMu.Lock()
		defer f.s.appMu.Unlock()
		sz, err := f.size("write")
		if err != nil {
			return 0, err
		}
		f.off = sz
	}
	n, err := f.writeAt(b, f.off)
	f.off += int64(n)
	return n, err
}

func (f *file) writeAt(b []byte, off int64) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, err := f.u.WriteAt(b, off)
	if err != nil {
		return n, errOf("write", f.p, err)
	}
	if n < len(b) {
		return n, f.fail(vfs.CodeIO, "write", "short write")
	}
	return n, nil
}

// WriteAt implements io.WriterAt. Like *os.File, it refuses a file opened with
// O_APPEND, and it does not move the offset.
func (f *file) WriteAt(b []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("write", false, true); err != nil {
		return 0, err
	}
	if f.append {
		return 0, f.fail(vfs.CodeInvalidPath, "write", "WriteAt on a file opened with O_APPEND")
	}
	if off < 0 {
		return 0, f.fail(vfs.CodeInvalidPath, "write", "negative offset")
	}
	return f.writeAt(b, off)
}

// Seek implements io.Seeker.
func (f *file) Seek(offset int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("seek", false, false); err != nil {
		return 0, err
	}
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = f.off
	case io.SeekEnd:
		sz, err := f.size("seek")
		if err != nil {
			return 0, err
		}
		base = sz
	default:
		return 0, f.fail(vfs.CodeInvalidPath, "seek", "invalid whence")
	}
	n := base + offset
	if n < 0 || (offset > 0 && n < base) {
		return 0, f.fail(vfs.CodeInvalidPath, "seek", "invalid offset")
	}
	f.off = n
	return n, nil
}

// Truncate changes the size of the file.
func (f *file) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("truncate", false, true); err != nil {
		return err
	}
	if size < 0 {
		return f.fail(vfs.CodeInvalidPath, "truncate", "negative size")
	}
	return errOf("truncate", f.p, f.u.Truncate(size))
}

// Stat returns information on the open file, named as it was opened.
func (f *file) Stat() (vfs.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("stat", false, false); err != nil {
		return vfs.Info{}, err
	}
	fi, err := f.u.Stat()
	if err != nil {
		return vfs.Info{}, errOf("stat", f.p, err)
	}
	return infoOf(fi, baseName(f.p)), nil
}

// Sync commits the file to the filesystem's storage, if it has any.
func (f *file) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("sync", false, false); err != nil {
		return err
	}
	return errOf("sync", f.p, f.u.Sync())
}

// Close closes the file; later calls fail with closed.
func (f *file) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("close", false, false); err != nil {
		return err
	}
	f.closed = true
	return errOf("close", f.p, f.u.Close())
}
