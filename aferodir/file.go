package aferodir

import (
	"io/fs"
	"os"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// file is an afero.File over a Handle; its errors name the file as opened.
type file struct {
	h    *dir.Handle
	name string
}

func (f *file) err(op string, err error) error { return vfs.PathError(op, f.name, err) }

// Name returns the name the file was opened with, as os.File.Name does.
func (f *file) Name() string { return f.name }

// Close implements io.Closer.
func (f *file) Close() error { return f.err("close", f.h.Close()) }

// Read implements io.Reader; io.EOF passes through unchanged.
func (f *file) Read(b []byte) (int, error) {
	n, err := f.h.Read(b)
	return n, f.err("read", err)
}

// ReadAt implements io.ReaderAt.
func (f *file) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.h.ReadAt(b, off)
	return n, f.err("read", err)
}

// Seek implements io.Seeker.
func (f *file) Seek(offset int64, whence int) (int64, error) {
	n, err := f.h.Seek(offset, whence)
	return n, f.err("seek", err)
}

// Write implements io.Writer.
func (f *file) Write(b []byte) (int, error) {
	n, err := f.h.Write(b)
	return n, f.err("write", err)
}

// WriteAt implements io.WriterAt.
func (f *file) WriteAt(b []byte, off int64) (int, error) {
	n, err := f.h.WriteAt(b, off)
	return n, f.err("write", err)
}

// WriteString implements afero.File.
func (f *file) WriteString(s string) (int, error) { return f.Write([]byte(s)) }

// Stat implements afero.File.
func (f *file) Stat() (os.FileInfo, error) {
	fi, err := f.h.Stat()
	return fi, f.err("stat", err)
}

// Sync implements afero.File.
func (f *file) Sync() error { return f.err("sync", f.h.Sync()) }

// Truncate implements afero.File.
func (f *file) Truncate(size int64) error { return f.err("truncate", f.h.Truncate(size)) }

// Readdir implements afero.File like os.File.Readdir: with count > 0 at most
// count entries and io.EOF at the end, with count <= 0 all remaining entries.
// Each entry's information is its Lstat; an entry removed since the listing is
// left out.
func (f *file) Readdir(count int) ([]os.FileInfo, error) {
	ents, err := f.h.ReadDir(count)
	if err != nil {
		return nil, f.err("readdir", err)
	}
	out := make([]os.FileInfo, 0, len(ents))
	for _, e := range ents {
		fi, err := e.Info()
		if vfs.CodeOf(err) == vfs.CodeNotFound {
			continue
		}
		if err != nil {
			return out, f.err("readdir", err)
		}
		out = append(out, fi)
	}
	return out, nil
}

// Readdirnames implements afero.File like os.File.Readdirnames.
func (f *file) Readdirnames(n int) ([]string, error) {
	ents, err := f.h.ReadDir(n)
	if err != nil {
		return nil, f.err("readdir", err)
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

// ReadDir implements fs.ReadDirFile like os.File.ReadDir.
func (f *file) ReadDir(n int) ([]fs.DirEntry, error) {
	ents, err := f.h.ReadDir(n)
	return ents, f.err("readdir", err)
}
