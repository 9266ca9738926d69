package vfs

import (
	"io"
	"io/fs"

	"github.com/capfs/capfs/internal/hostfd"
)

// FileAddress says how [AddressFile] shows a File to the caller of the layer
// that opened it.
type FileAddress struct {
	// Path is the path the caller named. Every error of the File names it.
	Path Path
	// Name, if set, is the Name Stat and OpenStat report: a mount point's
	// name, "." at a Sub's root.
	Name string
	// Fix, if set, maps each error of the File before it is re-addressed:
	// the layer's own reading of a code. It sees every error but nil and
	// [io.EOF].
	Fix func(error) error
}

// AddressFile returns f as the caller of the layer that opened it knows it.
//
// Each error f returns, but [io.EOF], goes through a.Fix (if set) and is then
// re-addressed to a.Path with [Readdress]. Stat and OpenStat report a.Name if
// it is set. Everything else is f's.
//
// The File implements exactly the optional File interfaces ([OptionalFiles])
// f implements, through [WrapFile]. So a type assertion on it answers as one
// on f would, and what it claims works.
// A nil f stays nil.
func AddressFile(f File, a FileAddress) File {
	if f == nil {
		return nil
	}
	return WrapFile(&addressedFile{f: f, path: a.Path.String(), name: a.Name, mapErr: a.Fix}, f)
}

// addressedFile is the File [AddressFile] returns. It implements every
// optional File interface, forwarding to f; [WrapFile] keeps those f has.
type addressedFile struct {
	f      File
	path   string            // the caller's path, for errors
	name   string            // if set, the Name Stat and OpenStat report
	mapErr func(error) error // FileAddress.Fix
}

// Type forwards to the wrapped File (see [TypedFile]).
func (a *addressedFile) Type() fs.FileMode { return a.f.(TypedFile).Type() }

// OpenStat forwards to the wrapped File (see [OpenStater]), with the name
// Stat reports.
func (a *addressedFile) OpenStat() (Info, bool) {
	info, ok := a.f.(OpenStater).OpenStat()
	if ok && a.name != "" {
		info.Name = a.name
	}
	return info, ok
}

// HostFd forwards to the wrapped File (see package hostfd): re-addressing
// errors adds no check the descriptor would escape.
func (a *addressedFile) HostFd(t hostfd.Token) (int, bool) { return a.f.(hostfd.Filer).HostFd(t) }

// addressedOf returns the addressedFile under a File [AddressFile] made.
func addressedOf(f File) (*addressedFile, bool) {
	a, ok := unwrapFile(f).(*addressedFile)
	return a, ok
}

// fix is err as the caller sees it: mapped by Fix, then re-addressed.
func (a *addressedFile) fix(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	if a.mapErr != nil {
		err = a.mapErr(err)
	}
	return Readdress(err, "", a.path, "")
}

// fixN is n and err as the caller sees them (see fix).
func (a *addressedFile) fixN(n int, err error) (int, error) { return n, a.fix(err) }

func (a *addressedFile) Read(b []byte) (int, error) { return a.fixN(a.f.Read(b)) }

func (a *addressedFile) ReadAt(b []byte, off int64) (int, error) { return a.fixN(a.f.ReadAt(b, off)) }

func (a *addressedFile) Write(b []byte) (int, error) { return a.fixN(a.f.Write(b)) }

func (a *addressedFile) WriteAt(b []byte, off int64) (int, error) { return a.fixN(a.f.WriteAt(b, off)) }

func (a *addressedFile) Seek(off int64, whence int) (int64, error) {
	n, err := a.f.Seek(off, whence)
	return n, a.fix(err)
}

func (a *addressedFile) Close() error { return a.fix(a.f.Close()) }

func (a *addressedFile) Stat() (Info, error) {
	info, err := a.f.Stat()
	if err != nil {
		return Info{}, a.fix(err)
	}
	if a.name != "" {
		info.Name = a.name
	}
	return info, nil
}

func (a *addressedFile) Truncate(size int64) error { return a.fix(a.f.Truncate(size)) }

func (a *addressedFile) Sync() error { return a.fix(a.f.Sync()) }
