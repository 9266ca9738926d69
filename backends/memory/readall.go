package memory

import (
	"context"
	"io/fs"

	"github.com/capfs/capfs/vfs"
)

// ReadRegular returns a copy of the contents of the regular file p reaches (a
// final symlink followed), made in one allocation, the result: no handle is
// opened. For an entry that is not a regular file it returns nil data and the
// entry's type (fs.ModeDir, ...); for a file over max bytes, nil data and its
// size; the caller words those errors. Lookup errors are OpenFile's (op
// "open"). It is how a dir.Dir's ReadFile reads a memory file.
func (f *FS) ReadRegular(ctx context.Context, p vfs.Path, max int64) (data []byte, typ fs.FileMode, size int64, err error) {
	const op = "open"
	if err := ctx.Err(); err != nil {
		return nil, 0, 0, canceled(op, p, err)
	}
	f.st.mu.RLock()
	defer f.st.mu.RUnlock()
	r, err := f.lookup(ctx, p, true, op)
	if err != nil {
		return nil, 0, 0, err
	}
	if !r.Found {
		return nil, 0, 0, vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	n := r.Node
	if n.typ != 0 {
		return nil, n.typ, 0, nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	if size = int64(len(n.data)); size > max {
		return nil, 0, size, nil
	}
	data = make([]byte, size)
	copy(data, n.data)
	return data, 0, size, nil
}
