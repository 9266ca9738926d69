// Package billyfs presents a capfs Dir as a go-billy v5 file system
// (billy.Filesystem: Basic, TempFile, Dir, Symlink, Chroot, plus billy.Change:
// Chmod, Chown, Lchown, Chtimes),
// so libraries written against billy, go-git above all, work inside a
// capability: a clone into memory scratch, a work tree on a physical Dir under
// policy.
//
// Every method is one or a few enforced, audited calls on the Dir (with
// context.Background()): revocation, read-only attenuation, the policy, hooks
// and the audit trail apply exactly as to the same calls made directly.
//
// # Guarantees
//
//   - Names are Dir guest paths relative to the file system's root; a leading
//     "/" means that root and ".." cannot climb above it (the Dir refuses,
//     path_outside_sandbox). Chroot re-roots on a pinned Dir.Sub.
//   - Errors are *fs.PathError values whose Err is the errno the code stands
//     for ([vfs.PathError]: not_found is ENOENT, already_exists EEXIST,
//     read_only EROFS, ...), so os.IsNotExist, os.IsExist, os.IsPermission and
//     errors.Is with the io/fs sentinels agree, as go-git expects; the path is
//     the guest's, never a host path. io.EOF passes through unchanged. Package
//     aferodir returns the same errors, except the boundary refusal below.
//   - A name that leaves the root (path_outside_sandbox) is refused before
//     anything is created, with an *fs.PathError whose Err matches both EPERM
//     and billy.ErrCrossedBoundary under errors.Is, as billy's chroot helper
//     reports it (os.IsPermission, which looks for a bare errno, does not
//     recognise it; errors.Is(err, fs.ErrPermission) does).
//   - File.Name is the name billy's osfs gives for the same call: the path
//     from the root (the Chroot's after Chroot), cleaned, with no leading "/"
//     ("/bar/foo" and "bar/./foo" are "bar/foo").
//   - Capabilities are declared truthfully: read, write, read-and-write, seek
//     and truncate for a writable Dir; read and seek for a read-only one.
//     LockCapability is not declared: File.Lock and Unlock succeed without
//     locking anything, as billy's memfs does.
//   - As billy's osfs does, OpenFile with O_CREATE, Rename, Symlink and
//     TempFile create the missing parent directories of the name they create.
//
// # Not guaranteed
//
//   - MkdirAll ignores perm: directories get the Dir's 0755.
//   - Chroot creates the directory if it is missing (go-git chroots ".git"
//     before writing to it), as one MkdirAll.
//   - ReadDir returns each entry's Lstat, one Dir call per entry.
package billyfs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"
	"time"

	"github.com/go-git/go-billy/v5"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// FS is a billy.Filesystem over a Dir. It is safe for concurrent use.
type FS struct {
	d    *dir.Dir
	root string // shown by Root: "/" and the chroot path
}

var (
	_ billy.Filesystem = (*FS)(nil)
	_ billy.Capable    = (*FS)(nil)
	_ billy.Chmod      = (*FS)(nil)
	_ billy.Change     = (*FS)(nil)
)

// New returns d as a billy.Filesystem whose root is d's root.
func New(d *dir.Dir) *FS { return &FS{d: d, root: "/"} }

var bg = context.Background()

// Capabilities reports what the Dir allows: everything but locking for a
// writable Dir, reading and seeking for a read-only one.
func (f *FS) Capabilities() billy.Capability {
	if f.d.IsReadOnly() {
		return billy.ReadCapability | billy.SeekCapability
	}
	return billy.WriteCapability | billy.ReadCapability | billy.ReadAndWriteCapability |
		billy.SeekCapability | billy.TruncateCapability
}

