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

// ResolveKeptStat is ResolveStat's common case answered with the status the
// node keeps (as StatFileInfo answers Stat): when p reaches an entry without
// a symlink on the way (a final one followed only if follow is false), it
// returns p's location and that status, named p's last element, and true.
// Otherwise it returns false and the caller asks ResolveStat. It is how a
// dir.Dir with a policy answers Stat without building an fs.FileInfo.
func (f *FS) ResolveKeptStat(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, fs.FileInfo, bool) {
	if ctx.Err() != nil {
		return vfs.Location{}, nil, false
	}
	f.st.mu.RLock()
	_, n, name, ok := walkTo(f.root, p, follow)
	if !ok || n == nil {
		f.st.mu.RUnlock()
		return vfs.Location{}, nil, false
	}
	if name == "" {
		name = "."
	}
	fi := n.fileInfo(name)
	f.st.mu.RUnlock()
	return vfs.Location{Path: p.Resolved(), Found: true, Type: n.typ}, fi, true
}
