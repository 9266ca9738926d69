package overlay

import (
	"io/fs"

	"github.com/capfs/capfs/internal/hostfd"
	"github.com/capfs/capfs/vfs"
)

// upperID keeps the upper's object IDs apart from the lower's.
func upperID(id uint64) uint64 { return vfs.MixID(id ^ 0x5bd1e9955bd1e995) }

// ovFile is an upper file whose Stat reports the ID Lstat reports.
type ovFile struct{ vfs.File }

func (f ovFile) Stat() (vfs.Info, error) {
	info, err := f.File.Stat()
	info.ID = upperID(info.ID)
	return ownerless(info), err
}

// OpenStat is the upper file's status at its open, as Stat reports it (see
// [vfs.OpenStater]).
func (f ovFile) OpenStat() (vfs.Info, bool) {
	info, ok := vfs.OpenStat(f.File)
	info.ID = upperID(info.ID)
	return ownerless(info), ok
}

// lowerFile is a lower file whose Stat reports no owner, as Lstat does.
type lowerFile struct{ vfs.File }

func (f lowerFile) Stat() (vfs.Info, error) {
	info, err := f.File.Stat()
	return ownerless(info), err
}

// OpenStat is the lower file's status at its open, as Stat reports it (see
// [vfs.OpenStater]).
func (f lowerFile) OpenStat() (vfs.Info, bool) {
	info, ok := vfs.OpenStat(f.File)
	return ownerless(info), ok
}

// typedFile is a layer's file (ovFile, lowerFile) over a [vfs.TypedFile]: it
// answers the type the backend's file knows, so the Dir above does not fstat
// it at each open.
type typedFile struct {
	vfs.File
	typ fs.FileMode
}

func (f typedFile) Type() fs.FileMode { return f.typ }

// OpenStat forwards to the wrapped layer's file (see [vfs.OpenStater]).
func (f typedFile) OpenStat() (vfs.Info, bool) { return vfs.OpenStat(f.File) }

// HostFd forwards to the wrapped layer's file (an upper file answers, a
// lower one never does).
func (f typedFile) HostFd(t hostfd.Token) (int, bool) { return hostfd.Of(f.File) }

// typed is w, the wrapper of f, made a vfs.TypedFile when f is one.
func typed(w, f vfs.File) vfs.File {
	if tf, ok := f.(vfs.TypedFile); ok {
		return typedFile{w, tf.Type()}
	}
	return w
}

// lowerOf wraps f, opened in the lower layer.
func lowerOf(f vfs.File) vfs.File { return typed(lowerFile{f}, f) }

func upperFile(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return typed(ovFile{f}, f), nil
}

// HostFd forwards to the upper file (see package hostfd): the upper is the
// overlay's private directory, so its files are the ones a mount may hand
// to the kernel (Options.Passthrough). A lower file never answers.
func (f ovFile) HostFd(t hostfd.Token) (int, bool) { return hostfd.Of(f.File) }
