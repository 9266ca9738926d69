package cowview

import (
	"errors"
	"io/fs"

	"github.com/capfs/capfs/vfs"
)

// openFile is f, a handle of the memory store (up files, directories) or of
// the lower tree (lower files, read-only), as a view's open file: its errors
// name the guest's path p and its Stat the name name (see [vfs.AddressFile]).
// A directory's Stat is info. A lower file's writes fail as on a handle not
// open for writing.
func openFile(f vfs.File, p vfs.Path, name string, info *vfs.Info, ro bool) vfs.File {
	a := vfs.FileAddress{Path: p, Name: name}
	if info != nil {
		a.Name = "" // info names it
	}
	if ro {
		a.Fix = notOpenForWriting
	}
	return vfs.AddressFile(file{File: f, info: info}, a)
}

// notOpenForWriting is a lower file's read_only as a view tells it: the
// view is writable, the handle is not.
func notOpenForWriting(err error) error {
	if e, ok := errors.AsType[*vfs.Error](err); ok && e.Code == vfs.CodeReadOnly {
		// The path is the file's: AddressFile re-addresses it after.
		return vfs.NewError(vfs.CodePermission, e.Op, vfs.Root, "file not open for writing")
	}
	return err
}

// file is a handle as a view's file: it knows whether it is a directory
// (info set), whose Stat is info. It has no optional File interface but
// [vfs.TypedFile]: a lower tree's status at open is not the view's, and it
// withholds [vfs.AttrFile], since a directory's handle is the store's root
// and a lower file's is the lower tree's, so fchmod or futimens through
// either would change the wrong object, or none.
type file struct {
	vfs.File
	info *vfs.Info // directories: what Stat reports
}

func (f file) Stat() (vfs.Info, error) {
	i, err := f.File.Stat()
	if err != nil || f.info == nil {
		return i, err
	}
	return *f.info, nil
}

// Type returns fs.ModeDir for a directory and 0 for a file.
func (f file) Type() fs.FileMode {
	if f.info != nil {
		return fs.ModeDir
	}
	return 0
}
