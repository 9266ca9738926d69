package overlay

import (
	"io/fs"
	"time"

	"github.com/capfs/capfs/internal/hostfd"
	"github.com/capfs/capfs/vfs"
)

// ovFile is an upper file whose Stat reports the ID Lstat reports (see
// ident.go), taken at its open: a file open when its copy loses its last
// name keeps the ID it had. It keeps the optional File interfaces of the
// upper's file (see [vfs.WrapFile]), the host descriptor included: the
// upper is the overlay's private directory, so its files are the ones a
// mount may hand to the kernel (fuseexport's Options.Passthrough).
type ovFile struct {
	vfs.File
	g  *origins
	id uint64 // the ID shown; 0 when the open recorded no status
}

// showID sets info's ID, the upper's, to the one f shows.
func (f ovFile) showID(info vfs.Info) vfs.Info {
	if f.id != 0 {
		info.ID = f.id
	} else {
		info.ID = f.g.id(info.ID)
	}
	return ownerless(info)
}

func (f ovFile) Stat() (vfs.Info, error) {
	info, err := f.File.Stat()
	return f.showID(info), err
}

// OpenStat is the upper file's status at its open, as Stat reports it (see
// [vfs.OpenStater]).
func (f ovFile) OpenStat() (vfs.Info, bool) {
	info, ok := f.File.(vfs.OpenStater).OpenStat()
	return f.showID(info), ok
}

// Type forwards to the upper's file (see [vfs.TypedFile]).
func (f ovFile) Type() fs.FileMode { return f.File.(vfs.TypedFile).Type() }

// Chmod forwards to the upper's file (see [vfs.AttrFile]): it is the
// overlay's own copy, whatever names it has now.
func (f ovFile) Chmod(mode fs.FileMode) error { return f.File.(vfs.AttrFile).Chmod(mode) }

// Chtimes forwards to the upper's file (see [vfs.AttrFile]).
func (f ovFile) Chtimes(atime, mtime time.Time) error {
	return f.File.(vfs.AttrFile).Chtimes(atime, mtime)
}

// HostFd forwards to the upper's file (see package hostfd).
func (f ovFile) HostFd(t hostfd.Token) (int, bool) { return f.File.(hostfd.Filer).HostFd(t) }

// lowerFile is a lower file whose Stat reports no owner, as Lstat does. It
// keeps the lower file's TypedFile and OpenStater (see [vfs.WrapFile]) and
// withholds its host descriptor: the lower is the guest's tree, read
// through the backend's checks, and a descriptor handed to the kernel would
// pass them by (and keep reading the lower after a copy-up). It withholds
// [vfs.AttrFile] too: the overlay never changes the lower.
type lowerFile struct{ vfs.File }

func (f lowerFile) Stat() (vfs.Info, error) {
	info, err := f.File.Stat()
	return ownerless(info), err
}

// OpenStat is the lower file's status at its open, as Stat reports it (see
// [vfs.OpenStater]).
func (f lowerFile) OpenStat() (vfs.Info, bool) {
	info, ok := f.File.(vfs.OpenStater).OpenStat()
	return ownerless(info), ok
}

// Type forwards to the lower's file (see [vfs.TypedFile]).
func (f lowerFile) Type() fs.FileMode { return f.File.(vfs.TypedFile).Type() }

// lowerOf wraps f, opened in the lower layer.
func lowerOf(f vfs.File) vfs.File { return vfs.WrapFile(lowerFile{f}, f) }

// upperFile wraps f, opened in the upper layer, taking the ID it shows
// from the status its open recorded.
func (o *Overlay) upperFile(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	w := ovFile{File: f, g: &o.origin}
	if info, ok := vfs.OpenStat(f); ok && info.ID != 0 {
		w.id = o.origin.id(info.ID)
	}
	return vfs.WrapFile(w, f), nil
}
