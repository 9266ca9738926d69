package vfstest

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/capfs/capfs/vfs"
)

// hostRef is the reference the differential tests compare against: the [vfs.Backend]
// SPI implemented directly with package os on a real directory, unconfined (the
// scripts never escape), with errors mapped through [vfs.Errno]. Creation applies perm
// exactly, as a virtual backend does, rather than masking it with the umask.
type hostRef struct{ dir string }

func (h *hostRef) path(p vfs.Path) string {
	s := filepath.Join(h.dir, filepath.FromSlash(p.Raw()))
	if p.MustBeDir() {
		s += "/"
	}
	return s
}

func (h *hostRef) Features() vfs.Features {
	return vfs.Features{Symlinks: true, HardLinks: true, Chmod: true, Chtimes: true, Persistent: true}
}

func hostInfo(fi fs.FileInfo, name string) vfs.Info {
	return vfs.Info{
		Name: name, Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime(),
		Nlink: nlink(fi), ID: inode(fi),
	}
}

func (h *hostRef) Stat(_ context.Context, p vfs.Path) (vfs.Info, error) {
	fi, err := os.Stat(h.path(p))
	if err != nil {
		return vfs.Info{}, vfs.Errno("stat", p, err)
	}
	return hostInfo(fi, baseName(p)), nil
}

func (h *hostRef) Lstat(_ context.Context, p vfs.Path) (vfs.Info, error) {
	fi, err := os.Lstat(h.path(p))
	if err != nil {
		return vfs.Info{}, vfs.Errno("lstat", p, err)
	}
	return hostInfo(fi, baseName(p)), nil
}

func (h *hostRef) ReadDir(_ context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	ents, err := os.ReadDir(h.path(p))
	if err != nil {
		return nil, vfs.Errno("readdir", p, err)
	}
	out := make([]vfs.DirEntry, len(ents))
	for i, e := range ents {
		out[i] = vfs.DirEntry{Name: e.Name(), Type: e.Type()}
	}
	return out, nil
}

func (h *hostRef) OpenFile(_ context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	hp := h.path(p)
	_, statErr := os.Stat(hp)
	f, err := os.OpenFile(hp, flag, perm)
	if err != nil {
		return nil, vfs.Errno("open", p, err)
	}
	if flag&os.O_CREATE != 0 && errors.Is(statErr, fs.ErrNotExist) {
		if err := f.Chmod(perm); err != nil {
			f.Close()
			return nil, vfs.Errno("open", p, err)
		}
	}
	return &hostFile{f: f, p: p}, nil
}

func (h *hostRef) Mkdir(_ context.Context, p vfs.Path, perm fs.FileMode) error {
	if err := os.Mkdir(h.path(p), perm); err != nil {
		return vfs.Errno("mkdir", p, err)
	}
	return vfs.Errno("mkdir", p, os.Chmod(h.path(p), perm))
}

func (h *hostRef) Remove(_ context.Context, p vfs.Path) error {
	return vfs.Errno("remove", p, os.Remove(h.path(p)))
}

func (h *hostRef) Rename(_ context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	if flags != 0 {
		return vfs.NewError(vfs.CodeNotSupported, "rename", from, "flags")
	}
	return vfs.Errno("rename", from, hostRename(h.path(from), h.path(to)))
}

func (h *hostRef) Symlink(_ context.Context, target string, p vfs.Path) error {
	return vfs.Errno("symlink", p, os.Symlink(target, h.path(p)))
}

func (h *hostRef) Readlink(_ context.Context, p vfs.Path) (string, error) {
	s, err := os.Readlink(h.path(p))
	return s, vfs.Errno("readlink", p, err)
}

func (h *hostRef) Link(_ context.Context, oldp, newp vfs.Path) error {
	return vfs.Errno("link", oldp, os.Link(h.path(oldp), h.path(newp)))
}

func (h *hostRef) Chmod(_ context.Context, p vfs.Path, mode fs.FileMode) error {
	return vfs.Errno("chmod", p, os.Chmod(h.path(p), mode))
}

func (h *hostRef) Chtimes(_ context.Context, p vfs.Path, atime, mtime time.Time) error {
	return vfs.Errno("chtimes", p, os.Chtimes(h.path(p), atime, mtime))
}

func (h *hostRef) Sub(_ context.Context, p vfs.Path) (vfs.Backend, error) {
	return nil, vfs.NewError(vfs.CodeNotSupported, "sub", p, "reference backend")
}

// hostFile adapts *os.File, keeping io.EOF and mapping other errors with [vfs.Errno].
type hostFile struct {
	f *os.File
	p vfs.Path
}

func (f *hostFile) err(op string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return vfs.Errno(op, f.p, err)
}

func (f *hostFile) Read(b []byte) (int, error) {
	n, err := f.f.Read(b)
	return n, f.err("read", err)
}

func (f *hostFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.f.ReadAt(b, off)
	return n, f.err("read", err)
}

func (f *hostFile) Write(b []byte) (int, error) {
	n, err := f.f.Write(b)
	return n, f.err("write", err)
}

func (f *hostFile) WriteAt(b []byte, off int64) (int, error) {
	n, err := f.f.WriteAt(b, off)
	return n, f.err("write", err)
}

func (f *hostFile) Seek(off int64, whence int) (int64, error) {
	n, err := f.f.Seek(off, whence)
	return n, f.err("seek", err)
}

func (f *hostFile) Close() error              { return f.err("close", f.f.Close()) }
func (f *hostFile) Truncate(size int64) error { return f.err("truncate", f.f.Truncate(size)) }
func (f *hostFile) Sync() error               { return f.err("sync", f.f.Sync()) }

func (f *hostFile) Stat() (vfs.Info, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return vfs.Info{}, f.err("stat", err)
	}
	return hostInfo(fi, baseName(f.p)), nil
}

// baseName is the Info.Name a backend reports for p.
func baseName(p vfs.Path) string {
	if p.IsRoot() {
		return "."
	}
	return p.Base()
}

// Resolve resolves p through the os reference, one Lstat per component.
func (h *hostRef) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	return vfs.ResolveBackend(ctx, h, p, follow, "resolve")
}
