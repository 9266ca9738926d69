package cowview

import (
	"io"
	"io/fs"

	"github.com/capfs/capfs/vfs"
)

// file is an open file of a view: a handle of the memory store (up files,
// directories) or of the lower tree (lower files, read-only), answering with
// the guest's path and name.
type file struct {
	vfs.File
	p    vfs.Path
	name string
	info *vfs.Info // directories: what Stat reports
	ro   bool      // a lower file: writes fail as on a handle not open for writing
}

func (f *file) fix(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return vfs.Readdress(err, "", f.p.String(), "")
}

func (f *file) Read(b []byte) (int, error) {
	n, err := f.File.Read(b)
	return n, f.fix(err)
}

func (f *file) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(b, off)
	return n, f.fix(err)
}

func (f *file) roErr(err error, op string) error {
	if f.ro && vfs.CodeOf(err) == vfs.CodeReadOnly {
		return vfs.NewError(vfs.CodePermission, op, f.p, "file not open for writing")
	}
	return f.fix(err)
}

func (f *file) Write(b []byte) (int, error) {
	n, err := f.File.Write(b)
	return n, f.roErr(err, "write")
}

func (f *file) WriteAt(b []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(b, off)
	return n, f.roErr(err, "write")
}

func (f *file) Truncate(size int64) error { return f.roErr(f.File.Truncate(size), "truncate") }

func (f *file) Seek(off int64, whence int) (int64, error) {
	n, err := f.File.Seek(off, whence)
	return n, f.fix(err)
}

func (f *file) Sync() error  { return f.fix(f.File.Sync()) }
func (f *file) Close() error { return f.fix(f.File.Close()) }

func (f *file) Stat() (vfs.Info, error) {
	i, err := f.File.Stat()
	if err != nil {
		return vfs.Info{}, f.fix(err)
	}
	if f.info != nil {
		return *f.info, nil
	}
	i.Name = f.name
	return i, nil
}

// Type returns fs.ModeDir for a directory and 0 for a file.
func (f *file) Type() fs.FileMode {
	if f.info != nil {
		return fs.ModeDir
	}
	return 0
}