// Create creates or truncates filename (mode 0666 before the Dir's rules) and
// opens it for reading and writing.
func (f *FS) Create(filename string) (billy.File, error) {
	return f.OpenFile(filename, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Open opens filename for reading.
func (f *FS) Open(filename string) (billy.File, error) {
	return f.OpenFile(filename, os.O_RDONLY, 0)
}

// OpenFile opens filename with os flags; with O_CREATE the missing parent
// directories are created first.
func (f *FS) OpenFile(filename string, flag int, perm os.FileMode) (billy.File, error) {
	if flag&os.O_CREATE != 0 {
		if err := f.mkParent(filename); err != nil {
			return nil, pathErr("open", filename, err)
		}
	}
	h, err := f.d.Open(bg, filename, flag, perm)
	if err != nil {
		return nil, pathErr("open", filename, err)
	}
	return &file{h: h, name: fileName(filename)}, nil
}

// mkParent creates the missing parent directories of name. name is parsed as
// the Dir parses it ([vfs.ParseGuest]), so a name that leaves the root is
// refused here and creates nothing.
func (f *FS) mkParent(name string) error {
	p, err := vfs.ParseGuest(name)
	if err != nil {
		return err
	}
	if p.Dir().IsRoot() {
		return nil
	}
	return f.d.MkdirAll(bg, p.Dir().String())
}

// Stat describes filename, following a final symlink.
func (f *FS) Stat(filename string) (os.FileInfo, error) {
	fi, err := f.d.Stat(bg, filename)
	return fi, pathErr("stat", filename, err)
}

// Lstat describes filename without following a final symlink.
func (f *FS) Lstat(filename string) (os.FileInfo, error) {
	fi, err := f.d.Lstat(bg, filename)
	return fi, pathErr("lstat", filename, err)
}

// Rename moves oldpath to newpath (replacing a file there), creating newpath's
// missing parent directories. Across mounts it fails with EXDEV.
func (f *FS) Rename(oldpath, newpath string) error {
	if err := f.mkParent(newpath); err != nil {
		return pathErr("rename", newpath, err)
	}
	return pathErr("rename", oldpath, f.d.Move(bg, oldpath, newpath))
}

// Remove removes a file, a symlink or an empty directory.
func (f *FS) Remove(filename string) error {
	return pathErr("remove", filename, f.d.Remove(bg, filename))
}

// Join joins path elements with "/".
func (f *FS) Join(elem ...string) string { return path.Join(elem...) }

// TempFile creates a new file in dir (created if missing) whose name begins
// with prefix, opened for reading and writing.
// An empty dir is the root, as in billy's chroot helper.
func (f *FS) TempFile(dirname, prefix string) (billy.File, error) {
	dp, err := f.tempDir(dirname)
	if err != nil {
		return nil, pathErr("tempfile", dirname, err)
	}
	for range 100 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		p, err := dp.Child(prefix + hex.EncodeToString(b[:]))
		if err != nil {
			return nil, pathErr("tempfile", dirname, err)
		}
		name := p.String()
		h, err := f.d.Open(bg, name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if vfs.CodeOf(err) == vfs.CodeExists {
			continue
		}
		if err != nil {
			return nil, pathErr("tempfile", name, err)
		}
		return &file{h: h, name: fileName(name)}, nil
	}
	return nil, pathErr("tempfile", dirname, vfs.ErrExists)
}

// tempDir parses dirname as the Dir does and creates it if missing.
func (f *FS) tempDir(dirname string) (vfs.Path, error) {
	if dirname == "" {
		return vfs.Root, nil
	}
	dp, err := vfs.ParseGuest(dirname)
	if err != nil {
		return vfs.Path{}, err
	}
	if dp.IsRoot() {
		return dp, nil
	}
	return dp, f.d.MkdirAll(bg, dp.String())
}

// ReadDir lists directory p, sorted by name, with each entry's Lstat.
func (f *FS) ReadDir(p string) ([]os.FileInfo, error) {
	ents, err := f.d.ReadDir(bg, p)
	if err != nil {
		return nil, pathErr("readdir", p, err)
	}
	out := make([]os.FileInfo, 0, len(ents))
	for _, e := range ents {
		fi, err := e.Info()
		if vfs.CodeOf(err) == vfs.CodeNotFound {
			continue // removed since the listing
		}
		if err != nil {
			return nil, pathErr("readdir", path.Join(p, e.Name()), err)
		}
		out = append(out, fi)
	}
	return out, nil
}

// MkdirAll creates directory p and its missing parents (perm is not used: see
// the package doc).
func (f *FS) MkdirAll(p string, perm os.FileMode) error {
	return pathErr("mkdir", p, f.d.MkdirAll(bg, p))
}

// Symlink creates link pointing to target, creating link's missing parent
// directories. The target must stay inside the Dir (the Dir refuses others).
func (f *FS) Symlink(target, link string) error {
	if err := f.mkParent(link); err != nil {
		return pathErr("symlink", link, err)
	}
	return pathErr("symlink", link, f.d.Symlink(bg, target, link))
}

// Readlink returns the target of symlink link.
func (f *FS) Readlink(link string) (string, error) {
	t, err := f.d.Readlink(bg, link)
	return t, pathErr("readlink", link, err)
}

// Chmod changes the permission bits of name (setuid and setgid are refused).
func (f *FS) Chmod(name string, mode os.FileMode) error {
	return pathErr("chmod", name, f.d.Chmod(bg, name, mode))
}

// Chown sets the numeric owner and group of name, following a symlink (-1
// keeps one): Dir.Chown, not_supported where the backend keeps no owners.
func (f *FS) Chown(name string, uid, gid int) error {
	return pathErr("chown", name, f.d.Chown(bg, name, uid, gid))
}

// Lchown is Chown of name itself, a symlink not followed (Dir.Lchown).
func (f *FS) Lchown(name string, uid, gid int) error {
	return pathErr("lchown", name, f.d.Lchown(bg, name, uid, gid))
}

// Chtimes changes the access and modification times of name.
func (f *FS) Chtimes(name string, atime, mtime time.Time) error {
	return pathErr("chtimes", name, f.d.Chtimes(bg, name, atime, mtime))
}

// Chroot returns the file system rooted at directory p, pinned with Dir.Sub
// (a later rename of p does not redirect it). A missing p is created first.
func (f *FS) Chroot(p string) (billy.Filesystem, error) {
	if err := f.d.MkdirAll(bg, p); err != nil {
		return nil, pathErr("chroot", p, err)
	}
	sub, err := f.d.Sub(bg, p)
	if err != nil {
		return nil, pathErr("chroot", p, err)
	}
	return &FS{d: sub, root: path.Join(f.root, p)}, nil
}

// Root returns the root's path from the Dir the first FS was made from ("/"
// for it, "/a/b" after Chroot("a/b")). It names no host directory.
func (f *FS) Root() string { return f.root }

// fileName is the name a file opened as filename reports, as billy's osfs
// reports it: the path from the root, cleaned, with no leading "/" ("/bar/foo"
// and "bar/./foo" are "bar/foo").
func fileName(filename string) string {
	p, err := vfs.ParseGuest(filename)
	if err != nil {
		return filename // not reached: the Dir opened the file by this name
	}
	return p.String()
}

// file is a billy.File over a Handle.
type file struct {
	h    *dir.Handle
	name string
}

func (fl *file) Name() string { return fl.name }

func (fl *file) Read(b []byte) (int, error) {
	n, err := fl.h.Read(b)
	return n, fileErr("read", fl.name, err)
}

func (fl *file) ReadAt(b []byte, off int64) (int, error) {
	n, err := fl.h.ReadAt(b, off)
	return n, fileErr("read", fl.name, err)
}

func (fl *file) Write(b []byte) (int, error) {
	n, err := fl.h.Write(b)
	return n, fileErr("write", fl.name, err)
}

func (fl *file) WriteAt(b []byte, off int64) (int, error) {
	n, err := fl.h.WriteAt(b, off)
	return n, fileErr("write", fl.name, err)
}

func (fl *file) Seek(off int64, whence int) (int64, error) {
	n, err := fl.h.Seek(off, whence)
	return n, fileErr("seek", fl.name, err)
}

func (fl *file) Close() error { return fileErr("close", fl.name, fl.h.Close()) }

func (fl *file) Truncate(size int64) error {
	return fileErr("truncate", fl.name, fl.h.Truncate(size))
}

// Stat describes the open file.
func (fl *file) Stat() (os.FileInfo, error) {
	fi, err := fl.h.Stat()
	return fi, fileErr("stat", fl.name, err)
}

// Lock does nothing: the FS does not declare billy.LockCapability.
func (fl *file) Lock() error { return nil }

// Unlock does nothing.
func (fl *file) Unlock() error { return nil }

func fileErr(op, name string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return pathErr(op, name, err)
}

// pathErr converts a Dir error into the *fs.PathError [vfs.PathError] builds,
// carrying the errno its code stands for, so os.IsNotExist and friends
// recognise it. A path_outside_sandbox refusal carries [errCrossed] instead.
func pathErr(op, name string, err error) error {
	if vfs.CodeOf(err) == vfs.CodeOutside {
		return &fs.PathError{Op: op, Path: name, Err: errCrossed}
	}
	return vfs.PathError(op, name, err)
}

// errCrossed is the Err of a refusal to leave the root: EPERM, the errno of
// path_outside_sandbox, and billy.ErrCrossedBoundary, what go-billy's chroot
// helper returns for the same name; errors.Is matches both (and
// fs.ErrPermission).
var errCrossed error = crossed{}

type crossed struct{}

func (crossed) Error() string {
	return billy.ErrCrossedBoundary.Error() + ": " + syscall.EPERM.Error()
}

func (crossed) Unwrap() []error { return []error{syscall.EPERM, billy.ErrCrossedBoundary} }
