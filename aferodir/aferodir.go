// Package aferodir presents a capfs Dir as an afero.Fs, so code written against
// afero runs inside a capability. It is the afero twin of package billyfs, and
// the reverse of backends/aferofs (an afero.Fs served as a backend).
//
// Every call is one enforced, audited call on the Dir (with
// context.Background()), through its public methods: revocation, read-only
// attenuation, policy, hooks and audit apply exactly as to the same call made
// directly.
//
// # Guarantees
//
//   - Names are Dir guest paths: slash-separated, relative to the Dir, with a
//     leading "/" meaning the Dir's own root, so the absolute names afero code
//     habitually uses ("/a/b") stay inside it.
//   - Errors are shaped as the os package shapes them: an *fs.PathError with the
//     operation, the name as the caller gave it (a guest path, never a host
//     path) and the errno the capfs code stands for ([vfs.Code.Errno]:
//     not_found is ENOENT, already_exists EEXIST, read_only EROFS, ...). So
//     os.IsNotExist, os.IsExist, os.IsPermission and errors.Is with the io/fs
//     sentinels agree, and afero.Exists reports a missing path as false.
//     vfs.Errno maps the errno back to a code. io.EOF passes through unchanged.
//   - The view's Name is "capfs". It implements afero.Lstater and
//     afero.Symlinker (links must stay inside the Dir, as with Dir.Symlink), and
//     its files have Readdir, Readdirnames, WriteString and Name.
//
// # Differences from afero.OsFs
//
//   - Chown is Dir.Chown: not_supported (EOPNOTSUPP) where the backend keeps no
//     owners.
//   - Chmod refuses setuid and setgid (EACCES) as Dir.Chmod does; the perm given
//     to OpenFile, Mkdir and MkdirAll keeps only the permission and sticky
//     bits, the way a umask would drop the others.
//   - Rename is Dir.Move without copying: across mounts it fails with EXDEV.
package aferodir

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/spf13/afero"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// FS is an afero.Fs over a Dir. It is safe for concurrent use.
type FS struct {
	d *dir.Dir
	b vfs.Backend // d.Backend(): the same checks, for calls that need a mode
}

var (
	_ afero.Fs        = (*FS)(nil)
	_ afero.Lstater   = (*FS)(nil)
	_ afero.Symlinker = (*FS)(nil)
	_ afero.File      = (*file)(nil)
)

// New returns d as an afero.Fs whose root is d's root.
func New(d *dir.Dir) *FS { return &FS{d: d, b: d.Backend()} }

var bg = context.Background()

// Name implements afero.Fs.
func (v *FS) Name() string { return "capfs" }

// Create implements afero.Fs: like os.Create, it creates or truncates name.
func (v *FS) Create(name string) (afero.File, error) {
	return v.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Open implements afero.Fs: it opens a file or directory for reading.
func (v *FS) Open(name string) (afero.File, error) {
	return v.OpenFile(name, os.O_RDONLY, 0)
}

// OpenFile implements afero.Fs.
func (v *FS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	h, err := v.d.Open(bg, name, flag, perm)
	if err != nil {
		return nil, vfs.PathError("open", name, err)
	}
	return &file{h: h, name: name}, nil
}

// Mkdir implements afero.Fs: it creates directory name with perm; the parent
// must exist.
func (v *FS) Mkdir(name string, perm os.FileMode) error {
	p, err := vfs.ParseGuest(name)
	if err == nil {
		err = v.b.Mkdir(bg, p, perm)
	}
	return vfs.PathError("mkdir", name, err)
}

// MkdirAll implements afero.Fs: it creates name and any missing parents with
// perm, and succeeds if name already is a directory (or a symlink to one).
func (v *FS) MkdirAll(name string, perm os.FileMode) error {
	p, err := vfs.ParseGuest(name)
	if err == nil {
		err = v.mkdirAll(p, perm)
	}
	return vfs.PathError("mkdir", name, err)
}

func (v *FS) mkdirAll(p vfs.Path, perm os.FileMode) error {
	elems := p.Elems()
	for i := range elems {
		q := vfs.MustParse(strings.Join(elems[:i+1], "/"))
		info, err := v.b.Stat(bg, q)
		switch {
		case err == nil:
			if !info.Mode.IsDir() {
				return vfs.NewError(vfs.CodeNotDir, "MkdirAll", q, "")
			}
			continue
		case vfs.CodeOf(err) != vfs.CodeNotFound:
			return err
		}
		err = v.b.Mkdir(bg, q, perm)
		if vfs.CodeOf(err) == vfs.CodeExists {
			// Created meanwhile; it must be a directory now.
			if info, serr := v.b.Stat(bg, q); serr != nil {
				return serr
			} else if !info.Mode.IsDir() {
				return err
			}
			err = nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Remove implements afero.Fs: it removes a file, symlink or empty directory.
func (v *FS) Remove(name string) error {
	return vfs.PathError("remove", name, v.d.Remove(bg, name))
}

// RemoveAll implements afero.Fs: it removes name and everything beneath it; a
// missing name is not an error.
func (v *FS) RemoveAll(name string) error {
	return vfs.PathError("removeall", name, v.d.RemoveAll(bg, name))
}

// Rename implements afero.Fs with Dir.Move (no copy across mounts). The error
// names oldname.
func (v *FS) Rename(oldname, newname string) error {
	return vfs.PathError("rename", oldname, v.d.Move(bg, oldname, newname))
}

// Stat implements afero.Fs, following a final symlink.
func (v *FS) Stat(name string) (os.FileInfo, error) {
	fi, err := v.d.Stat(bg, name)
	return fi, vfs.PathError("stat", name, err)
}

// LstatIfPossible implements afero.Lstater: it never follows a final symlink
// and always reports that it did not.
func (v *FS) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	fi, err := v.d.Lstat(bg, name)
	return fi, true, vfs.PathError("lstat", name, err)
}

// SymlinkIfPossible implements afero.Linker with Dir.Symlink: oldname is the
// target text and must stay inside the Dir. The error names newname.
func (v *FS) SymlinkIfPossible(oldname, newname string) error {
	return vfs.PathError("symlink", newname, v.d.Symlink(bg, oldname, newname))
}

// ReadlinkIfPossible implements afero.LinkReader.
func (v *FS) ReadlinkIfPossible(name string) (string, error) {
	s, err := v.d.Readlink(bg, name)
	return s, vfs.PathError("readlink", name, err)
}

// Chmod implements afero.Fs with Dir.Chmod.
func (v *FS) Chmod(name string, mode os.FileMode) error {
	return vfs.PathError("chmod", name, v.d.Chmod(bg, name, mode))
}

// Chown implements afero.Fs with Dir.Chown (EOPNOTSUPP where the backend keeps
// no owners).
func (v *FS) Chown(name string, uid, gid int) error {
	return vfs.PathError("chown", name, v.d.Chown(bg, name, uid, gid))
}

// Chtimes implements afero.Fs with Dir.Chtimes.
func (v *FS) Chtimes(name string, atime, mtime time.Time) error {
	return vfs.PathError("chtimes", name, v.d.Chtimes(bg, name, atime, mtime))
}
