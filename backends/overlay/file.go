package overlay

import (
	"io/fs"

	"github.com/capfs/capfs/internal/hostfd"
	"github.com/capfs/capfs/vfs"
)

// upperID keeps the upper's object IDs apart from the lower's.
func upperID(id uint64) uint64 { return vfs.MixID(id ^ 0x5bd1e9955bd1e995) }

// ovFile is an upper file whose Stat reports the ID Lstat reports. It keeps
// the optional File interfaces of the upper's file (see [vfs.WrapFile]),
// the host descriptor included: the upper is the overlay's private
// directory, so its files are the ones a mount may hand to the kernel
// (fuseexport's Options.Passthrough).
type ovFile struct{ vfs.File }

func (f ovFile) Stat() (vfs.Info, error) {
	info, err := f.File.Stat()
	info.ID = upperID(info.ID)
	return ownerless(info), err
}

// OpenStat is the upper file's status at its open, as Stat reports it (see
// [vfs.OpenStater]).
func (f ovFile) OpenStat() (vfs.Info, bool) {
	info, ok := f.File.(vfs.OpenStater).OpenStat()
	info.ID = upperID(info.ID)
	return ownerless(info), ok
}

// Type forwards to the upper's file (see [vfs.TypedFile]).
func (f ovFile) Type() fs.FileMode { return f.File.(vfs.TypedFile).Type() }

// HostFd forwards to the upper's file (see package hostfd).
func (f ovFile) HostFd(t hostfd.Token) (int, bool) { return f.File.(hostfd.Filer).HostFd(t) }

// lowerFile is a lower file whose Stat reports no owner, as Lstat does. It
// keeps the lower file's TypedFile and OpenStater (see [vfs.WrapFile]) and
// withholds its host descriptor: the lower is the guest's tree, read
// through the backend's checks, and a descriptor handed to the kernel would
// pass them by (and keep reading the lower after a copy-up).
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

func upperFile(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return vfs.WrapFile(ovFile{f}, f), nil
}
