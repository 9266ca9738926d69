package aferofs

import (
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/spf13/afero"
	"github.com/spf13/afero/mem"
)

// linkFs is a MemMapFs with symlinks, standing in for the afero filesystems that
// have them (sftpfs, say) so the shared suite can exercise the adapter's symlink
// confinement. A symlink is a MemMapFs file whose mode carries fs.ModeSymlink and
// whose content is the target; MemMapFs keeps type bits across Chmod and moves the
// entry on Rename like any other.
type linkFs struct{ *afero.MemMapFs }

func newLinkFs() linkFs { return linkFs{afero.NewMemMapFs().(*afero.MemMapFs)} }

// LstatIfPossible implements afero.Lstater: MemMapFs's Stat never follows anything.
func (l linkFs) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	fi, err := l.MemMapFs.Stat(name)
	return fi, true, err
}

// SymlinkIfPossible implements afero.Linker.
func (l linkFs) SymlinkIfPossible(oldname, newname string) error {
	f, err := l.MemMapFs.OpenFile(newname, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o777)
	if err != nil {
		return &os.LinkError{Op: "symlink", Old: oldname, New: newname, Err: err}
	}
	defer f.Close()
	if _, err := f.WriteString(oldname); err != nil {
		return err
	}
	mem.SetMode(f.(*mem.File).Data(), fs.ModeSymlink|0o777)
	return nil
}

// ReadlinkIfPossible implements afero.LinkReader.
func (l linkFs) ReadlinkIfPossible(name string) (string, error) {
	fi, err := l.MemMapFs.Stat(name)
	if err != nil {
		return "", err
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return "", &os.PathError{Op: "readlink", Path: name, Err: syscall.EINVAL}
	}
	f, err := l.MemMapFs.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return string(b), err
}
