package bench

import (
	"context"
	"io"
	"os"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/memfs"
	"github.com/spf13/afero"
)

const (
	createFlags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	appendFlags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
)

// BackendTarget drives a vfs.Backend through its SPI, parsing each path as a guest
// path first, as every layer above does.
type BackendTarget struct{ B vfs.Backend }

func (t BackendTarget) open(name string, flag int) (vfs.File, error) {
	p, err := vfs.ParseGuest(name)
	if err != nil {
		return nil, err
	}
	return t.B.OpenFile(context.Background(), p, flag, 0o644)
}

// Create implements Target.
func (t BackendTarget) Create(name string) (io.WriteCloser, error) { return t.open(name, createFlags) }

// Append implements Target.
func (t BackendTarget) Append(name string) (io.WriteCloser, error) { return t.open(name, appendFlags) }

// Open implements Target.
func (t BackendTarget) Open(name string) (io.ReadCloser, error) { return t.open(name, os.O_RDONLY) }

// Stat implements Target.
func (t BackendTarget) Stat(name string) (int64, error) {
	p, err := vfs.ParseGuest(name)
	if err != nil {
		return 0, err
	}
	info, err := t.B.Stat(context.Background(), p)
	return info.Size, err
}

// ReadDir implements Target.
func (t BackendTarget) ReadDir(name string) (int, error) {
	p, err := vfs.ParseGuest(name)
	if err != nil {
		return 0, err
	}
	ents, err := t.B.ReadDir(context.Background(), p)
	return len(ents), err
}

// Mkdir implements Target.
func (t BackendTarget) Mkdir(name string) error {
	p, err := vfs.ParseGuest(name)
	if err != nil {
		return err
	}
	return t.B.Mkdir(context.Background(), p, 0o755)
}

// AferoTarget drives an afero.Fs the way afero's own helpers do (afero.ReadDir for
// sorted listings).
type AferoTarget struct{ Fs afero.Fs }

// Create implements Target.
func (t AferoTarget) Create(name string) (io.WriteCloser, error) {
	return t.Fs.OpenFile(name, createFlags, 0o644)
}

// Append implements Target.
func (t AferoTarget) Append(name string) (io.WriteCloser, error) {
	return t.Fs.OpenFile(name, appendFlags, 0o644)
}

// Open implements Target.
func (t AferoTarget) Open(name string) (io.ReadCloser, error) { return t.Fs.Open(name) }

// Stat implements Target.
func (t AferoTarget) Stat(name string) (int64, error) {
	fi, err := t.Fs.Stat(name)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// ReadDir implements Target.
func (t AferoTarget) ReadDir(name string) (int, error) {
	fis, err := afero.ReadDir(t.Fs, name)
	return len(fis), err
}

// Mkdir implements Target.
func (t AferoTarget) Mkdir(name string) error { return t.Fs.Mkdir(name, 0o755) }

// BillyTarget drives a billy.Filesystem.
type BillyTarget struct{ Fs billy.Filesystem }

// Create implements Target.
func (t BillyTarget) Create(name string) (io.WriteCloser, error) {
	return t.Fs.OpenFile(name, createFlags, 0o644)
}

// Append implements Target.
func (t BillyTarget) Append(name string) (io.WriteCloser, error) {
	return t.Fs.OpenFile(name, appendFlags, 0o644)
}

// Open implements Target.
func (t BillyTarget) Open(name string) (io.ReadCloser, error) { return t.Fs.Open(name) }

// Stat implements Target.
func (t BillyTarget) Stat(name string) (int64, error) {
	fi, err := t.Fs.Stat(name)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// ReadDir implements Target.
func (t BillyTarget) ReadDir(name string) (int, error) {
	fis, err := t.Fs.ReadDir(name)
	return len(fis), err
}

// Mkdir implements Target.
func (t BillyTarget) Mkdir(name string) error { return t.Fs.MkdirAll(name, 0o755) }

// Names of the implementations, as the table prints them.
const (
	CapfsBackend = "capfs backend"
	CapfsDir     = "capfs Dir"
	// CapfsDirPolicy is a Dir with the default policy: every call resolves its
	// path to the canonical location and decides there too.
	CapfsDirPolicy = "capfs Dir+policy"
	AferoMem       = "afero MemMapFs"
	BillyMem       = "go-billy memfs"
)

// Impls returns every implementation measured, capfs first.
func Impls() []Impl {
	return []Impl{
		{Name: CapfsBackend, New: func() Target { return BackendTarget{B: memory.New()} }},
		{Name: CapfsDir, New: newDirTarget},
		{Name: CapfsDirPolicy, New: newDirPolicyTarget},
		{Name: AferoMem, New: func() Target { return AferoTarget{Fs: afero.NewMemMapFs()} }},
		{Name: BillyMem, New: func() Target { return BillyTarget{Fs: memfs.New()} }},
	}
}
