package vfstest

import (
	"context"
	"io/fs"
	"time"

	"github.com/capfs/capfs/vfs"
)

// The calls of vfs.LinkTimer, vfs.StatFSer (of vfs.Optionals) and
// vfs.AttrFile (of vfs.OptionalFiles). A read-only wrapper's refusal of
// LinkTimer or AttrFile is written down in its Forwarding's Refused.
func init() {
	optionalCalls["LinkTimer"] = func(ctx context.Context, w vfs.Backend, dir, file vfs.Path) error {
		return w.(vfs.LinkTimer).Lchtimes(ctx, file, time.Time{}, time.Time{})
	}
	optionalCalls["StatFSer"] = func(ctx context.Context, w vfs.Backend, dir, file vfs.Path) error {
		st, err := w.(vfs.StatFSer).StatFS(ctx, file)
		return want(err, st.Total > 0 && st.Free <= st.Total, "StatFS", file)
	}
	optionalFileCalls["AttrFile"] = func(h vfs.File, c fileCall) error {
		a := h.(vfs.AttrFile)
		if err := a.Chmod(0o644); err != nil {
			return err
		}
		return a.Chtimes(time.Time{}, time.Time{})
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
