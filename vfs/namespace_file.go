package vfs

import (
	"io/fs"
	"sync/atomic"
)

// wrapFile makes f, a file opened under a mount below the namespace root,
// name p in its errors and, at a mount point, the mount's name in Stat (see
// [AddressFile]).
func wrapFile(f File, p Path, l *loc) File {
	if l.m.path.IsRoot() {
		return f
	}
	a := FileAddress{Path: p}
	if l.kind == kindMountPoint {
		a.Name = p.Base()
	}
	return AddressFile(f, a)
}

// addressFile makes the errors of f, a file the namespace opened at q (a path
// some link on p led to), name p, as its OpenFile(p) does. A File
// [AddressFile] made (wrapFile's, a Sub's) is re-pointed at p; any other is
// wrapped, unless q is p.
func addressFile(f File, p, q Path) File {
	if a, ok := addressedOf(f); ok {
		a.path = p.String()
		return f
	}
	if f == nil || q.String() == p.String() {
		return f
	}
	return AddressFile(f, FileAddress{Path: p})
}

// synthFile is a synthetic directory opened for reading.
type synthFile struct {
	info   Info
	path   Path
	closed atomic.Bool
}

func (f *synthFile) err(op string, code Code) error {
	if f.closed.Load() {
		return &Error{Code: CodeClosed, Op: op, Path: f.path.String(), Err: fs.ErrClosed}
	}
	return NewError(code, op, f.path, "")
}

func (f *synthFile) Read([]byte) (int, error) { return 0, f.err("read", CodeIsDir) }

func (f *synthFile) ReadAt([]byte, int64) (int, error) { return 0, f.err("read", CodeIsDir) }

func (f *synthFile) Write([]byte) (int, error) { return 0, f.err("write", CodeReadOnly) }

func (f *synthFile) WriteAt([]byte, int64) (int, error) {
	return 0, f.err("write", CodeReadOnly)
}

func (f *synthFile) Truncate(int64) error { return f.err("truncate", CodeReadOnly) }

func (f *synthFile) Seek(off int64, whence int) (int64, error) {
	if f.closed.Load() {
		return 0, f.err("seek", CodeClosed)
	}
	return 0, nil
}

func (f *synthFile) Stat() (Info, error) {
	if f.closed.Load() {
		return Info{}, f.err("stat", CodeClosed)
	}
	return f.info, nil
}

func (f *synthFile) Sync() error {
	if f.closed.Load() {
		return f.err("sync", CodeClosed)
	}
	return nil
}

func (f *synthFile) Close() error {
	if f.closed.Swap(true) {
		return f.err("close", CodeClosed)
	}
	return nil
}
