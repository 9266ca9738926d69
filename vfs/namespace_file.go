package vfs

import (
	"errors"
	"io"
	"io/fs"
	"sync/atomic"
)

// wrapFile wraps a file opened under a mount below the namespace root so its errors
// carry the namespace path and, at a mount point, Stat carries the mount's name.
func wrapFile(f File, p Path, l *loc) File {
	if l.m.path.IsRoot() {
		return f
	}
	nf := &nsFile{f: f, path: p.String()}
	if l.kind == kindMountPoint {
		nf.name = p.Base()
	}
	return wrapAt(f, nf)
}

// addressFile makes the errors of f, a file the namespace opened at q (a path
// some link on p led to), name p, as its OpenFile(p) does.
func addressFile(f File, p, q Path) File {
	switch nf := f.(type) {
	case nil:
	case *nsFile:
		nf.path = p.String()
	case nsTypedFile:
		nf.path = p.String()
	default:
		if q.String() != p.String() {
			return wrapAt(f, &nsFile{f: f, path: p.String()})
		}
	}
	return f
}

// wrapAt is nf, the nsFile over f, kept a TypedFile when f is one.
func wrapAt(f File, nf *nsFile) File {
	if _, ok := f.(TypedFile); ok {
		return nsTypedFile{nf}
	}
	return nf
}

// nsTypedFile is an nsFile over a TypedFile.
type nsTypedFile struct{ *nsFile }

// Type forwards to the wrapped File (see [TypedFile]).
func (f nsTypedFile) Type() fs.FileMode { return f.f.(TypedFile).Type() }

// OpenStat forwards to the wrapped File (see [OpenStater]), with the name
// Stat reports.
func (f *nsFile) OpenStat() (Info, bool) {
	info, ok := OpenStat(f.f)
	if ok && f.name != "" {
		info.Name = f.name
	}
	return info, ok
}

// nsFile is a File opened under a mount below the namespace root.
type nsFile struct {
	f    File
	path string // the namespace path, for errors
	name string // if set, the Name Stat reports (a mount point's root)
}

func (f *nsFile) fix(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	var e *Error
	if errors.As(err, &e) {
		return Readdress(e, "", f.path, "")
	}
	return err
}

func (f *nsFile) Read(b []byte) (int, error) {
	n, err := f.f.Read(b)
	return n, f.fix(err)
}

func (f *nsFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.f.ReadAt(b, off)
	return n, f.fix(err)
}

func (f *nsFile) Write(b []byte) (int, error) {
	n, err := f.f.Write(b)
	return n, f.fix(err)
}

func (f *nsFile) WriteAt(b []byte, off int64) (int, error) {
	n, err := f.f.WriteAt(b, off)
	return n, f.fix(err)
}

func (f *nsFile) Seek(off int64, whence int) (int64, error) {
	n, err := f.f.Seek(off, whence)
	return n, f.fix(err)
}

func (f *nsFile) Close() error { return f.fix(f.f.Close()) }

func (f *nsFile) Stat() (Info, error) {
	info, err := f.f.Stat()
	if err != nil {
		return Info{}, f.fix(err)
	}
	if f.name != "" {
		info.Name = f.name
	}
	return info, nil
}

func (f *nsFile) Truncate(size int64) error { return f.fix(f.f.Truncate(size)) }

func (f *nsFile) Sync() error { return f.fix(f.f.Sync()) }

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
