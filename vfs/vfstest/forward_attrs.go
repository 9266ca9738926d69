package vfstest

import (
	"context"
	"io/fs"
	"time"

	"github.com/capfs/capfs/vfs"
)

// The calls of vfs.LinkTimer, vfs.StatFSer and vfs.AttrFile, ready for the
// day they join vfs.Optionals and vfs.OptionalFiles (see vfs.LinkTimer).
func init() {
	optionalCalls["LinkTimer"] = func(ctx context.Context, w vfs.Backend, dir, file vfs.Path) error {
		return w.(vfs.LinkTimer).Lchtimes(ctx, file, time.Time{}, time.Time{})
	}
	optionalCalls["StatFSer"] = func(ctx context.Context, w vfs.Backend, dir, file vfs.Path) error {
		st, err := w.(vfs.StatFSer).StatFS(ctx, file)
		return want(err, st.Total > 0 && st.Free <= st.Total, "StatFS", file)
	}
	optionalFileCalls["AttrFile"] = func(h vfs.File, c fileCall) error {
		err := h.(vfs.AttrFile).Chtimes(time.Time{}, time.Time{})
		if c.ro && vfs.CodeOf(err) == vfs.CodeReadOnly {
			return nil // a read-only layer refuses it
		}
		return err
	}
}

// Lchtimes counts a call and changes nothing.
func (p *Probe) Lchtimes(ctx context.Context, q vfs.Path, atime, mtime time.Time) error {
	p.calls.add("LinkTimer")
	return nil
}

// StatFS counts a call and answers 1 GiB, half free.
func (p *Probe) StatFS(ctx context.Context, q vfs.Path) (vfs.FSStat, error) {
	p.calls.add("StatFSer")
	return vfs.FSStat{Total: 1 << 30, Free: 1 << 29}, nil
}

// Chmod counts a call and changes nothing.
func (f *probeFile) Chmod(fs.FileMode) error {
	f.calls.add("AttrFile")
	return nil
}

// Chtimes counts a call and changes nothing.
func (f *probeFile) Chtimes(time.Time, time.Time) error {
	f.calls.add("AttrFile")
	return nil
}
