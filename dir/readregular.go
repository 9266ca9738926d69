package dir

import (
	"context"
	"io/fs"

	"github.com/capfs/capfs/vfs"
)

// regularReader is a backend that reads a regular file whole without opening
// a handle, in one allocation (the memory backend): a ReadFile through a Dir
// then allocates only its result. ReadRegular follows a final symlink; for
// anything but a regular file it returns nil data and the entry's type, for a
// file over max bytes nil data; its lookup errors are OpenFile's.
type regularReader interface {
	ReadRegular(ctx context.Context, p vfs.Path, max int64) (data []byte, typ fs.FileMode, size int64, err error)
}

// readRegular is readOpen's answer, read through r: the contents of p, or
// is_directory, not_regular or file_too_large as readOpen words them.
func readRegular(ctx context.Context, r regularReader, p vfs.Path, max int64) ([]byte, error) {
	data, typ, _, err := r.ReadRegular(ctx, p, max)
	switch {
	case err != nil:
		return nil, err
	case typ.IsDir():
		return nil, vfs.NewError(vfs.CodeIsDir, "read", p, "")
	case typ != 0:
		return nil, vfs.NewError(vfs.CodeNotRegular, "read", p, "")
	case data == nil:
		return nil, tooLarge(p, max)
	}
	return data, nil
}

// keptStater is a backend whose resolution of a status call can answer with
// the status it keeps, as fileInfoStater answers Stat (the memory backend):
// ResolveKeptStat returns the location of p, reached with no symlink on the
// way, and its fs.FileInfo named p's last element, or false and the caller
// resolves as usual. A Stat through a Dir with a policy then allocates
// nothing, as without one.
type keptStater interface {
	ResolveKeptStat(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, fs.FileInfo, bool)
}
